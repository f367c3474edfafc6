import FrameBus
import Synchronization
import SystemPackage

/// A V4L2 camera as a FrameBus producer: frames go from the device's buffers to subscribers without a copy.
///
/// The capture opens a V4L2 video capture node (single-planar, or multi-planar:
/// `V4L2_CAP_VIDEO_CAPTURE_MPLANE`), negotiates a format FrameBus carries (NV12 and NV12M become `420v` or `420f`
/// by the quantization the driver reports, P010 `x420` or `xf20`, XR24 and AR24 `BGRA`), a size and a frame
/// interval, and sets up the buffers the device writes, in one of two ways (``MemoryMode``), neither of which copies
/// a byte:
///
/// - ``MemoryMode/deviceBuffers``: the device allocates (`VIDIOC_REQBUFS`, `V4L2_MEMORY_MMAP`); each buffer (each
///   memory plane of it) is exported once as a read-only DMA-BUF (`VIDIOC_EXPBUF`) and imported as a ``Surface``.
///   Frames go on the wire as DMA-BUFs: only subscribers that accept DMA-BUF surfaces (SURFACE v2) can take them.
/// - ``MemoryMode/importedMemFD``: the capture allocates sealed memfd surfaces, the same kind `Publisher` pools
///   use, wraps each memfd in a udmabuf (`/dev/udmabuf`, `UDMABUF_CREATE`) and has the device write into them
///   (`V4L2_MEMORY_DMABUF`). Frames go on the wire as memfds, which every subscriber can map (Python, GStreamer fd
///   memory, format conversion).
///
/// ```swift
/// let capture = try V4L2Capture(configuration: .init(devicePath: "/dev/video0", pixelFormat: .yuv420BiPlanarVideoRange8))
/// let publisher = try Publisher(configuration: capture.publisherConfiguration(path: try SocketPath.default()))
/// let end = capture.run(publishingTo: publisher)   // blocks this thread until stop() or the device goes away
/// ```
///
/// A dequeued frame is wrapped in a ``PixelBuffer`` whose release handler hands the buffer back; the publisher
/// keeps that pixel buffer until every subscriber released the frame (even by dying), so a buffer is re-queued
/// (`VIDIOC_QBUF`) only when no one holds it. The publisher's held-frame budget is the buffer count minus its
/// producer reserve: subscribers never hold every buffer, and one that holds its share gets `outOfBuffers` drops
/// while the device keeps running. Gaps in the device's sequence numbers are reported to subscribers as dropped
/// frames, so every device frame is accounted for. Timing is the buffer's `CLOCK_MONOTONIC` timestamp (the
/// ``HostClock``) and the frame interval.
///
/// What is copied: nothing for subscribers of the capture's format, in either memory mode. A subscriber of the
/// compressed variant gets a frame the publisher encodes once per frame into its own memfd pool (reading the frame
/// through the surface's mapping).
public final class V4L2Capture: Sendable {
    /// Whose memory the device writes frames into. Neither mode copies: the device writes each frame once, into
    /// memory the subscribers map.
    public enum MemoryMode: String, Hashable, Sendable, CaseIterable, CustomStringConvertible {
        /// The device's own buffers (`V4L2_MEMORY_MMAP`), exported read-only with `VIDIOC_EXPBUF`: frames are
        /// DMA-BUF surfaces. Works with every streaming driver; subscribers must accept DMA-BUF surfaces.
        case deviceBuffers
        /// The capture's own sealed memfd surfaces, imported by the device through udmabuf (`V4L2_MEMORY_DMABUF`):
        /// frames are memfd surfaces that every subscriber can map. Needs `/dev/udmabuf` (`CONFIG_UDMABUF`) and a
        /// driver that imports DMA-BUFs into its buffer queue (videobuf2 drivers whose memory ops can map an
        /// imported buffer, such as vivid and uvcvideo).
        case importedMemFD
        /// ``importedMemFD`` when `/dev/udmabuf` exists and the device accepts the imported buffers
        /// (`VIDIOC_REQBUFS` and `VIDIOC_PREPARE_BUF` with `V4L2_MEMORY_DMABUF` succeed), else ``deviceBuffers``.
        /// ``V4L2Capture/memoryMode`` says which, and ``V4L2Capture/memoryModeReason`` why.
        case automatic

        public var description: String {
            switch self {
            case .deviceBuffers: "MMAP device buffers exported as DMA-BUFs"
            case .importedMemFD: "memfd surfaces imported through udmabuf (DMABUF)"
            case .automatic: "automatic"
            }
        }
    }

    /// What to open and what to ask for.
    public struct Configuration: Sendable {
        /// The device node, e.g. `/dev/video0`.
        public var devicePath: String
        /// The format to deliver; nil takes the first the device offers of NV12, P010, XR24, AR24. For a Y'CbCr
        /// format the capture asks the driver for its range (`V4L2_PIX_FMT_FLAG_SET_CSC`); a driver that keeps
        /// another range is refused with ``V4L2CaptureError/Code-swift.struct/unsupportedFormat``.
        public var pixelFormat: PixelFormat?
        /// The frame width; nil keeps the device's current one.
        public var width: Int?
        /// The frame height; nil keeps the device's current one.
        public var height: Int?
        /// Frames per second to ask for (`VIDIOC_S_PARM`); nil keeps the device's current interval.
        public var framesPerSecond: Double?
        /// Buffers to ask the driver for (3…64); the driver may grant more or fewer (at least 3 are needed).
        public var bufferCount = 16
        /// Whose memory the device writes (see ``MemoryMode``).
        public var memoryMode = MemoryMode.automatic
        /// The V4L2 format to ask for, e.g. ``V4L2PixelFormat/nv12m`` on a multi-planar device; nil chooses by
        /// ``pixelFormat``. It must deliver ``pixelFormat`` when both are given.
        public var devicePixelFormat: V4L2PixelFormat?
        /// The udmabuf device node for ``MemoryMode/importedMemFD``.
        public var udmabufDevicePath = "/dev/udmabuf"
        /// With ``MemoryMode/importedMemFD``: how many of the buffers are made (memfd, udmabuf, `VIDIOC_PREPARE_BUF`)
        /// before streaming starts (at least 3, at most ``bufferCount``); the others are made after the first frame
        /// was published, one between frames, and queued as they are made. Making a buffer is the start's largest
        /// cost after the process's own (docs/BENCHMARKS.md, "Time to first frame"); the device needs only a few
        /// to deliver its first frame. The driver's buffer slots (`VIDIOC_REQBUFS`) are all asked for at once.
        /// ``MemoryMode/deviceBuffers`` makes every buffer up front (the driver allocates them all in
        /// `VIDIOC_REQBUFS`).
        public var buffersBeforeFirstFrame = 4
        /// Whether the frame rate follows the publisher's ``Publisher/systemPressureState``: at serious only every
        /// second frame the device gives is published, at critical every fourth, at nominal every one again
        /// (``SystemPressurePolicy/adaptedFrameRate(nominal:current:level:)``). The others go straight back to the
        /// device, unpublished (no sequence number, no drop); each published frame's duration covers the frames
        /// skipped after it, so subscribers see the new frame rate.
        public var adaptsToSystemPressure = false

