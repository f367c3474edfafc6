// CV4L2: the V4L2 capture ioctls FrameBus uses, behind flat structs Swift can import.
//
// linux/videodev2.h is not included here: its structs carry unions and anonymous members, and its request codes
// are function-like _IOWR macros Swift cannot import. Each ioctl gets one function taking plain fields; the
// constants FrameBus needs are mirrored below and checked against the real header with _Static_assert in shim.c.
// Every function returns 0 (or a descriptor) on success, -1 with errno set on failure, retrying EINTR.
#ifndef CV4L2_H
#define CV4L2_H

#include <stdint.h>

#pragma clang assume_nonnull begin

// MARK: constants (videodev2.h; checked in shim.c)

static const uint32_t CFB_V4L2_CAP_VIDEO_CAPTURE = 0x00000001U;
static const uint32_t CFB_V4L2_CAP_VIDEO_CAPTURE_MPLANE = 0x00001000U;
static const uint32_t CFB_V4L2_CAP_STREAMING = 0x04000000U;
static const uint32_t CFB_V4L2_CAP_DEVICE_CAPS = 0x80000000U;

static const uint32_t CFB_V4L2_PIX_FMT_NV12 = 0x3231564EU;    // 'N','V','1','2'
static const uint32_t CFB_V4L2_PIX_FMT_P010 = 0x30313050U;    // 'P','0','1','0'
static const uint32_t CFB_V4L2_PIX_FMT_XBGR32 = 0x34325258U;  // 'X','R','2','4': B, G, R, X in memory
static const uint32_t CFB_V4L2_PIX_FMT_ABGR32 = 0x34325241U;  // 'A','R','2','4': B, G, R, A in memory
static const uint32_t CFB_V4L2_PIX_FMT_NV12M = 0x32314D4EU;   // 'N','M','1','2': NV12, Y and CbCr in two buffers

/// v4l2_pix_format.flags: the application asks for the colorimetry fields it sets (with priv = PRIV_MAGIC).
static const uint32_t CFB_V4L2_PIX_FMT_FLAG_SET_CSC = 0x00000002U;

static const uint32_t CFB_V4L2_FIELD_ANY = 0;
static const uint32_t CFB_V4L2_FIELD_NONE = 1;

static const uint32_t CFB_V4L2_BUF_FLAG_ERROR = 0x00000040U;
static const uint32_t CFB_V4L2_BUF_FLAG_TIMESTAMP_MASK = 0x0000e000U;
static const uint32_t CFB_V4L2_BUF_FLAG_TIMESTAMP_MONOTONIC = 0x00002000U;

static const uint32_t CFB_V4L2_FRMSIZE_TYPE_DISCRETE = 1;
static const uint32_t CFB_V4L2_FRMIVAL_TYPE_DISCRETE = 1;
static const uint32_t CFB_V4L2_CAP_TIMEPERFRAME = 0x1000U;

