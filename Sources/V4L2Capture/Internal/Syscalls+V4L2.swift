import CFrameBusShims
import CV4L2
import Glibc
import Surfaces
import SystemPackage

/// The V4L2 ioctls, `poll` and `eventfd`, one wrapper each, on the package's system-call layer.
/// Which capture queue an ioctl addresses (single- or multi-planar) and with what memory (MMAP or imported
/// DMA-BUFs).
struct V4L2Queue: Hashable, Sendable {
    var isMultiplanar: Bool
    var importsDMABufs: Bool

    var raw: cfb_v4l2_queue {
        cfb_v4l2_queue(multiplanar: isMultiplanar ? 1 : 0, dmabuf: importsDMABufs ? 1 : 0)
    }
}

/// The most memory planes a format may have here (CFB_V4L2_MAX_PLANES).
let v4l2MaximumPlanes = 4

extension Syscall {
    struct V4L2Capability {
        var driver: String
        var card: String
        var busInfo: String
        var capabilities: UInt32
        var deviceCapabilities: UInt32
    }

    struct V4L2Format {
        var width: UInt32 = 0
        var height: UInt32 = 0
        var pixelFormat: UInt32 = 0
        var field: UInt32 = 0
        var bytesPerLine: UInt32 = 0
        var imageSize: UInt32 = 0
        var colorspace: UInt32 = 0
        var flags: UInt32 = 0
        var yCbCrEncoding: UInt32 = 0
        var quantization: UInt32 = 0
        var transferFunction: UInt32 = 0
        /// Memory planes per frame (1 single-planar; 2 for NV12M), and each one's stride and size.
        var planeCount: UInt32 = 1
        var planeBytesPerLine: [UInt32] = []
        var planeImageSize: [UInt32] = []

        init() {}

        init(_ raw: cfb_v4l2_pix_format) {
            width = raw.width
            height = raw.height
            pixelFormat = raw.pixelformat
            field = raw.field
            bytesPerLine = raw.bytesperline
            imageSize = raw.sizeimage
            colorspace = raw.colorspace
            flags = raw.flags
            yCbCrEncoding = raw.ycbcr_enc
            quantization = raw.quantization
            transferFunction = raw.xfer_func
            planeCount = raw.num_planes
            let count = min(Int(raw.num_planes), v4l2MaximumPlanes)
            planeBytesPerLine = Array(Self.words(raw.plane_bytesperline).prefix(count))
            planeImageSize = Array(Self.words(raw.plane_sizeimage).prefix(count))
        }

        /// A C `uint32_t[4]` (imported as a tuple) as an array.
        static func words(_ tuple: (UInt32, UInt32, UInt32, UInt32)) -> [UInt32] {
            [tuple.0, tuple.1, tuple.2, tuple.3]
        }

        var raw: cfb_v4l2_pix_format {
            cfb_v4l2_pix_format(
                width: width,
                height: height,
                pixelformat: pixelFormat,
                field: field,
                bytesperline: bytesPerLine,
                sizeimage: imageSize,
                colorspace: colorspace,
                flags: flags,
                ycbcr_enc: yCbCrEncoding,
                quantization: quantization,
                xfer_func: transferFunction,
                num_planes: planeCount,
                plane_bytesperline: (0, 0, 0, 0),
                plane_sizeimage: (0, 0, 0, 0)
            )
        }
    }

    struct V4L2DequeuedBuffer {
        var index: UInt32
        var bytesUsed: UInt32
        var planeBytesUsed: [UInt32]
        var flags: UInt32
        var sequence: UInt32
        var seconds: Int64
        var microseconds: Int64
    }

    static func v4l2QueryCapability(_ fd: FileDescriptor) -> Result<V4L2Capability, Errno> {
        var raw = cfb_v4l2_capability()
        return valueOrErrno { unsafe cfb_v4l2_query_capability(fd.rawValue, &raw) }.map { _ in
            func text<T>(_ tuple: T) -> String {
                // The tuple is a fixed C char array that the shim NUL-terminated within its size.
                let bytes = unsafe withUnsafeBytes(of: tuple) { unsafe Array($0) }
                return String(decoding: bytes.prefix { $0 != 0 }, as: UTF8.self)
            }
            return V4L2Capability(
                driver: text(raw.driver),
                card: text(raw.card),
                busInfo: text(raw.bus_info),
                capabilities: raw.capabilities,
                deviceCapabilities: raw.device_caps
            )
        }
    }