        /// Creates a configuration.
        public init(
            devicePath: String,
            pixelFormat: PixelFormat? = nil,
            width: Int? = nil,
            height: Int? = nil,
            framesPerSecond: Double? = nil
        ) {
            self.devicePath = devicePath
            self.pixelFormat = pixelFormat
            self.width = width
            self.height = height
            self.framesPerSecond = framesPerSecond
        }
    }

    /// What was negotiated with the device.
    public struct Format: Hashable, Sendable, CustomStringConvertible {
        /// The V4L2 format the device delivers.
        public var devicePixelFormat: V4L2PixelFormat
        /// The FrameBus format it is published as.
        public var pixelFormat: PixelFormat
        /// Width in pixels.
        public var width: Int
        /// Height in pixels.
        public var height: Int
        /// Stride in bytes of every plane of a single-buffer format; of plane 0 for `NV12M` (see
        /// ``memoryPlaneBytesPerLine``).
        public var bytesPerLine: Int
        /// Each memory plane's stride (one entry per buffer of a frame: 2 for `NV12M`, else 1).
        public var memoryPlaneBytesPerLine: [Int]
        /// Each memory plane's size as the driver reports it (`sizeimage`).
        public var memoryPlaneSizes: [Int]
        /// The frame interval, numerator over denominator seconds; nil if the driver does not say.
        public var frameInterval: (numerator: Int, denominator: Int)? {
            get { intervalNumerator > 0 && intervalDenominator > 0 ? (intervalNumerator, intervalDenominator) : nil }
            set {
                intervalNumerator = newValue?.numerator ?? 0
                intervalDenominator = newValue?.denominator ?? 0
            }
        }
        private var intervalNumerator = 0
        private var intervalDenominator = 0
        /// The colour description the driver reported.
        public var colorimetry: V4L2Colorimetry
        /// The attachments every frame carries (from ``colorimetry``).
        public var attachments: PixelBufferAttachments

        init(
            devicePixelFormat: V4L2PixelFormat,
            pixelFormat: PixelFormat,
            width: Int,
            height: Int,
            bytesPerLine: [Int],
            sizes: [Int],
            colorimetry: V4L2Colorimetry
        ) {
            self.devicePixelFormat = devicePixelFormat
            self.pixelFormat = pixelFormat
            self.width = width
            self.height = height
            self.bytesPerLine = bytesPerLine.first ?? 0
            self.memoryPlaneBytesPerLine = bytesPerLine
            self.memoryPlaneSizes = sizes
            self.colorimetry = colorimetry
            self.attachments = colorimetry.attachments(isYCbCr: devicePixelFormat.isYCbCr)
        }

        /// Frames per second from the interval, or nil.
        public var framesPerSecond: Double? {
            frameInterval.map { Double($0.denominator) / Double($0.numerator) }
        }

        /// One frame's duration, or ``MediaTime/invalid``.
        public var frameDuration: MediaTime {
            guard let (numerator, denominator) = frameInterval, denominator <= Int(Int32.max) else { return .invalid }
            return MediaTime(value: Int64(numerator), timescale: Int32(denominator))
        }

        public var description: String {
            let rate = framesPerSecond.map { " at \(($0 * 100).rounded() / 100) fps" } ?? ""
            return "\(devicePixelFormat) \(width)x\(height) as \(pixelFormat)\(rate)"
        }
    }

    /// How ``run(publishingTo:onFrame:)`` ended.
    public enum EndReason: Hashable, Sendable, CustomStringConvertible {
        /// ``stop()`` was called.
        case stopped
        /// The publisher was stopped by someone else.
        case publisherStopped
        /// The device went away (`ENODEV`): unplugged or its driver unbound. The publisher was stopped, so every
        /// subscriber got END_OF_STREAM.
        case deviceLost(V4L2CaptureError)
        /// An ioctl failed; the publisher was stopped.
        case failed(V4L2CaptureError)

        public var description: String {
            switch self {
            case .stopped: "stopped"
            case .publisherStopped: "the publisher stopped"
            case .deviceLost(let error): "device lost: \(error)"
            case .failed(let error): "capture failed: \(error)"
            }
        }
    }

    /// One frame as the capture published it (for ``run(publishingTo:onFrame:)``'s observer).
    public struct CapturedFrame: Sendable {
        /// The frame; read it inside a read-only lock. Keeping it keeps the device buffer from the device.
        public var pixelBuffer: PixelBuffer
        /// The publisher's sequence number for it (what subscribers see).
        public var sequence: UInt64
        /// The device's sequence number (`v4l2_buffer.sequence`).
        public var deviceSequence: UInt32
        /// Which device buffer holds it.
        public var bufferIndex: Int
        /// Its timing: the device's `CLOCK_MONOTONIC` timestamp and the frame interval.
        public var timing: SampleTimingInfo
    }

    /// Counters and buffer places, a snapshot.
    public struct Statistics: Hashable, Sendable {
        /// Buffers the device filled (`VIDIOC_DQBUF`).
        public var framesCaptured: UInt64 = 0
        /// Frames handed to the publisher.
        public var framesPublished: UInt64 = 0
        /// Frames the device's sequence skipped while it had buffers (lost at the source), reported as
        /// ``DroppedFrameReason/discontinuity``.
        public var framesLostUpstream: UInt64 = 0
        /// Frames the device's sequence skipped after it ran out of queued buffers, reported as
        /// ``DroppedFrameReason/outOfBuffers``.
        public var framesLostWithoutBuffers: UInt64 = 0
        /// Buffers the driver flagged `V4L2_BUF_FLAG_ERROR`, reported as ``DroppedFrameReason/discontinuity``.
        public var errorFrames: UInt64 = 0
        /// Waiting frames dropped so the device got a buffer back, reported as ``DroppedFrameReason/frameWasLate``.
        public var framesDroppedLate: UInt64 = 0
        /// Frames not published because the frame rate was lowered for system pressure
        /// (``Configuration/adaptsToSystemPressure``): no subscriber misses them, the published frames last longer.
        public var framesSkippedForPressure: UInt64 = 0
        /// How often the device's sequence went back or repeated (its counter restarted): the next frame was
        /// published as a discontinuity.
        public var sequenceRestarts: UInt64 = 0
        /// How often the device was left with no buffer queued.
        public var starvations: UInt64 = 0
        /// Buffers granted by the driver.
        public var bufferCount = 0
        /// Buffers queued in the device now.
        public var buffersQueued = 0
        /// Buffers published and still held (by the producer or subscribers) now.
        public var buffersHeld = 0
        /// The fewest buffers the device had queued right after a frame.
        public var lowestBuffersQueued = 0
    }