// enum v4l2_colorspace
static const uint32_t CFB_V4L2_COLORSPACE_DEFAULT = 0;
static const uint32_t CFB_V4L2_COLORSPACE_SMPTE170M = 1;
static const uint32_t CFB_V4L2_COLORSPACE_SMPTE240M = 2;
static const uint32_t CFB_V4L2_COLORSPACE_REC709 = 3;
static const uint32_t CFB_V4L2_COLORSPACE_470_SYSTEM_M = 5;
static const uint32_t CFB_V4L2_COLORSPACE_470_SYSTEM_BG = 6;
static const uint32_t CFB_V4L2_COLORSPACE_JPEG = 7;
static const uint32_t CFB_V4L2_COLORSPACE_SRGB = 8;
static const uint32_t CFB_V4L2_COLORSPACE_OPRGB = 9;
static const uint32_t CFB_V4L2_COLORSPACE_BT2020 = 10;
static const uint32_t CFB_V4L2_COLORSPACE_RAW = 11;
static const uint32_t CFB_V4L2_COLORSPACE_DCI_P3 = 12;
// enum v4l2_xfer_func
static const uint32_t CFB_V4L2_XFER_FUNC_DEFAULT = 0;
static const uint32_t CFB_V4L2_XFER_FUNC_709 = 1;
static const uint32_t CFB_V4L2_XFER_FUNC_SRGB = 2;
static const uint32_t CFB_V4L2_XFER_FUNC_OPRGB = 3;
static const uint32_t CFB_V4L2_XFER_FUNC_SMPTE240M = 4;
static const uint32_t CFB_V4L2_XFER_FUNC_NONE = 5;
static const uint32_t CFB_V4L2_XFER_FUNC_DCI_P3 = 6;
static const uint32_t CFB_V4L2_XFER_FUNC_SMPTE2084 = 7;
// enum v4l2_ycbcr_encoding
static const uint32_t CFB_V4L2_YCBCR_ENC_DEFAULT = 0;
static const uint32_t CFB_V4L2_YCBCR_ENC_601 = 1;
static const uint32_t CFB_V4L2_YCBCR_ENC_709 = 2;
static const uint32_t CFB_V4L2_YCBCR_ENC_XV601 = 3;
static const uint32_t CFB_V4L2_YCBCR_ENC_XV709 = 4;
static const uint32_t CFB_V4L2_YCBCR_ENC_BT2020 = 6;
static const uint32_t CFB_V4L2_YCBCR_ENC_BT2020_CONST_LUM = 7;
static const uint32_t CFB_V4L2_YCBCR_ENC_SMPTE240M = 8;
// enum v4l2_quantization
static const uint32_t CFB_V4L2_QUANTIZATION_DEFAULT = 0;
static const uint32_t CFB_V4L2_QUANTIZATION_FULL_RANGE = 1;
static const uint32_t CFB_V4L2_QUANTIZATION_LIM_RANGE = 2;

// MARK: flat structs

/// struct v4l2_capability, without the reserved words.
typedef struct cfb_v4l2_capability {
    char driver[16];
    char card[32];
    char bus_info[32];
    uint32_t version;
    uint32_t capabilities;
    uint32_t device_caps;
} cfb_v4l2_capability;

/// The most memory planes (buffers per frame) a multi-planar format has here (VIDEO_MAX_PLANES is 8).
#define CFB_V4L2_MAX_PLANES 4

/// Which queue an ioctl addresses and with what memory.
typedef struct cfb_v4l2_queue {
    /// 0: V4L2_BUF_TYPE_VIDEO_CAPTURE; 1: V4L2_BUF_TYPE_VIDEO_CAPTURE_MPLANE.
    int multiplanar;
    /// 0: V4L2_MEMORY_MMAP; 1: V4L2_MEMORY_DMABUF.
    int dmabuf;
} cfb_v4l2_queue;

/// struct v4l2_pix_format, or struct v4l2_pix_format_mplane flattened into the same fields: for a single-planar
/// queue num_planes is 1 and plane 0's stride and size are bytesperline and sizeimage.
typedef struct cfb_v4l2_pix_format {
    uint32_t width;
    uint32_t height;
    uint32_t pixelformat;
    uint32_t field;
    uint32_t bytesperline;
    uint32_t sizeimage;
    uint32_t colorspace;
    uint32_t flags;
    uint32_t ycbcr_enc;
    uint32_t quantization;
    uint32_t xfer_func;
    /// Memory planes (separate buffers) per frame: 1 for single-planar formats, 2 for NV12M.
    uint32_t num_planes;
    uint32_t plane_bytesperline[CFB_V4L2_MAX_PLANES];
    uint32_t plane_sizeimage[CFB_V4L2_MAX_PLANES];
} cfb_v4l2_pix_format;

/// What VIDIOC_DQBUF says about a filled buffer.
typedef struct cfb_v4l2_dequeued {
    uint32_t index;
    /// Bytes the driver wrote: plane 0's for a multi-planar queue.
    uint32_t bytesused;
    /// Each memory plane's bytesused (multi-planar queues; plane 0 only for single-planar).
    uint32_t plane_bytesused[CFB_V4L2_MAX_PLANES];
    uint32_t flags;
    uint32_t field;
    uint32_t sequence;
    int64_t timestamp_seconds;
    int64_t timestamp_microseconds;
} cfb_v4l2_dequeued;

