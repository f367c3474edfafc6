#include "CV4L2.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
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
_Static_assert(CFB_V4L2_PIX_FMT_NV12M == V4L2_PIX_FMT_NV12M, "V4L2_PIX_FMT_NV12M");
_Static_assert(CFB_V4L2_MAX_PLANES <= VIDEO_MAX_PLANES, "VIDEO_MAX_PLANES");
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

static uint32_t cfb_type(cfb_v4l2_queue queue) {
    return queue.multiplanar ? V4L2_BUF_TYPE_VIDEO_CAPTURE_MPLANE : V4L2_BUF_TYPE_VIDEO_CAPTURE;
}

static uint32_t cfb_memory(cfb_v4l2_queue queue) { return queue.dmabuf ? V4L2_MEMORY_DMABUF : V4L2_MEMORY_MMAP; }

int cfb_v4l2_enumerate_format(int fd, cfb_v4l2_queue queue, uint32_t index, uint32_t *pixelformat) {
    struct v4l2_fmtdesc raw;
    memset(&raw, 0, sizeof raw);
    raw.index = index;
    raw.type = cfb_type(queue);
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

static void cfb_copy_out(cfb_v4l2_queue queue, const struct v4l2_format *raw, cfb_v4l2_pix_format *format) {
    memset(format, 0, sizeof *format);
    if (queue.multiplanar) {
        const struct v4l2_pix_format_mplane *mp = &raw->fmt.pix_mp;
        format->width = mp->width;
        format->height = mp->height;
        format->pixelformat = mp->pixelformat;
        format->field = mp->field;
        format->colorspace = mp->colorspace;
        format->flags = mp->flags;
        format->ycbcr_enc = mp->ycbcr_enc;
        format->quantization = mp->quantization;
        format->xfer_func = mp->xfer_func;
        // A driver reporting more planes than we carry is passed through as such; the caller refuses it.
        format->num_planes = mp->num_planes;
        for (uint32_t i = 0; i < CFB_V4L2_MAX_PLANES && i < mp->num_planes && i < VIDEO_MAX_PLANES; i++) {
            format->plane_bytesperline[i] = mp->plane_fmt[i].bytesperline;
            format->plane_sizeimage[i] = mp->plane_fmt[i].sizeimage;
        }
        format->bytesperline = format->plane_bytesperline[0];
        format->sizeimage = format->plane_sizeimage[0];
    } else {
        const struct v4l2_pix_format *pix = &raw->fmt.pix;
        format->width = pix->width;
        format->height = pix->height;
        format->pixelformat = pix->pixelformat;
        format->field = pix->field;
        format->bytesperline = pix->bytesperline;
        format->sizeimage = pix->sizeimage;
        format->colorspace = pix->colorspace;
        format->flags = pix->flags;
        format->ycbcr_enc = pix->ycbcr_enc;
        format->quantization = pix->quantization;
        format->xfer_func = pix->xfer_func;
        format->num_planes = 1;
        format->plane_bytesperline[0] = pix->bytesperline;
        format->plane_sizeimage[0] = pix->sizeimage;
    }
}

int cfb_v4l2_get_format(int fd, cfb_v4l2_queue queue, cfb_v4l2_pix_format *format) {
    struct v4l2_format raw;
    memset(&raw, 0, sizeof raw);
    raw.type = cfb_type(queue);
    if (cfb_ioctl(fd, VIDIOC_G_FMT, &raw) != 0) return -1;
    cfb_copy_out(queue, &raw, format);
    return 0;
}

int cfb_v4l2_set_format(int fd, cfb_v4l2_queue queue, cfb_v4l2_pix_format *format, int try_only) {
    struct v4l2_format raw;
    memset(&raw, 0, sizeof raw);
    raw.type = cfb_type(queue);
    if (queue.multiplanar) {
        raw.fmt.pix_mp.width = format->width;
        raw.fmt.pix_mp.height = format->height;
        raw.fmt.pix_mp.pixelformat = format->pixelformat;
        raw.fmt.pix_mp.field = format->field;
        if (format->flags & V4L2_PIX_FMT_FLAG_SET_CSC) {
            raw.fmt.pix_mp.flags = V4L2_PIX_FMT_FLAG_SET_CSC;
            raw.fmt.pix_mp.quantization = format->quantization;
        }
    } else {
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
    }
    if (cfb_ioctl(fd, try_only ? VIDIOC_TRY_FMT : VIDIOC_S_FMT, &raw) != 0) return -1;
    cfb_copy_out(queue, &raw, format);
    return 0;
}

int cfb_v4l2_get_frame_interval(int fd, cfb_v4l2_queue queue, uint32_t *numerator, uint32_t *denominator,
                                uint32_t *capability) {
    struct v4l2_streamparm raw;
    memset(&raw, 0, sizeof raw);
    raw.type = cfb_type(queue);
    if (cfb_ioctl(fd, VIDIOC_G_PARM, &raw) != 0) return -1;
    *numerator = raw.parm.capture.timeperframe.numerator;
    *denominator = raw.parm.capture.timeperframe.denominator;
    *capability = raw.parm.capture.capability;
    return 0;
}

int cfb_v4l2_set_frame_interval(int fd, cfb_v4l2_queue queue, uint32_t *numerator, uint32_t *denominator) {
    struct v4l2_streamparm raw;
    memset(&raw, 0, sizeof raw);
    raw.type = cfb_type(queue);
    raw.parm.capture.timeperframe.numerator = *numerator;
    raw.parm.capture.timeperframe.denominator = *denominator;
    if (cfb_ioctl(fd, VIDIOC_S_PARM, &raw) != 0) return -1;
    *numerator = raw.parm.capture.timeperframe.numerator;
    *denominator = raw.parm.capture.timeperframe.denominator;
    return 0;
}

int cfb_v4l2_request_buffers(int fd, cfb_v4l2_queue queue, uint32_t *count) {
    struct v4l2_requestbuffers raw;
    memset(&raw, 0, sizeof raw);
    raw.count = *count;
    raw.type = cfb_type(queue);
    raw.memory = cfb_memory(queue);
    if (cfb_ioctl(fd, VIDIOC_REQBUFS, &raw) != 0) return -1;
    *count = raw.count;
    return 0;
}

int cfb_v4l2_query_buffer(int fd, cfb_v4l2_queue queue, uint32_t index, uint32_t *num_planes, uint32_t *lengths) {
    struct v4l2_buffer raw;
    struct v4l2_plane planes[VIDEO_MAX_PLANES];
    memset(&raw, 0, sizeof raw);
    memset(planes, 0, sizeof planes);
    raw.index = index;
    raw.type = cfb_type(queue);
    raw.memory = V4L2_MEMORY_MMAP;
    if (queue.multiplanar) {
        raw.m.planes = planes;
        raw.length = VIDEO_MAX_PLANES;
    }
    if (cfb_ioctl(fd, VIDIOC_QUERYBUF, &raw) != 0) return -1;
    for (uint32_t i = 0; i < CFB_V4L2_MAX_PLANES; i++) lengths[i] = 0;
    if (queue.multiplanar) {
        *num_planes = raw.length;
        for (uint32_t i = 0; i < CFB_V4L2_MAX_PLANES && i < raw.length && i < VIDEO_MAX_PLANES; i++) {
            lengths[i] = planes[i].length;
        }
    } else {
        *num_planes = 1;
        lengths[0] = raw.length;
    }
    return 0;
}

int cfb_v4l2_export_buffer(int fd, cfb_v4l2_queue queue, uint32_t index, uint32_t plane) {
    struct v4l2_exportbuffer raw;
    memset(&raw, 0, sizeof raw);
    raw.type = cfb_type(queue);
    raw.index = index;
    raw.plane = plane;
    raw.flags = O_RDONLY | O_CLOEXEC;
    if (cfb_ioctl(fd, VIDIOC_EXPBUF, &raw) != 0) return -1;
    return raw.fd;
}

int cfb_v4l2_queue_buffer(int fd, cfb_v4l2_queue queue, uint32_t index, uint32_t num_planes,
                          const int32_t *fds, const uint32_t *lengths, int prepare_only) {
    struct v4l2_buffer raw;
    struct v4l2_plane planes[VIDEO_MAX_PLANES];
    memset(&raw, 0, sizeof raw);
    memset(planes, 0, sizeof planes);
    if (num_planes < 1 || num_planes > CFB_V4L2_MAX_PLANES || (queue.dmabuf && (!fds || !lengths))) {
        errno = EINVAL;
        return -1;
    }
    raw.index = index;
    raw.type = cfb_type(queue);
    raw.memory = cfb_memory(queue);
    if (queue.multiplanar) {
        raw.m.planes = planes;
        raw.length = num_planes;
        if (queue.dmabuf) {
            for (uint32_t i = 0; i < num_planes; i++) {
                planes[i].m.fd = fds[i];
                planes[i].length = lengths[i];
            }
        }
    } else if (queue.dmabuf) {
        raw.m.fd = fds[0];
        raw.length = lengths[0];
    }
    return cfb_ioctl(fd, prepare_only ? VIDIOC_PREPARE_BUF : VIDIOC_QBUF, &raw);
}

int cfb_v4l2_dequeue_buffer(int fd, cfb_v4l2_queue queue, uint32_t num_planes, cfb_v4l2_dequeued *buffer) {
    struct v4l2_buffer raw;
    struct v4l2_plane planes[VIDEO_MAX_PLANES];
    memset(&raw, 0, sizeof raw);
    memset(planes, 0, sizeof planes);
    if (num_planes < 1 || num_planes > CFB_V4L2_MAX_PLANES) {
        errno = EINVAL;
        return -1;
    }
    raw.type = cfb_type(queue);
    raw.memory = cfb_memory(queue);
    if (queue.multiplanar) {
        raw.m.planes = planes;
        raw.length = num_planes;
    }
    if (cfb_ioctl(fd, VIDIOC_DQBUF, &raw) != 0) return -1;
    memset(buffer, 0, sizeof *buffer);
    buffer->index = raw.index;
    if (queue.multiplanar) {
        for (uint32_t i = 0; i < num_planes && i < raw.length; i++) buffer->plane_bytesused[i] = planes[i].bytesused;
        buffer->bytesused = buffer->plane_bytesused[0];
    } else {
        buffer->bytesused = raw.bytesused;
        buffer->plane_bytesused[0] = raw.bytesused;
    }
    buffer->flags = raw.flags;
    buffer->field = raw.field;
    buffer->sequence = raw.sequence;
    buffer->timestamp_seconds = (int64_t)raw.timestamp.tv_sec;
    buffer->timestamp_microseconds = (int64_t)raw.timestamp.tv_usec;
    return 0;
}

int cfb_v4l2_stream(int fd, cfb_v4l2_queue queue, int on) {
    int type = (int)cfb_type(queue);
    return cfb_ioctl(fd, on ? VIDIOC_STREAMON : VIDIOC_STREAMOFF, &type);
}