    /// One step of the capture's start, for a start-up trace (`framebus capture --trace-start`): what was done and
    /// when it ended, on `CLOCK_MONOTONIC` (the ``HostClock``), so a caller can put it beside its own phases.
    public struct StartPhase: Hashable, Sendable, CustomStringConvertible {
        /// What ended: `opened`, `queried` (VIDIOC_QUERYCAP and the formats offered), `formatSet` (VIDIOC_S_FMT),
        /// `intervalSet` (VIDIOC_S_PARM / G_PARM), `buffersRequested` (VIDIOC_REQBUFS), `firstBufferAllocated` and
        /// `buffersAllocated` (the first and every buffer made before streaming: exported or imported, prepared),
        /// `queued` (VIDIOC_QBUF of those buffers), `streaming` (VIDIOC_STREAMON), `firstDequeued` (the first
        /// VIDIOC_DQBUF that gave a frame), `firstPublished`.
        public var name: String
        /// When it ended, in nanoseconds of `CLOCK_MONOTONIC`.
        public var monotonicNanoseconds: UInt64

        /// Creates a phase (a caller's own, to put beside the capture's).
        public init(name: String, monotonicNanoseconds: UInt64) {
            self.name = name
            self.monotonicNanoseconds = monotonicNanoseconds
        }

        public var description: String { "\(name)=\(monotonicNanoseconds)" }
    }

    private struct State {
        var accounting: CaptureAccounting
        var framesPublished: UInt64 = 0
        var isStopRequested = false
        /// `run` was called: it streams once (a second stream would re-queue buffers subscribers may still hold).
        var hasRun = false
        /// ``arm()`` queued every buffer and started streaming already.
        var isArmed = false
        /// The start's phases so far (``startPhases``).
        var startPhases: [StartPhase] = []
    }

    /// The configuration it was made with.
    public let configuration: Configuration
    /// What was negotiated.
    public let format: Format
    /// The driver's name (`v4l2_capability.driver`, e.g. `"vivid"`, `"uvcvideo"`).
    public let driver: String
    /// The device's name (`v4l2_capability.card`).
    public let card: String
    /// Buffers the driver granted.
    public let bufferCount: Int
    /// Whether the device is multi-planar (`V4L2_BUF_TYPE_VIDEO_CAPTURE_MPLANE`).
    public let isMultiplanar: Bool
    /// The memory mode in use: ``MemoryMode/deviceBuffers`` or ``MemoryMode/importedMemFD``, never
    /// ``MemoryMode/automatic``.
    public let memoryMode: MemoryMode
    /// Why ``memoryMode`` was chosen (for logs), e.g. "udmabuf: /dev/udmabuf present and vivid imports DMA-BUFs".
    public let memoryModeReason: String

    private let device: CaptureDevice
    private let queue: V4L2Queue
    /// The buffers made so far, by index: all of them, or (imported memory) the first
    /// ``Configuration/buffersBeforeFirstFrame`` until the capture thread makes the others after the first frame.
    private let buffers: Mutex<[DeviceBuffer]>
    /// What making the rest of the imported buffers needs; nil when every buffer was made at once.
    private let unmade: UnmadeBuffers?
    private let returned: ReturnedBuffers
    private let state: Mutex<State>

    /// Opens the device, negotiates the format, size and frame interval, and allocates and exports its buffers.
    ///
    /// Nothing streams until ``run(publishingTo:onFrame:)``.
    ///
    /// - Throws: ``V4L2CaptureError/Code-swift.struct/notACaptureDevice``,
    ///   ``V4L2CaptureError/Code-swift.struct/unsupportedFormat`` (naming what the device offers),
    ///   ``V4L2CaptureError/Code-swift.struct/invalidArgument``, ``V4L2CaptureError/Code-swift.struct/surface``,
    ///   ``V4L2CaptureError/Code-swift.struct/deviceLost``, ``V4L2CaptureError/Code-swift.struct/systemCall``.
    public init(configuration: Configuration) throws(V4L2CaptureError) {
        self.configuration = configuration
        guard (3...64).contains(configuration.bufferCount) else {
            throw V4L2CaptureError(.invalidArgument, "V4L2Capture", message: "bufferCount \(configuration.bufferCount)")
        }
        if let fps = configuration.framesPerSecond, !(fps > 0 && fps <= 10_000) {
            throw V4L2CaptureError(.invalidArgument, "V4L2Capture", message: "framesPerSecond \(fps)")
        }
        let path = configuration.devicePath
        let descriptor = try Syscall.openDevice(path).mapError { V4L2CaptureError.systemCall("open(\(path))", $0) }
            .get()
        var phases = [Self.phase("opened")]
        let device = CaptureDevice(descriptor: descriptor)
        let negotiated = try Self.negotiate(device.descriptor, configuration, &phases)
        self.driver = negotiated.driver
        self.card = negotiated.card
        self.format = negotiated.format
        self.isMultiplanar = negotiated.isMultiplanar
        self.device = device
        let allocated = try Self.allocateBuffers(device.descriptor, negotiated, configuration, &phases)
        self.queue = allocated.queue
        self.buffers = Mutex(allocated.buffers)
        self.unmade = allocated.unmade
        let granted = allocated.unmade?.granted ?? allocated.buffers.count
        self.bufferCount = granted
        self.memoryMode = allocated.queue.importsDMABufs ? .importedMemFD : .deviceBuffers
        self.memoryModeReason = allocated.reason
        self.returned = try ReturnedBuffers()
        phases.append(Self.phase("buffersAllocated"))
        var state = State(accounting: CaptureAccounting(bufferCount: granted, made: allocated.buffers.count))
        state.startPhases = phases
        self.state = Mutex(state)
    }

    /// What the start did and when, in order: the phases of ``init(configuration:)``, then those of ``arm()`` (or
    /// of ``run(publishingTo:onFrame:)`` when it arms) and the first frame's. See ``StartPhase``.
    public var startPhases: [StartPhase] { state.withLock { $0.startPhases } }

    private static func phase(_ name: String) -> StartPhase {
        StartPhase(name: name, monotonicNanoseconds: UInt64(clamping: HostClock.now.value))
    }

    private func notePhase(_ name: String) {
        let phase = Self.phase(name)
        state.withLock { $0.startPhases.append(phase) }
    }

    // MARK: Negotiation

    private struct Negotiated {
        var driver: String
        var card: String
        var format: Format
        var isMultiplanar: Bool
    }