// MARK: ioctls (video capture: V4L2_BUF_TYPE_VIDEO_CAPTURE or _MPLANE, as `queue` says)

/// VIDIOC_QUERYCAP.
int cfb_v4l2_query_capability(int fd, cfb_v4l2_capability *capability);
/// VIDIOC_ENUM_FMT: the pixel format at `index`; -1/EINVAL past the last.
int cfb_v4l2_enumerate_format(int fd, cfb_v4l2_queue queue, uint32_t index, uint32_t *pixelformat);
/// VIDIOC_ENUM_FRAMESIZES: the discrete size at `index` (type 1), or the stepwise bounds (type 2/3).
int cfb_v4l2_enumerate_frame_size(int fd, uint32_t pixelformat, uint32_t index, uint32_t *type, uint32_t *width,
                                  uint32_t *height, uint32_t *max_width, uint32_t *max_height);
/// VIDIOC_G_FMT.
int cfb_v4l2_get_format(int fd, cfb_v4l2_queue queue, cfb_v4l2_pix_format *format);
/// VIDIOC_S_FMT (or VIDIOC_TRY_FMT when `try_only`): the driver adjusts `format` in place. Sent: width, height,
/// pixelformat, field, and with CFB_V4L2_PIX_FMT_FLAG_SET_CSC in `flags` the quantization asked for.
int cfb_v4l2_set_format(int fd, cfb_v4l2_queue queue, cfb_v4l2_pix_format *format, int try_only);
/// VIDIOC_G_PARM: the frame interval and whether it can be set (V4L2_CAP_TIMEPERFRAME).
int cfb_v4l2_get_frame_interval(int fd, cfb_v4l2_queue queue, uint32_t *numerator, uint32_t *denominator,
                                uint32_t *capability);
/// VIDIOC_S_PARM: asks for a frame interval; the driver answers with the one it chose.
int cfb_v4l2_set_frame_interval(int fd, cfb_v4l2_queue queue, uint32_t *numerator, uint32_t *denominator);
/// VIDIOC_REQBUFS with the queue's memory (MMAP or DMABUF): `count` in, the count granted out (0 frees them).
int cfb_v4l2_request_buffers(int fd, cfb_v4l2_queue queue, uint32_t *count);
/// VIDIOC_QUERYBUF of an MMAP buffer: each memory plane's length in bytes (`lengths` has CFB_V4L2_MAX_PLANES
/// entries); `num_planes` in: the planes expected, out: the planes the driver reports.
int cfb_v4l2_query_buffer(int fd, cfb_v4l2_queue queue, uint32_t index, uint32_t *num_planes, uint32_t *lengths);
/// VIDIOC_EXPBUF of one memory plane with O_RDONLY | O_CLOEXEC: returns the DMA-BUF descriptor or -1.
int cfb_v4l2_export_buffer(int fd, cfb_v4l2_queue queue, uint32_t index, uint32_t plane);
/// VIDIOC_QBUF, or VIDIOC_PREPARE_BUF when `prepare_only` (the driver imports and checks the buffer without
/// queuing it). MMAP: `fds` and `lengths` are ignored (may be null). DMABUF: plane i is the DMA-BUF `fds[i]` of
/// `lengths[i]` bytes (m.fd and length; for a multi-planar queue, planes[i].m.fd and planes[i].length).
int cfb_v4l2_queue_buffer(int fd, cfb_v4l2_queue queue, uint32_t index, uint32_t num_planes,
                          const int32_t *_Nullable fds, const uint32_t *_Nullable lengths, int prepare_only);
/// VIDIOC_DQBUF (-1/EAGAIN on a non-blocking descriptor with nothing done).
int cfb_v4l2_dequeue_buffer(int fd, cfb_v4l2_queue queue, uint32_t num_planes, cfb_v4l2_dequeued *buffer);
/// VIDIOC_STREAMON / VIDIOC_STREAMOFF.
int cfb_v4l2_stream(int fd, cfb_v4l2_queue queue, int on);

#pragma clang assume_nonnull end

#endif
