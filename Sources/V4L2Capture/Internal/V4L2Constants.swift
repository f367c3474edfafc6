import CV4L2

/// The videodev2.h constants the capture reads (mirrored in CV4L2, where `_Static_assert`s check them).
enum V4L2Constants {
    static let capabilityVideoCapture = CFB_V4L2_CAP_VIDEO_CAPTURE
    static let capabilityVideoCaptureMultiplanar = CFB_V4L2_CAP_VIDEO_CAPTURE_MPLANE
    static let capabilityStreaming = CFB_V4L2_CAP_STREAMING
    static let capabilityDeviceCaps = CFB_V4L2_CAP_DEVICE_CAPS
    static let fieldNone = CFB_V4L2_FIELD_NONE
    static let formatFlagSetColorimetry = CFB_V4L2_PIX_FMT_FLAG_SET_CSC
    static let bufferFlagError = CFB_V4L2_BUF_FLAG_ERROR
    static let bufferFlagTimestampMask = CFB_V4L2_BUF_FLAG_TIMESTAMP_MASK
    static let bufferFlagTimestampMonotonic = CFB_V4L2_BUF_FLAG_TIMESTAMP_MONOTONIC
    static let frameSizeDiscrete = CFB_V4L2_FRMSIZE_TYPE_DISCRETE
}