    private static func negotiate(
        _ fd: FileDescriptor,
        _ configuration: Configuration,
        _ phases: inout [StartPhase]
    ) throws(V4L2CaptureError) -> Negotiated {
        let path = configuration.devicePath
        let capability = try Syscall.v4l2QueryCapability(fd).mapError {
            V4L2CaptureError.systemCall("VIDIOC_QUERYCAP", $0)
        }
        .get()
        let caps =
            capability.capabilities & V4L2Constants.capabilityDeviceCaps != 0
            ? capability.deviceCapabilities : capability.capabilities
        let singlePlanar = caps & V4L2Constants.capabilityVideoCapture != 0
        let multiplanar = caps & V4L2Constants.capabilityVideoCaptureMultiplanar != 0
        guard singlePlanar || multiplanar, caps & V4L2Constants.capabilityStreaming != 0 else {
            throw V4L2CaptureError(
                .notACaptureDevice,
                "VIDIOC_QUERYCAP(\(path))",
                message: "\(capability.card) (\(capability.driver)) is not a streaming video capture device"
            )
        }
        // A device offering both APIs is driven single-planar; the queue's memory is settled in allocateBuffers.
        let queue = V4L2Queue(isMultiplanar: !singlePlanar, importsDMABufs: false)
        // The formats offered (a bounded enumeration: a driver lists a few dozen at most).
        var offered: [V4L2PixelFormat] = []
        for index in 0..<UInt32(256) {
            switch Syscall.v4l2EnumerateFormat(fd, queue, index: index) {
            case .success(let code): offered.append(V4L2PixelFormat(rawValue: code))
            case .failure(.invalidArgument): break
            case .failure(let errno): throw V4L2CaptureError.systemCall("VIDIOC_ENUM_FMT", errno)
            }
            if offered.count < Int(index) + 1 { break }
        }
        var wanted = configuration.pixelFormat.map { V4L2PixelFormat.candidates(for: $0) } ?? V4L2PixelFormat.supported
        if let device = configuration.devicePixelFormat {
            guard wanted.contains(device) else {
                throw V4L2CaptureError(
                    .unsupportedFormat,
                    "V4L2Capture(\(path))",
                    message:
                        "\(device) cannot deliver \(configuration.pixelFormat.map { "\($0)" } ?? "a FrameBus format")"
                )
            }
            wanted = [device]
        }
        guard let chosen = wanted.first(where: offered.contains) else {
            throw V4L2CaptureError(
                .unsupportedFormat,
                "V4L2Capture(\(path))",
                message: "\(capability.card) offers \(offered.map(\.description).joined(separator: ", ")); "
                    + "FrameBus needs \(wanted.map(\.description).joined(separator: " or "))"
            )
        }
        phases.append(phase("queried"))
        let current = try Syscall.v4l2GetFormat(fd, queue).mapError { V4L2CaptureError.systemCall("VIDIOC_G_FMT", $0) }
            .get()
        var request = Syscall.V4L2Format()
        request.pixelFormat = chosen.rawValue
        request.width = UInt32(clamping: configuration.width ?? Int(current.width))
        request.height = UInt32(clamping: configuration.height ?? Int(current.height))
        request.field = V4L2Constants.fieldNone
        if let asked = configuration.pixelFormat, asked.isYCbCr {
            // Ask for the range (V4L2_PIX_FMT_FLAG_SET_CSC); drivers that cannot convert ignore it, and the range
            // they report is checked below.
            request.flags = V4L2Constants.formatFlagSetColorimetry
            request.quantization =
                asked.range == .full ? V4L2Colorimetry.Quantization.full : V4L2Colorimetry.Quantization.limited
        }
        let set = try Syscall.v4l2SetFormat(fd, queue, request, tryOnly: false)
            .mapError { V4L2CaptureError.systemCall("VIDIOC_S_FMT", $0) }.get()
        guard set.pixelFormat == chosen.rawValue else {
            throw V4L2CaptureError(
                .unsupportedFormat,
                "VIDIOC_S_FMT(\(path))",
                message: "asked for \(chosen), the driver chose \(V4L2PixelFormat(rawValue: set.pixelFormat))"
            )
        }
        guard Int(set.planeCount) == chosen.memoryPlaneCount, set.planeBytesPerLine.count == chosen.memoryPlaneCount
        else {
            throw V4L2CaptureError(
                .unsupportedFormat,
                "VIDIOC_S_FMT(\(path))",
                message: "\(chosen) in \(set.planeCount) memory planes; FrameBus expects \(chosen.memoryPlaneCount)"
            )
        }
        guard set.field == V4L2Constants.fieldNone else {
            throw V4L2CaptureError(
                .unsupportedFormat,
                "VIDIOC_S_FMT(\(path))",
                message: "interlaced (field \(set.field))"
            )
        }
        if (configuration.width.map { $0 != Int(set.width) } ?? false)
            || (configuration.height.map { $0 != Int(set.height) } ?? false)
        {
            let sizes = Self.frameSizes(fd, chosen).joined(separator: ", ")
            throw V4L2CaptureError(
                .unsupportedFormat,
                "VIDIOC_S_FMT(\(path))",
                message: "asked for \(request.width)x\(request.height), the driver chose \(set.width)x\(set.height)"
                    + (sizes.isEmpty ? "" : "; \(chosen) sizes: \(sizes)")
            )
        }
        let colorimetry = V4L2Colorimetry(
            colorspace: set.colorspace,
            transferFunction: set.transferFunction,
            yCbCrEncoding: set.yCbCrEncoding,
            quantization: set.quantization
        )
        let range = colorimetry.range(isYCbCr: chosen.isYCbCr)
        guard let pixelFormat = chosen.pixelFormat(range: range) else {
            throw V4L2CaptureError(.unsupportedFormat, "V4L2Capture(\(path))", message: "\(chosen)")
        }
        if let asked = configuration.pixelFormat, asked.base != pixelFormat {
            throw V4L2CaptureError(
                .unsupportedFormat,
                "V4L2Capture(\(path))",
                message: "asked for \(asked); the device delivers \(chosen) in \(range) range, which is \(pixelFormat)"
            )
        }
        var format = Format(
            devicePixelFormat: chosen,
            pixelFormat: pixelFormat,
            width: Int(set.width),
            height: Int(set.height),
            bytesPerLine: set.planeBytesPerLine.map { Int($0) },
            sizes: set.planeImageSize.map { Int($0) },
            colorimetry: colorimetry
        )
        phases.append(phase("formatSet"))
        format.frameInterval = try Self.negotiateInterval(fd, queue, configuration.framesPerSecond)
        phases.append(phase("intervalSet"))
        return Negotiated(
            driver: capability.driver,
            card: capability.card,
            format: format,
            isMultiplanar: queue.isMultiplanar
        )
    }

    private static func frameSizes(_ fd: FileDescriptor, _ format: V4L2PixelFormat) -> [String] {
        var sizes: [String] = []
        for index in 0..<UInt32(64) {
            guard
                case .success(let size) = Syscall.v4l2EnumerateFrameSize(fd, pixelFormat: format.rawValue, index: index)
            else { break }
            if size.type == V4L2Constants.frameSizeDiscrete {
                sizes.append("\(size.width)x\(size.height)")
            } else {
                sizes.append("\(size.width)x\(size.height)…\(size.maxWidth)x\(size.maxHeight)")
                break
            }
        }
        return sizes
    }

