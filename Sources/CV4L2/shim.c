#include "CV4L2.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <linux/videodev2.h>

_Static_assert(CFB_V4L2_CAP_VIDEO_CAPTURE == V4L2_CAP_VIDEO_CAPTURE, "V4L2_CAP_VIDEO_CAPTURE");
_Static_assert(CFB_V4L2_CAP_VIDEO_CAPTURE_MPLANE == V4L2_CAP_VIDEO_CAPTURE_MPLANE, "V4L2_CAP_VIDEO_CAPTURE_MPLANE");
_Static_assert(CFB_V4L2_CAP_STREAMING == V4L2_CAP_STREAMING, "V4L2_CAP_STREAMING");
_Static_assert(CFB_V4L2_CAP_DEVICE_CAPS == V4L2_CAP_DEVICE_CAPS, "V4L2_CAP_DEVICE_CAPS");
_Static_assert(CFB_V4L2_PIX_FMT_NV12 == V4L2_PIX_FMT_NV12, "V4L2_PIX_FMT_NV12");
_Static_assert(CFB_V4L2_PIX_FMT_P010 == V4L2_PIX_FMT_P010, "V4L2_PIX_FMT_P010");
_Static_assert(CFB_V4L2_PIX_FMT_XBGR32 == V4L2_PIX_FMT_XBGR32, "V4L2_PIX_FMT_XBGR32");
_Static_assert(CFB_V4L2_PIX_FMT_ABGR32 == V4L2_PIX_FMT_ABGR32, "V4L2_PIX_FMT_ABGR32");
_Static_assert(CFB_V4L2_PIX_FMT_FLAG_SET_CSC == V4L2_PIX_FMT_FLAG_SET_CSC, "V4L2_PIX_FMT_FLAG_SET_CSC");
_Static_assert(CFB_V4L2_FIELD_ANY == V4L2_FIELD_ANY, "V4L2_FIELD_ANY");
_Static_assert(CFB_V4L2_FIELD_NONE == V4L2_FIELD_NONE, "V4L2_FIELD_NONE");
_Static_assert(CFB_V4L2_BUF_FLAG_ERROR == V4L2_BUF_FLAG_ERROR, "V4L2_BUF_FLAG_ERROR");
_Static_assert(CFB_V4L2_BUF_FLAG_TIMESTAMP_MASK == V4L2_BUF_FLAG_TIMESTAMP_MASK, "V4L2_BUF_FLAG_TIMESTAMP_MASK");
_Static_assert(CFB_V4L2_BUF_FLAG_TIMESTAMP_MONOTONIC == V4L2_BUF_FLAG_TIMESTAMP_MONOTONIC, "TIMESTAMP_MONOTONIC");
_Static_assert(CFB_V4L2_FRMSIZE_TYPE_DISCRETE == V4L2_FRMSIZE_TYPE_DISCRETE, "V4L2_FRMSIZE_TYPE_DISCRETE");
_Static_assert(CFB_V4L2_FRMIVAL_TYPE_DISCRETE == V4L2_FRMIVAL_TYPE_DISCRETE, "V4L2_FRMIVAL_TYPE_DISCRETE");
_Static_assert(CFB_V4L2_CAP_TIMEPERFRAME == V4L2_CAP_TIMEPERFRAME, "V4L2_CAP_TIMEPERFRAME");
_Static_assert(CFB_V4L2_COLORSPACE_DEFAULT == V4L2_COLORSPACE_DEFAULT, "V4L2_COLORSPACE_DEFAULT");
_Static_assert(CFB_V4L2_COLORSPACE_SMPTE170M == V4L2_COLORSPACE_SMPTE170M, "V4L2_COLORSPACE_SMPTE170M");
_Static_assert(CFB_V4L2_COLORSPACE_SMPTE240M == V4L2_COLORSPACE_SMPTE240M, "V4L2_COLORSPACE_SMPTE240M");
_Static_assert(CFB_V4L2_COLORSPACE_REC709 == V4L2_COLORSPACE_REC709, "V4L2_COLORSPACE_REC709");
_Static_assert(CFB_V4L2_COLORSPACE_470_SYSTEM_M == V4L2_COLORSPACE_470_SYSTEM_M, "V4L2_COLORSPACE_470_SYSTEM_M");
_Static_assert(CFB_V4L2_COLORSPACE_470_SYSTEM_BG == V4L2_COLORSPACE_470_SYSTEM_BG, "V4L2_COLORSPACE_470_SYSTEM_BG");
_Static_assert(CFB_V4L2_COLORSPACE_JPEG == V4L2_COLORSPACE_JPEG, "V4L2_COLORSPACE_JPEG");
_Static_assert(CFB_V4L2_COLORSPACE_SRGB == V4L2_COLORSPACE_SRGB, "V4L2_COLORSPACE_SRGB");
_Static_assert(CFB_V4L2_COLORSPACE_OPRGB == V4L2_COLORSPACE_OPRGB, "V4L2_COLORSPACE_OPRGB");
_Static_assert(CFB_V4L2_COLORSPACE_BT2020 == V4L2_COLORSPACE_BT2020, "V4L2_COLORSPACE_BT2020");
_Static_assert(CFB_V4L2_COLORSPACE_RAW == V4L2_COLORSPACE_RAW, "V4L2_COLORSPACE_RAW");
_Static_assert(CFB_V4L2_COLORSPACE_DCI_P3 == V4L2_COLORSPACE_DCI_P3, "V4L2_COLORSPACE_DCI_P3");
_Static_assert(CFB_V4L2_XFER_FUNC_DEFAULT == V4L2_XFER_FUNC_DEFAULT, "V4L2_XFER_FUNC_DEFAULT");
_Static_assert(CFB_V4L2_XFER_FUNC_709 == V4L2_XFER_FUNC_709, "V4L2_XFER_FUNC_709");
_Static_assert(CFB_V4L2_XFER_FUNC_SRGB == V4L2_XFER_FUNC_SRGB, "V4L2_XFER_FUNC_SRGB");
_Static_assert(CFB_V4L2_XFER_FUNC_OPRGB == V4L2_XFER_FUNC_OPRGB, "V4L2_XFER_FUNC_OPRGB");
_Static_assert(CFB_V4L2_XFER_FUNC_SMPTE240M == V4L2_XFER_FUNC_SMPTE240M, "V4L2_XFER_FUNC_SMPTE240M");
_Static_assert(CFB_V4L2_XFER_FUNC_NONE == V4L2_XFER_FUNC_NONE, "V4L2_XFER_FUNC_NONE");
_Static_assert(CFB_V4L2_XFER_FUNC_DCI_P3 == V4L2_XFER_FUNC_DCI_P3, "V4L2_XFER_FUNC_DCI_P3");
_Static_assert(CFB_V4L2_XFER_FUNC_SMPTE2084 == V4L2_XFER_FUNC_SMPTE2084, "V4L2_XFER_FUNC_SMPTE2084");
_Static_assert(CFB_V4L2_YCBCR_ENC_DEFAULT == V4L2_YCBCR_ENC_DEFAULT, "V4L2_YCBCR_ENC_DEFAULT");
_Static_assert(CFB_V4L2_YCBCR_ENC_601 == V4L2_YCBCR_ENC_601, "V4L2_YCBCR_ENC_601");
_Static_assert(CFB_V4L2_YCBCR_ENC_709 == V4L2_YCBCR_ENC_709, "V4L2_YCBCR_ENC_709");
_Static_assert(CFB_V4L2_YCBCR_ENC_XV601 == V4L2_YCBCR_ENC_XV601, "V4L2_YCBCR_ENC_XV601");
_Static_assert(CFB_V4L2_YCBCR_ENC_XV709 == V4L2_YCBCR_ENC_XV709, "V4L2_YCBCR_ENC_XV709");
_Static_assert(CFB_V4L2_YCBCR_ENC_BT2020 == V4L2_YCBCR_ENC_BT2020, "V4L2_YCBCR_ENC_BT2020");
_Static_assert(CFB_V4L2_YCBCR_ENC_BT2020_CONST_LUM == V4L2_YCBCR_ENC_BT2020_CONST_LUM, "BT2020_CONST_LUM");
_Static_assert(CFB_V4L2_YCBCR_ENC_SMPTE240M == V4L2_YCBCR_ENC_SMPTE240M, "V4L2_YCBCR_ENC_SMPTE240M");
_Static_assert(CFB_V4L2_QUANTIZATION_DEFAULT == V4L2_QUANTIZATION_DEFAULT, "V4L2_QUANTIZATION_DEFAULT");
_Static_assert(CFB_V4L2_QUANTIZATION_FULL_RANGE == V4L2_QUANTIZATION_FULL_RANGE, "V4L2_QUANTIZATION_FULL_RANGE");
_Static_assert(CFB_V4L2_QUANTIZATION_LIM_RANGE == V4L2_QUANTIZATION_LIM_RANGE, "V4L2_QUANTIZATION_LIM_RANGE");