    static func v4l2EnumerateFormat(_ fd: FileDescriptor, _ queue: V4L2Queue, index: UInt32) -> Result<UInt32, Errno> {
        var format: UInt32 = 0
        return valueOrErrno { unsafe cfb_v4l2_enumerate_format(fd.rawValue, queue.raw, index, &format) }.map { _ in
            format
        }
    }

    static func v4l2EnumerateFrameSize(
        _ fd: FileDescriptor,
        pixelFormat: UInt32,
        index: UInt32
    ) -> Result<(type: UInt32, width: UInt32, height: UInt32, maxWidth: UInt32, maxHeight: UInt32), Errno> {
        var type: UInt32 = 0
        var width: UInt32 = 0
        var height: UInt32 = 0
        var maxWidth: UInt32 = 0
        var maxHeight: UInt32 = 0
        return valueOrErrno {
            unsafe cfb_v4l2_enumerate_frame_size(
                fd.rawValue,
                pixelFormat,
                index,
                &type,
                &width,
                &height,
                &maxWidth,
                &maxHeight
            )
        }.map { _ in (type, width, height, maxWidth, maxHeight) }
    }

    static func v4l2GetFormat(_ fd: FileDescriptor, _ queue: V4L2Queue) -> Result<V4L2Format, Errno> {
        var raw = cfb_v4l2_pix_format()
        return valueOrErrno { unsafe cfb_v4l2_get_format(fd.rawValue, queue.raw, &raw) }.map { _ in V4L2Format(raw) }
    }

    static func v4l2SetFormat(
        _ fd: FileDescriptor,
        _ queue: V4L2Queue,
        _ format: V4L2Format,
        tryOnly: Bool
    ) -> Result<V4L2Format, Errno> {
        var raw = format.raw
        return valueOrErrno { unsafe cfb_v4l2_set_format(fd.rawValue, queue.raw, &raw, tryOnly ? 1 : 0) }.map { _ in
            V4L2Format(raw)
        }
    }

    static func v4l2GetFrameInterval(
        _ fd: FileDescriptor,
        _ queue: V4L2Queue
    ) -> Result<(numerator: UInt32, denominator: UInt32, settable: Bool), Errno> {
        var numerator: UInt32 = 0
        var denominator: UInt32 = 0
        var capability: UInt32 = 0
        return valueOrErrno {
            unsafe cfb_v4l2_get_frame_interval(fd.rawValue, queue.raw, &numerator, &denominator, &capability)
        }.map { _ in (numerator, denominator, capability & CFB_V4L2_CAP_TIMEPERFRAME != 0) }
    }

    static func v4l2SetFrameInterval(
        _ fd: FileDescriptor,
        _ queue: V4L2Queue,
        numerator: UInt32,
        denominator: UInt32
    ) -> Result<(numerator: UInt32, denominator: UInt32), Errno> {
        var numerator = numerator
        var denominator = denominator
        return valueOrErrno {
            unsafe cfb_v4l2_set_frame_interval(fd.rawValue, queue.raw, &numerator, &denominator)
        }.map { _ in (numerator, denominator) }
    }

    static func v4l2RequestBuffers(_ fd: FileDescriptor, _ queue: V4L2Queue, count: UInt32) -> Result<UInt32, Errno> {
        var count = count
        return valueOrErrno { unsafe cfb_v4l2_request_buffers(fd.rawValue, queue.raw, &count) }.map { _ in count }
    }

    /// `VIDIOC_QUERYBUF` of an MMAP buffer: each memory plane's length.
    static func v4l2QueryBuffer(
        _ fd: FileDescriptor,
        _ queue: V4L2Queue,
        index: UInt32,
        planeCount: Int
    ) -> Result<[UInt32], Errno> {
        var count = UInt32(planeCount)
        var lengths = [UInt32](repeating: 0, count: v4l2MaximumPlanes)
        return valueOrErrno {
            unsafe lengths.withUnsafeMutableBufferPointer {
                unsafe cfb_v4l2_query_buffer(fd.rawValue, queue.raw, index, &count, $0.baseAddress!)
            }
        }.map { _ in Array(lengths.prefix(min(Int(count), v4l2MaximumPlanes))) }
    }