    private static func negotiateInterval(
        _ fd: FileDescriptor,
        _ queue: V4L2Queue,
        _ framesPerSecond: Double?
    ) throws(V4L2CaptureError) -> (numerator: Int, denominator: Int)? {
        if let framesPerSecond {
            // 1000 / (fps · 1000): exact for whole and common fractional rates (29.97 → 1000/29970).
            let denominator = UInt32((framesPerSecond * 1000).rounded())
            switch Syscall.v4l2SetFrameInterval(fd, queue, numerator: 1000, denominator: max(1, denominator)) {
            case .success: break
            case .failure(.invalidArgument), .failure(.notSupported), .failure(.inappropriateIOCTLForDevice): break
            case .failure(let errno): throw V4L2CaptureError.systemCall("VIDIOC_S_PARM", errno)
            }
        }
        switch Syscall.v4l2GetFrameInterval(fd, queue) {
        case .success(let interval) where interval.numerator > 0 && interval.denominator > 0:
            return (Int(interval.numerator), Int(interval.denominator))
        case .success, .failure(.invalidArgument), .failure(.notSupported):
            return nil
        case .failure(let errno):
            throw V4L2CaptureError.systemCall("VIDIOC_G_PARM", errno)
        }
    }

    /// One frame's buffer: the surface subscribers get and, when the device imports it, the DMA-BUFs it is queued
    /// with (one per memory plane).
    struct DeviceBuffer: Sendable {
        var surface: Surface
        var imported: UDMABufDescriptors?
    }

    private struct Allocated {
        init(queue: V4L2Queue, buffers: [DeviceBuffer], reason: String) {
            self.queue = queue
            self.buffers = buffers
            self.reason = reason
        }

        init(queue: V4L2Queue, imported: (buffers: [DeviceBuffer], unmade: UnmadeBuffers?), reason: String) {
            self.queue = queue
            self.buffers = imported.buffers
            self.unmade = imported.unmade
            self.reason = reason
        }

        var queue: V4L2Queue
        var buffers: [DeviceBuffer]
        var reason: String
        var unmade: UnmadeBuffers? = nil
    }

    /// Imported buffers still to make after the first frame: the layout and sizes every one of them has.
    struct UnmadeBuffers: Sendable {
        var granted: Int
        var layout: SurfaceLayout
        var lengths: [Int]
    }

    private static func allocateBuffers(
        _ fd: FileDescriptor,
        _ negotiated: Negotiated,
        _ configuration: Configuration,
        _ phases: inout [StartPhase]
    ) throws(V4L2CaptureError) -> Allocated {
        let mmap = V4L2Queue(isMultiplanar: negotiated.isMultiplanar, importsDMABufs: false)
        let udmabuf = configuration.udmabufDevicePath
        let driver = negotiated.driver
        switch configuration.memoryMode {
        case .deviceBuffers:
            return Allocated(
                queue: mmap,
                buffers: try allocateDeviceBuffers(fd, mmap, negotiated.format, configuration, &phases),
                reason: "MMAP: asked for"
            )
        case .importedMemFD:
            var queue = mmap
            queue.importsDMABufs = true
            return Allocated(
                queue: queue,
                imported: try allocateImportedBuffers(fd, queue, negotiated.format, configuration, &phases),
                reason: "udmabuf: asked for"
            )
        case .automatic:
            guard Syscall.exists(udmabuf) else {
                return Allocated(
                    queue: mmap,
                    buffers: try allocateDeviceBuffers(fd, mmap, negotiated.format, configuration, &phases),
                    reason: "MMAP: \(udmabuf) absent"
                )
            }
            var queue = mmap
            queue.importsDMABufs = true
            do {
                return Allocated(
                    queue: queue,
                    imported: try allocateImportedBuffers(fd, queue, negotiated.format, configuration, &phases),
                    reason: "udmabuf: \(udmabuf) present and \(driver) imports DMA-BUFs"
                )
            } catch {
                if error.code == .deviceLost { throw error }
                // Free whatever the import left (buffers of the DMABUF queue), then let the device allocate.
                _ = Syscall.v4l2RequestBuffers(fd, queue, count: 0)
                return Allocated(
                    queue: mmap,
                    buffers: try allocateDeviceBuffers(fd, mmap, negotiated.format, configuration, &phases),
                    reason: "MMAP: the udmabuf import failed (\(error))"
                )
            }
        }
    }

    private static func requestBuffers(
        _ fd: FileDescriptor,
        _ queue: V4L2Queue,
        _ configuration: Configuration
    ) throws(V4L2CaptureError) -> UInt32 {
        let memory = queue.importsDMABufs ? "DMABUF" : "MMAP"
        let granted = try Syscall.v4l2RequestBuffers(fd, queue, count: UInt32(configuration.bufferCount))
            .mapError { V4L2CaptureError.systemCall("VIDIOC_REQBUFS(\(memory))", $0) }.get()
        guard granted >= 3, granted <= 256 else {
            throw V4L2CaptureError(
                .invalidArgument,
                "VIDIOC_REQBUFS(\(configuration.devicePath), \(memory))",
                message: "the driver granted \(granted) buffers; at least 3 are needed"
            )
        }
        return granted
    }

    /// `V4L2_MEMORY_MMAP`: the device's buffers, each memory plane exported read-only and imported as a DMA-BUF
    /// surface.
    private static func allocateDeviceBuffers(
        _ fd: FileDescriptor,
        _ queue: V4L2Queue,
        _ format: Format,
        _ configuration: Configuration,
        _ phases: inout [StartPhase]
    ) throws(V4L2CaptureError) -> [DeviceBuffer] {
        let granted = try requestBuffers(fd, queue, configuration)
        phases.append(phase("buffersRequested"))
        let planeCount = format.devicePixelFormat.memoryPlaneCount
        var buffers: [DeviceBuffer] = []
        for index in 0..<granted {
            let lengths = try Syscall.v4l2QueryBuffer(fd, queue, index: index, planeCount: planeCount)
                .mapError { V4L2CaptureError.systemCall("VIDIOC_QUERYBUF", $0) }.get()
            guard lengths.count == planeCount else {
                throw V4L2CaptureError(
                    .invalidArgument,
                    "VIDIOC_QUERYBUF(\(configuration.devicePath))",
                    message: "buffer \(index) has \(lengths.count) planes, \(format.devicePixelFormat) \(planeCount)"
                )
            }
            let layout = try format.devicePixelFormat.surfaceLayout(
                width: format.width,
                height: format.height,
                bytesPerLine: format.memoryPlaneBytesPerLine,
                bufferLengths: lengths.map { Int($0) },
                range: format.pixelFormat.range
            )
            var exported: [FileDescriptor] = []
            // The surface duplicates the descriptors; ours are closed either way.
            defer { for descriptor in exported { Syscall.close(descriptor) } }
            for plane in 0..<UInt32(planeCount) {
                exported.append(
                    try Syscall.v4l2ExportBuffer(fd, queue, index: index, plane: plane)
                        .mapError { V4L2CaptureError.systemCall("VIDIOC_EXPBUF", $0) }.get()
                )
            }
            let planes = layout.planes.enumerated().map {
                DMABufPlane(
                    descriptor: exported[planeCount == 1 ? 0 : $0.offset],
                    offset: $0.element.offset,
                    bytesPerRow: $0.element.bytesPerRow
                )
            }
            do {
                let surface = try Surface.importDMABuf(
                    planes: planes,
                    layout: layout,
                    modifier: DRMModifier.linear,
                    readOnly: true
                )
                buffers.append(DeviceBuffer(surface: surface, imported: nil))
                if index == 0 { phases.append(phase("firstBufferAllocated")) }
            } catch {
                throw V4L2CaptureError(.surface, "Surface.importDMABuf(buffer \(index))", message: error.description)
            }
        }
        return buffers
    }