static int cfb_ioctl(int fd, unsigned long request, void *argument) {
    int result;
    do { result = ioctl(fd, request, argument); } while (result == -1 && errno == EINTR);
    return result;
}

int cfb_v4l2_query_capability(int fd, cfb_v4l2_capability *capability) {
    struct v4l2_capability raw;
    memset(&raw, 0, sizeof raw);
    if (cfb_ioctl(fd, VIDIOC_QUERYCAP, &raw) != 0) return -1;
    // The strings are NUL-terminated by the API, but copy one byte short and terminate anyway.
    memset(capability, 0, sizeof *capability);
    memcpy(capability->driver, raw.driver, sizeof capability->driver - 1);
    memcpy(capability->card, raw.card, sizeof capability->card - 1);
    memcpy(capability->bus_info, raw.bus_info, sizeof capability->bus_info - 1);
    capability->version = raw.version;
    capability->capabilities = raw.capabilities;
    capability->device_caps = raw.device_caps;
    return 0;
}

int cfb_v4l2_enumerate_format(int fd, uint32_t index, uint32_t *pixelformat) {
    struct v4l2_fmtdesc raw;
    memset(&raw, 0, sizeof raw);
    raw.index = index;
    raw.type = V4L2_BUF_TYPE_VIDEO_CAPTURE;
    if (cfb_ioctl(fd, VIDIOC_ENUM_FMT, &raw) != 0) return -1;
    *pixelformat = raw.pixelformat;
    return 0;
}