    /// `VIDIOC_EXPBUF` of one memory plane, read-only: subscribers get descriptors that cannot map the frame
    /// writable.
    static func v4l2ExportBuffer(
        _ fd: FileDescriptor,
        _ queue: V4L2Queue,
        index: UInt32,
        plane: UInt32
    ) -> Result<FileDescriptor, Errno> {
        valueOrErrno { cfb_v4l2_export_buffer(fd.rawValue, queue.raw, index, plane) }.map(
            FileDescriptor.init(rawValue:)
        )
    }

    /// `VIDIOC_QBUF` (or `VIDIOC_PREPARE_BUF` with `prepareOnly`): an MMAP buffer (no `dmabufs`), or imported
    /// DMA-BUFs, one per memory plane, with their lengths.
    static func v4l2QueueBuffer(
        _ fd: FileDescriptor,
        _ queue: V4L2Queue,
        index: UInt32,
        planeCount: Int,
        dmabufs: [(descriptor: FileDescriptor, length: UInt32)] = [],
        prepareOnly: Bool = false
    ) -> Result<Void, Errno> {
        let descriptors = dmabufs.map(\.descriptor.rawValue)
        let lengths = dmabufs.map(\.length)
        return valueOrErrno {
            unsafe descriptors.withUnsafeBufferPointer { descriptors in
                unsafe lengths.withUnsafeBufferPointer { lengths in
                    unsafe cfb_v4l2_queue_buffer(
                        fd.rawValue,
                        queue.raw,
                        index,
                        UInt32(planeCount),
                        descriptors.baseAddress,
                        lengths.baseAddress,
                        prepareOnly ? 1 : 0
                    )
                }
            }
        }.map { _ in () }
    }

    static func v4l2DequeueBuffer(
        _ fd: FileDescriptor,
        _ queue: V4L2Queue,
        planeCount: Int
    ) -> Result<V4L2DequeuedBuffer, Errno> {
        var raw = cfb_v4l2_dequeued()
        return valueOrErrno { unsafe cfb_v4l2_dequeue_buffer(fd.rawValue, queue.raw, UInt32(planeCount), &raw) }.map {
            _ in
            let used = V4L2Format.words(raw.plane_bytesused)
            return V4L2DequeuedBuffer(
                index: raw.index,
                bytesUsed: raw.bytesused,
                planeBytesUsed: Array(used.prefix(planeCount)),
                flags: raw.flags,
                sequence: raw.sequence,
                seconds: raw.timestamp_seconds,
                microseconds: raw.timestamp_microseconds
            )
        }
    }

    static func v4l2Stream(_ fd: FileDescriptor, _ queue: V4L2Queue, on: Bool) -> Result<Void, Errno> {
        valueOrErrno { cfb_v4l2_stream(fd.rawValue, queue.raw, on ? 1 : 0) }.map { _ in () }
    }

    /// `poll(2)` on up to a few descriptors for `POLLIN`; the returned events per descriptor.
    static func pollReadable(_ descriptors: [Int32], timeoutMilliseconds: Int32) -> Result<[Int16], Errno> {
        var fds = descriptors.map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) }
        return valueOrErrno {
            unsafe fds.withUnsafeMutableBufferPointer {
                unsafe poll($0.baseAddress, nfds_t($0.count), timeoutMilliseconds)
            }
        }.map { _ in fds.map(\.revents) }
    }

    /// `eventfd(2)`, non-blocking and close-on-exec.
    static func eventFD() -> Result<Int32, Errno> {
        valueOrErrno { cfb_eventfd_nonblocking() }
    }

    /// Adds 1 to an eventfd's counter (a wake-up); a full counter already means "wake up".
    static func signal(eventFD: Int32) {
        var one: UInt64 = 1
        _ = unsafe write(eventFD, &one, 8)
    }

    /// Resets an eventfd's counter.
    static func drain(eventFD: Int32) {
        var value: UInt64 = 0
        _ = unsafe read(eventFD, &value, 8)
    }

    static func openDevice(_ path: String) -> Result<FileDescriptor, Errno> {
        open(path, flags: O_RDWR | O_NONBLOCK | O_CLOEXEC)
    }
}