    /// `V4L2_MEMORY_DMABUF`: sealed memfd surfaces of our own, each memfd wrapped in a udmabuf the device imports;
    /// every buffer is prepared (`VIDIOC_PREPARE_BUF`) so a driver that cannot import them fails here, not later.
    private static func allocateImportedBuffers(
        _ fd: FileDescriptor,
        _ queue: V4L2Queue,
        _ format: Format,
        _ configuration: Configuration,
        _ phases: inout [StartPhase]
    ) throws(V4L2CaptureError) -> (buffers: [DeviceBuffer], unmade: UnmadeBuffers?) {
        let granted = try requestBuffers(fd, queue, configuration)
        phases.append(phase("buffersRequested"))
        let planeCount = format.devicePixelFormat.memoryPlaneCount
        let pageSize = Syscall.pageSize
        // Each memory plane: the size the driver asks for, in whole pages (udmabuf maps pages). sizeimage is a
        // UInt32 from the driver, so rounding cannot overflow an Int.
        let lengths = format.memoryPlaneSizes.map { ($0 + pageSize - 1) / pageSize * pageSize }
        let layout = try format.devicePixelFormat.surfaceLayout(
            width: format.width,
            height: format.height,
            bytesPerLine: format.memoryPlaneBytesPerLine,
            bufferLengths: lengths,
            range: format.pixelFormat.range
        )
        // The first few now, the rest after the first frame (``Configuration/buffersBeforeFirstFrame``).
        let now = min(Int(granted), max(3, configuration.buffersBeforeFirstFrame))
        let unmade = UnmadeBuffers(granted: Int(granted), layout: layout, lengths: lengths)
        var buffers: [DeviceBuffer] = []
        for index in 0..<now {
            buffers.append(
                try makeImportedBuffer(fd, queue, unmade, index: index, planeCount: planeCount, configuration)
            )
            if index == 0 { phases.append(phase("firstBufferAllocated")) }
        }
        return (buffers, now < Int(granted) ? unmade : nil)
    }

    /// One imported buffer: a sealed memfd surface wrapped in udmabufs, prepared in the device's slot `index`.
    private static func makeImportedBuffer(
        _ fd: FileDescriptor,
        _ queue: V4L2Queue,
        _ unmade: UnmadeBuffers,
        index: Int,
        planeCount: Int,
        _ configuration: Configuration
    ) throws(V4L2CaptureError) -> DeviceBuffer {
        let made: (surface: Surface, udmabufs: UDMABufDescriptors)
        do {
            made = try Surface.makeMemFDWithUDMABufs(
                layout: unmade.layout,
                name: "framebus-v4l2",
                descriptorPerPlane: planeCount > 1,
                minimumByteCounts: unmade.lengths,
                devicePath: configuration.udmabufDevicePath
            )
        } catch {
            throw V4L2CaptureError(
                .surface,
                "Surface.makeMemFDWithUDMABufs(buffer \(index))",
                message: error.description
            )
        }
        let buffer = DeviceBuffer(surface: made.surface, imported: made.udmabufs)
        let prepared = Self.queue(fd, queue, buffer, index: index, planeCount: planeCount, prepareOnly: true)
        if case .failure(let errno) = prepared {
            throw V4L2CaptureError.systemCall("VIDIOC_PREPARE_BUF(DMABUF, buffer \(index))", errno)
        }
        return buffer
    }

    /// Queues (or prepares) buffer `index`: an MMAP buffer by index, an imported one with its DMA-BUFs.
    private static func queue(
        _ fd: FileDescriptor,
        _ queue: V4L2Queue,
        _ buffer: DeviceBuffer,
        index: Int,
        planeCount: Int,
        prepareOnly: Bool = false
    ) -> Result<Void, Errno> {
        if let imported = buffer.imported {
            return Syscall.v4l2QueueBuffer(
                fd,
                queue,
                index: UInt32(index),
                planeCount: planeCount,
                dmabufs: zip(imported.descriptors, imported.byteCounts).map { ($0, UInt32(clamping: $1)) },
                prepareOnly: prepareOnly
            )
        }
        return Syscall.v4l2QueueBuffer(
            fd,
            queue,
            index: UInt32(index),
            planeCount: planeCount,
            prepareOnly: prepareOnly
        )
    }

    private func queueBuffer(_ index: Int) -> Result<Void, Errno> {
        Self.queue(
            device.descriptor,
            queue,
            buffers.withLock { $0[index] },
            index: index,
            planeCount: format.devicePixelFormat.memoryPlaneCount
        )
    }

    /// Makes the next unmade imported buffer and queues it (after the first frame, between frames); nil when it was
    /// made or none is left, an end reason if it could not be.
    private func makeNextBuffer() -> EndReason? {
        guard let unmade, let index = state.withLock({ $0.accounting.nextUnmade }) else { return nil }
        let buffer: DeviceBuffer
        do {
            buffer = try Self.makeImportedBuffer(
                device.descriptor,
                queue,
                unmade,
                index: index,
                planeCount: format.devicePixelFormat.memoryPlaneCount,
                configuration
            )
        } catch {
            return Self.ending(error)
        }
        // Made in index order: the slot is the next one of the list.
        let isNext = buffers.withLock { buffers -> Bool in
            guard buffers.count == index else { return false }
            buffers.append(buffer)
            return true
        }
        guard isNext else {
            let error = V4L2CaptureError(.invalidArgument, "V4L2Capture", message: "buffer \(index) out of order")
            return Self.ending(error)
        }
        state.withLock { $0.accounting.made(index: index) }
        if case .failure(let errno) = queueBuffer(index) { return Self.ending(.systemCall("VIDIOC_QBUF", errno)) }
        return nil
    }