int cfb_v4l2_enumerate_frame_size(int fd, uint32_t pixelformat, uint32_t index, uint32_t *type, uint32_t *width,
                                  uint32_t *height, uint32_t *max_width, uint32_t *max_height) {
    struct v4l2_frmsizeenum raw;
    memset(&raw, 0, sizeof raw);
    raw.index = index;
    raw.pixel_format = pixelformat;
    if (cfb_ioctl(fd, VIDIOC_ENUM_FRAMESIZES, &raw) != 0) return -1;
    *type = raw.type;
    if (raw.type == V4L2_FRMSIZE_TYPE_DISCRETE) {
        *width = raw.discrete.width;
        *height = raw.discrete.height;
        *max_width = raw.discrete.width;
        *max_height = raw.discrete.height;
    } else {
        *width = raw.stepwise.min_width;
        *height = raw.stepwise.min_height;
        *max_width = raw.stepwise.max_width;
        *max_height = raw.stepwise.max_height;
    }
    return 0;
}

static void cfb_copy_out(const struct v4l2_pix_format *raw, cfb_v4l2_pix_format *format) {
    format->width = raw->width;
    format->height = raw->height;
    format->pixelformat = raw->pixelformat;
    format->field = raw->field;
    format->bytesperline = raw->bytesperline;
    format->sizeimage = raw->sizeimage;
    format->colorspace = raw->colorspace;
    format->flags = raw->flags;
    format->ycbcr_enc = raw->ycbcr_enc;
    format->quantization = raw->quantization;
    format->xfer_func = raw->xfer_func;
}

int cfb_v4l2_get_format(int fd, cfb_v4l2_pix_format *format) {
    struct v4l2_format raw;
    memset(&raw, 0, sizeof raw);
    raw.type = V4L2_BUF_TYPE_VIDEO_CAPTURE;
    if (cfb_ioctl(fd, VIDIOC_G_FMT, &raw) != 0) return -1;
    cfb_copy_out(&raw.fmt.pix, format);
    return 0;
}

int cfb_v4l2_set_format(int fd, cfb_v4l2_pix_format *format, int try_only) {
    struct v4l2_format raw;
    memset(&raw, 0, sizeof raw);
    raw.type = V4L2_BUF_TYPE_VIDEO_CAPTURE;
    raw.fmt.pix.width = format->width;
    raw.fmt.pix.height = format->height;
    raw.fmt.pix.pixelformat = format->pixelformat;
    raw.fmt.pix.field = format->field;
    if (format->flags & V4L2_PIX_FMT_FLAG_SET_CSC) {
        // The extended fields count only with the magic; 0 (default) leaves a field to the driver.
        raw.fmt.pix.priv = V4L2_PIX_FMT_PRIV_MAGIC;
        raw.fmt.pix.flags = V4L2_PIX_FMT_FLAG_SET_CSC;
        raw.fmt.pix.quantization = format->quantization;
    }
    if (cfb_ioctl(fd, try_only ? VIDIOC_TRY_FMT : VIDIOC_S_FMT, &raw) != 0) return -1;
    cfb_copy_out(&raw.fmt.pix, format);
    return 0;
}