    // MARK: Publishing

    /// A publisher configuration for this capture: its format (and the compressed variant if asked), and a
    /// held-frame budget of the buffer count minus the producer's reserve.
    ///
    /// The reserve is 3 buffers from 6 buffers up (one being published, two queued in the device so it never waits
    /// for the capture loop to re-queue a released one), else 2; at most 4 subscribers share the rest.
    public func publisherConfiguration(path: String, offeringCompressedVariant: Bool = false) -> Publisher.Configuration
    {
        var formats = [format.pixelFormat]
        if offeringCompressedVariant, let variant = format.pixelFormat.compressedVariant { formats.append(variant) }
        var configuration = Publisher.Configuration(path: path, formats: formats)
        configuration.producerReserve = bufferCount >= 6 ? 3 : 2
        configuration.heldFrameBudget = max(1, bufferCount - configuration.producerReserve)
        configuration.maximumSubscribers = max(1, min(4, bufferCount - configuration.producerReserve))
        return configuration
    }

    /// Streams from the device into `publisher` on the calling thread until ``stop()``, the publisher stops, or the
    /// device fails.
    ///
    /// Waits in `poll(2)` on the device and on the buffers coming back (at most a second per wait, no busy loop).
    /// Call it once, from a thread of your own (not from Swift's cooperative pool: it blocks); a second call, or a
    /// call after ``stop()``, returns ``EndReason/stopped`` at once.
    ///
    /// - Parameters:
    ///   - publisher: publishes every frame; configure it with ``publisherConfiguration(path:offeringCompressedVariant:)``.
    ///   - onFrame: called on this thread after each frame is published (keep it short: the device waits).
    /// - Returns: why it ended. On ``EndReason/deviceLost(_:)`` and ``EndReason/failed(_:)`` the publisher has
    ///   been stopped (subscribers get END_OF_STREAM).
    public func run(publishingTo publisher: Publisher, onFrame: ((CapturedFrame) -> Void)? = nil) -> EndReason {
        let proceed = state.withLock { state -> Bool in
            guard !state.hasRun, !state.isStopRequested else { return false }
            state.hasRun = true
            return true
        }
        guard proceed else { return .stopped }
        let end = stream(publisher, onFrame)
        _ = Syscall.v4l2Stream(device.descriptor, queue, on: false)
        switch end {
        case .deviceLost, .failed: publisher.stop()
        case .stopped, .publisherStopped: break
        }
        return end
    }

    /// Queues every buffer and starts the device streaming now, before the publisher exists, so that the device's
    /// arming (and its first frame) overlaps the producer's bus set-up; ``run(publishingTo:onFrame:)`` then takes
    /// the frames the device finished meanwhile. Optional: `run` arms a device that was not armed. At most the
    /// buffer count of frames can wait; a device that fills them before `run` waits, and the gap shows as lost
    /// frames (the usual sequence rule). Idempotent; does nothing once `run` was called or stop was requested.
    ///
    /// The corresponding ioctls are `VIDIOC_QBUF` of every buffer, then `VIDIOC_STREAMON`.
    ///
    /// - Throws: ``V4L2CaptureError/Code-swift.struct/systemCall`` or
    ///   ``V4L2CaptureError/Code-swift.struct/deviceLost``, as `run` would end with.
    public func arm() throws(V4L2CaptureError) {
        let proceed = state.withLock { state -> Bool in
            guard !state.hasRun, !state.isStopRequested, !state.isArmed else { return false }
            state.isArmed = true
            return true
        }
        guard proceed else { return }
        if let error = startStreaming() { throw error }
    }

    /// `VIDIOC_QBUF` of every buffer, then `VIDIOC_STREAMON`; nil when streaming.
    private func startStreaming() -> V4L2CaptureError? {
        for index in 0..<buffers.withLock({ $0.count }) {
            if case .failure(let errno) = queueBuffer(index) { return .systemCall("VIDIOC_QBUF", errno) }
        }
        notePhase("queued")
        if case .failure(let errno) = Syscall.v4l2Stream(device.descriptor, queue, on: true) {
            return .systemCall("VIDIOC_STREAMON", errno)
        }
        notePhase("streaming")
        return nil
    }

    /// Ends ``run(publishingTo:onFrame:)`` at its next wake-up (at once: it rings the loop). Idempotent.
    public func stop() {
        state.withLock { $0.isStopRequested = true }
        returned.ring()
    }

    /// A snapshot of the counters.
    public var statistics: Statistics {
        state.withLock { state in
            let accounting = state.accounting
            var statistics = Statistics()
            statistics.framesCaptured = accounting.dequeued
            statistics.framesPublished = state.framesPublished
            statistics.framesLostUpstream = accounting.lostUpstream
            statistics.framesLostWithoutBuffers = accounting.lostWhileStarved
            statistics.errorFrames = accounting.errorFrames
            statistics.framesDroppedLate = accounting.droppedLate
            statistics.framesSkippedForPressure = accounting.skippedForPressure
            statistics.starvations = accounting.starvations
            statistics.sequenceRestarts = accounting.restarts
            statistics.bufferCount = accounting.bufferCount
            statistics.buffersQueued = accounting.queuedCount
            statistics.buffersHeld = accounting.publishedCount
            statistics.lowestBuffersQueued = accounting.lowestQueued
            return statistics
        }
    }

    private struct Waiting {
        var buffer: Syscall.V4L2DequeuedBuffer
        var dequeue: CaptureAccounting.Dequeue
    }