int cfb_v4l2_get_frame_interval(int fd, uint32_t *numerator, uint32_t *denominator, uint32_t *capability) {
    struct v4l2_streamparm raw;
    memset(&raw, 0, sizeof raw);
    raw.type = V4L2_BUF_TYPE_VIDEO_CAPTURE;
    if (cfb_ioctl(fd, VIDIOC_G_PARM, &raw) != 0) return -1;
    *numerator = raw.parm.capture.timeperframe.numerator;
    *denominator = raw.parm.capture.timeperframe.denominator;
    *capability = raw.parm.capture.capability;
    return 0;
}

int cfb_v4l2_set_frame_interval(int fd, uint32_t *numerator, uint32_t *denominator) {
    struct v4l2_streamparm raw;
    memset(&raw, 0, sizeof raw);
    raw.type = V4L2_BUF_TYPE_VIDEO_CAPTURE;
    raw.parm.capture.timeperframe.numerator = *numerator;
    raw.parm.capture.timeperframe.denominator = *denominator;
    if (cfb_ioctl(fd, VIDIOC_S_PARM, &raw) != 0) return -1;
    *numerator = raw.parm.capture.timeperframe.numerator;
    *denominator = raw.parm.capture.timeperframe.denominator;
    return 0;
}

int cfb_v4l2_request_buffers(int fd, uint32_t *count) {
    struct v4l2_requestbuffers raw;
    memset(&raw, 0, sizeof raw);
    raw.count = *count;
    raw.type = V4L2_BUF_TYPE_VIDEO_CAPTURE;
    raw.memory = V4L2_MEMORY_MMAP;
    if (cfb_ioctl(fd, VIDIOC_REQBUFS, &raw) != 0) return -1;
    *count = raw.count;
    return 0;
}

int cfb_v4l2_query_buffer(int fd, uint32_t index, uint32_t *length) {
    struct v4l2_buffer raw;
    memset(&raw, 0, sizeof raw);
    raw.index = index;
    raw.type = V4L2_BUF_TYPE_VIDEO_CAPTURE;
    raw.memory = V4L2_MEMORY_MMAP;
    if (cfb_ioctl(fd, VIDIOC_QUERYBUF, &raw) != 0) return -1;
    *length = raw.length;
    return 0;
}

int cfb_v4l2_export_buffer(int fd, uint32_t index) {
    struct v4l2_exportbuffer raw;
    memset(&raw, 0, sizeof raw);
    raw.type = V4L2_BUF_TYPE_VIDEO_CAPTURE;
    raw.index = index;
    raw.plane = 0;
    raw.flags = O_RDONLY | O_CLOEXEC;
    if (cfb_ioctl(fd, VIDIOC_EXPBUF, &raw) != 0) return -1;
    return raw.fd;
}

int cfb_v4l2_queue_buffer(int fd, uint32_t index) {
    struct v4l2_buffer raw;
    memset(&raw, 0, sizeof raw);
    raw.index = index;
    raw.type = V4L2_BUF_TYPE_VIDEO_CAPTURE;
    raw.memory = V4L2_MEMORY_MMAP;
    return cfb_ioctl(fd, VIDIOC_QBUF, &raw);
}

int cfb_v4l2_dequeue_buffer(int fd, cfb_v4l2_dequeued *buffer) {
    struct v4l2_buffer raw;
    memset(&raw, 0, sizeof raw);
    raw.type = V4L2_BUF_TYPE_VIDEO_CAPTURE;
    raw.memory = V4L2_MEMORY_MMAP;
    if (cfb_ioctl(fd, VIDIOC_DQBUF, &raw) != 0) return -1;
    buffer->index = raw.index;
    buffer->bytesused = raw.bytesused;
    buffer->flags = raw.flags;
    buffer->field = raw.field;
    buffer->sequence = raw.sequence;
    buffer->timestamp_seconds = (int64_t)raw.timestamp.tv_sec;
    buffer->timestamp_microseconds = (int64_t)raw.timestamp.tv_usec;
    return 0;
}

int cfb_v4l2_stream(int fd, int on) {
    int type = V4L2_BUF_TYPE_VIDEO_CAPTURE;
    return cfb_ioctl(fd, on ? VIDIOC_STREAMON : VIDIOC_STREAMOFF, &type);
}

int cfb_eventfd(void) { return eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC); }