    private func stream(_ publisher: Publisher, _ onFrame: ((CapturedFrame) -> Void)?) -> EndReason {
        let fd = device.descriptor
        // Armed already (``arm()``): the buffers are queued and the device streams.
        let isArmed = state.withLock { $0.isArmed }
        if !isArmed, let error = startStreaming() { return Self.ending(error) }
        var pendingDiscontinuity = false
        // Adapting to system pressure: publish one frame in `decimation`, `phase` counting the device's frames.
        let nominalRate = format.framesPerSecond ?? 30
        let policy = publisher.configuration.systemPressurePolicy ?? SystemPressurePolicy()
        var decimation = 1
        var phase = 0
        // The start trace's last two phases (``startPhases``).
        var hasDequeued = false
        var hasPublished = false
        while true {
            if state.withLock({ $0.isStopRequested }) { return .stopped }
            // After the first frame, the buffers not made before it: one per turn, so frames are taken in between.
            var isMaking = false
            if hasPublished, unmade != nil {
                if let end = makeNextBuffer() { return end }
                isMaking = state.withLock { $0.accounting.nextUnmade != nil }
            }
            let events: [Int16]
            switch Syscall.pollReadable([fd.rawValue, returned.descriptor], timeoutMilliseconds: isMaking ? 0 : 1000) {
            case .success(let ready): events = ready
            case .failure(let errno): return Self.ending(.systemCall("poll", errno))
            }
            // Buffers everyone released go back to the device first, so it is fed before anything else.
            if let end = requeueReturned() { return end }
            guard events[0] != 0 else { continue }
            // Everything the device finished, oldest first.
            var waiting: [Waiting] = []
            dequeuing: while true {
                switch Syscall.v4l2DequeueBuffer(fd, queue, planeCount: format.devicePixelFormat.memoryPlaneCount) {
                case .success(let buffer):
                    guard Int(buffer.index) < bufferCount else {
                        return Self.ending(
                            V4L2CaptureError(.systemCall, "VIDIOC_DQBUF", message: "buffer index \(buffer.index)")
                        )
                    }
                    let dequeue = state.withLock {
                        $0.accounting.dequeued(index: Int(buffer.index), sequence: buffer.sequence)
                    }
                    waiting.append(Waiting(buffer: buffer, dequeue: dequeue))
                    if !hasDequeued {
                        hasDequeued = true
                        notePhase("firstDequeued")
                    }
                case .failure(.resourceTemporarilyUnavailable):
                    break dequeuing
                case .failure(.invalidArgument) where !waiting.isEmpty:
                    break dequeuing
                case .failure(let errno):
                    return Self.ending(.systemCall("VIDIOC_DQBUF", errno))
                }
            }
            var toDrop = state.withLock { $0.accounting.waitingFramesToDrop() }
            for entry in waiting {
                let index = Int(entry.buffer.index)
                if entry.dequeue.lostBefore > 0 {
                    publisher.reportDroppedFrames(
                        reason: entry.dequeue.lostReason,
                        count: Int(clamping: entry.dequeue.lostBefore)
                    )
                }
                if entry.dequeue.isRestart { pendingDiscontinuity = true }
                let errored = entry.buffer.flags & V4L2Constants.bufferFlagError != 0
                if errored || toDrop > 0 {
                    // A damaged frame, or the oldest waiting one while the device has no buffer: reported, and its
                    // buffer goes straight back.
                    state.withLock {
                        if errored {
                            $0.accounting.discardErrored(index: index)
                        } else {
                            $0.accounting.droppedWaiting(index: index)
                        }
                    }
                    if !errored { toDrop -= 1 }
                    publisher.reportDroppedFrames(reason: errored ? .discontinuity : .frameWasLate, count: 1)
                    if case .failure(let errno) = queueBuffer(index) {
                        return Self.ending(.systemCall("VIDIOC_QBUF", errno))
                    }
                    continue
                }
                if configuration.adaptsToSystemPressure {
                    let level = publisher.systemPressureState.level
                    let current = nominalRate / Double(decimation)
                    let adapted = policy.adaptedFrameRate(nominal: nominalRate, current: current, level: level)
                    decimation = max(1, min(64, Int((nominalRate / adapted).rounded())))
                    phase = decimation > 1 ? (phase + 1) % decimation : 0
                    if phase != 0 {
                        state.withLock { $0.accounting.skippedForPressure(index: index) }
                        if case .failure(let errno) = queueBuffer(index) {
                            return Self.ending(.systemCall("VIDIOC_QBUF", errno))
                        }
                        continue
                    }
                }
                if let end = publish(entry.buffer, publisher, onFrame, &pendingDiscontinuity, lasting: decimation) {
                    return end
                }
                if !hasPublished {
                    hasPublished = true
                    notePhase("firstPublished")
                }
                // Between frames of a batch too: a slow batch must not keep released buffers from the device.
                if let end = requeueReturned() { return end }
            }
        }
    }

    /// Queues every buffer whose last holder let go since the last call; an end reason if the device failed.
    private func requeueReturned() -> EndReason? {
        for index in returned.take() {
            guard state.withLock({ $0.accounting.released(index: index) }) else { continue }
            if case .failure(let errno) = queueBuffer(index) {
                return Self.ending(.systemCall("VIDIOC_QBUF", errno))
            }
        }
        return nil
    }

    /// Publishes one waiting buffer; an end reason if the stream is over.
    private func publish(
        _ buffer: Syscall.V4L2DequeuedBuffer,
        _ publisher: Publisher,
        _ onFrame: ((CapturedFrame) -> Void)?,
        _ pendingDiscontinuity: inout Bool,
        lasting frames: Int = 1
    ) -> EndReason? {
        let index = Int(buffer.index)
        let returned = self.returned
        let pixelBuffer: PixelBuffer
        do {
            let surface = buffers.withLock { $0[index].surface }
            pixelBuffer = try PixelBuffer(surface: surface, attachments: format.attachments) {
                returned.returned(index)
            }
        } catch {
            return Self.ending(V4L2CaptureError(.surface, "PixelBuffer(buffer \(index))", message: error.description))
        }
        // From here the buffer comes back through its release handler, whatever happens.
        state.withLock { $0.accounting.published(index: index) }
        // A frame published in place of `frames` device frames lasts as long as they do.
        let duration = format.frameDuration
        let timing = SampleTimingInfo(
            presentationTimeStamp: Self.presentationTime(buffer),
            duration: frames > 1 && duration.isNumeric
                ? MediaTime(value: duration.value &* Int64(frames), timescale: duration.timescale) : duration
        )
        let sequence: UInt64
        do {
            sequence = try publisher.publish(pixelBuffer, timing: timing, discontinuity: pendingDiscontinuity)
        } catch {
            return error.code == .closed
                ? .publisherStopped
                : Self.ending(V4L2CaptureError(.invalidArgument, "Publisher.publish", message: error.description))
        }
        pendingDiscontinuity = false
        state.withLock { $0.framesPublished &+= 1 }
        onFrame?(
            CapturedFrame(
                pixelBuffer: pixelBuffer,
                sequence: sequence,
                deviceSequence: buffer.sequence,
                bufferIndex: index,
                timing: timing
            )
        )
        return nil
    }

    /// The buffer's timestamp when the driver stamps it with `CLOCK_MONOTONIC` (the host clock), else the time of
    /// dequeuing.
    private static func presentationTime(_ buffer: Syscall.V4L2DequeuedBuffer) -> MediaTime {
        guard buffer.flags & V4L2Constants.bufferFlagTimestampMask == V4L2Constants.bufferFlagTimestampMonotonic,
            buffer.seconds >= 0, buffer.microseconds >= 0, buffer.microseconds < 1_000_000
        else { return HostClock.now }
        let (nanoseconds, overflow) = buffer.seconds.multipliedReportingOverflow(by: 1_000_000_000)
        guard !overflow else { return HostClock.now }
        return MediaTime(value: nanoseconds + buffer.microseconds * 1000, timescale: MediaTime.nanosecondTimescale)
    }

    private static func ending(_ error: V4L2CaptureError) -> EndReason {
        error.code == .deviceLost ? .deviceLost(error) : .failed(error)
    }
}
