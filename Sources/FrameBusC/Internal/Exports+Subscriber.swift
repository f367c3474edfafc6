import CFrameBusABI
import FrameBus
import SystemPackage

// The subscriber half of the C ABI; include/framebus.h documents each function.

/// The longest socket path (`sun_path` holds 108 bytes with the NUL).
let maximumSocketPathLength = 107

/// `fb_subscriber_options_init`.
@_cdecl("fb_subscriber_options_init")
public func fbSubscriberOptionsInit(_ options: UnsafeMutablePointer<fb_subscriber_options>?) {
    guard let options = unsafe options else { return }
    var defaults = unsafe fb_subscriber_options()
    unsafe defaults.queue_depth = 0
    unsafe defaults.reconnects = 0
    unsafe defaults.connect_timeout_ns = 5_000_000_000
    unsafe defaults.reconnect_interval_ns = 100_000_000
    unsafe defaults.accepts_dma_buf = 1
    unsafe options.pointee = defaults
}

/// `fb_subscriber_create`: with the default size policy (``FrameSizeLimit/default``).
@_cdecl("fb_subscriber_create")
public func fbSubscriberCreate(
    _ options: UnsafePointer<fb_subscriber_options>?,
    _ outSubscriber: UnsafeMutablePointer<OpaquePointer?>?,
    _ error: UnsafeMutablePointer<fb_error>?
) -> fb_status {
    unsafe subscriberCreate(options, flags: 0, outSubscriber, error, function: "fb_subscriber_create")
}

/// `fb_subscriber_create_with_flags`.
@_cdecl("fb_subscriber_create_with_flags")
public func fbSubscriberCreateWithFlags(
    _ options: UnsafePointer<fb_subscriber_options>?,
    _ flags: UInt32,
    _ outSubscriber: UnsafeMutablePointer<OpaquePointer?>?,
    _ error: UnsafeMutablePointer<fb_error>?
) -> fb_status {
    unsafe subscriberCreate(options, flags: flags, outSubscriber, error, function: "fb_subscriber_create_with_flags")
}

private func subscriberCreate(
    _ options: UnsafePointer<fb_subscriber_options>?,
    flags: UInt32,
    _ outSubscriber: UnsafeMutablePointer<OpaquePointer?>?,
    _ error: UnsafeMutablePointer<fb_error>?,
    function: String
) -> fb_status {
    unsafe boundary(error) { () throws(ABIError) in
        try checkSubscriberFlags(flags, function)
        try unsafe createSubscriber(options, outSubscriber, largestFrame: .default, flags: flags, function)
    }
}

/// `fb_subscriber_create_with_limit`: the caller's size policy, or none for a NULL limit, and flags.
@_cdecl("fb_subscriber_create_with_limit")
public func fbSubscriberCreateWithLimit(
    _ options: UnsafePointer<fb_subscriber_options>?,
    _ flags: UInt32,
    _ limit: UnsafePointer<fb_frame_size_limit>?,
    _ outSubscriber: UnsafeMutablePointer<OpaquePointer?>?,
    _ error: UnsafeMutablePointer<fb_error>?
) -> fb_status {
    unsafe boundary(error) { () throws(ABIError) in
        let function = "fb_subscriber_create_with_limit"
        try checkSubscriberFlags(flags, function)
        var largestFrame: FrameSizeLimit?
        if let limit = unsafe limit?.pointee {
            let side: ClosedRange<UInt32> = 1...65536
            guard side.contains(limit.maximum_width), side.contains(limit.maximum_height) else {
                throw ABIError(.invalidArgument, "\(function): maximum_width and maximum_height must be 1...65536")
            }
            let pixels: Int? = limit.maximum_pixel_count == 0 ? nil : Int(clamping: limit.maximum_pixel_count)
            largestFrame = FrameSizeLimit(
                maximumWidth: Int(limit.maximum_width),
                maximumHeight: Int(limit.maximum_height),
                maximumPixelCount: pixels
            )
        }
        try unsafe createSubscriber(options, outSubscriber, largestFrame: largestFrame, flags: flags, function)
    }
}

/// The create functions' `flags`: `FB_SUBSCRIBER_DEFERRED` and `FB_SUBSCRIBER_SYSTEM_PRESSURE`, in any combination.
private func checkSubscriberFlags(_ flags: UInt32, _ function: String) throws(ABIError) {
    guard flags & ~(UInt32(FB_SUBSCRIBER_DEFERRED) | UInt32(FB_SUBSCRIBER_SYSTEM_PRESSURE)) == 0 else {
        throw ABIError(.invalidArgument, "\(function): unknown flags 0x\(String(flags, radix: 16))")
    }
}

/// Every create function: `options` checked and turned into a configuration, the subscriber started.
private func createSubscriber(
    _ options: UnsafePointer<fb_subscriber_options>?,
    _ outSubscriber: UnsafeMutablePointer<OpaquePointer?>?,
    largestFrame: FrameSizeLimit?,
    flags: UInt32,
    _ function: String
) throws(ABIError) {
    guard let options = unsafe options?.pointee else { throw .null("options", in: function) }
    guard let outSubscriber = unsafe outSubscriber else { throw .null("out_subscriber", in: function) }
    let path = try unsafe boundedString(options.path, limit: maximumSocketPathLength, "\(function): path")
    let formats = try unsafe formatList(
        options.accepted_formats,
        count: options.accepted_format_count,
        limit: 16,
        "\(function): accepted_formats"
    )
    var configuration = Subscriber.Configuration(path: path, acceptedFormats: formats)
    configuration.logger = LogRoute.logger(label: "framebus.subscriber")
    configuration.largestFrame = largestFrame
    switch unsafe options.queue_depth {
    case 0: configuration.delivery = .latestOnly
    case 1...64: configuration.delivery = unsafe .queue(depth: Int(options.queue_depth))
    default: throw ABIError(.invalidArgument, unsafe "\(function): queue_depth \(options.queue_depth) is over 64")
    }
    guard let connectTimeout = unsafe positiveDuration(nanoseconds: options.connect_timeout_ns),
        let reconnectInterval = unsafe positiveDuration(nanoseconds: options.reconnect_interval_ns)
    else {
        throw ABIError(.invalidArgument, "\(function): connect_timeout_ns and reconnect_interval_ns must be > 0")
    }
    configuration.connectTimeout = connectTimeout
    configuration.reconnectInterval = reconnectInterval
    configuration.reconnects = unsafe options.reconnects != 0
    configuration.acceptsDMABuf = unsafe options.accepts_dma_buf != 0
    // Only a caller that opted in knows FB_EVENT_SYSTEM_PRESSURE and FB_DROP_WORK_FELL_BEHIND (a program built
    // before them gets neither): without the flag the HELLO does not ask for STATUS, and frames the publisher's
    // encoder skipped arrive as FB_DROP_OUT_OF_BUFFERS, as before.
    configuration.receivesStatus = flags & UInt32(FB_SUBSCRIBER_SYSTEM_PRESSURE) != 0
    configuration.isDeferred = flags & UInt32(FB_SUBSCRIBER_DEFERRED) != 0
    let waitSlice: Duration?
    switch unsafe options.wait_slice_us {
    case 0: waitSlice = nil
    case 1...100_000: waitSlice = unsafe .microseconds(Int64(options.wait_slice_us))
    default: throw ABIError(.invalidArgument, unsafe "\(function): wait_slice_us \(options.wait_slice_us) is over 100000")
    }
    let handle: SubscriberHandle
    do {
        handle = try SubscriberHandle(configuration: configuration, callerThreadSlice: waitSlice)
    } catch { throw ABIError(any: error) }
    unsafe outSubscriber.pointee = Handle.make(handle)
}

/// `fb_subscriber_destroy`.
@_cdecl("fb_subscriber_destroy")
public func fbSubscriberDestroy(_ subscriber: OpaquePointer?) {
    guard let subscriber = unsafe subscriber else { return }
    unsafe Handle.borrow(subscriber, as: SubscriberHandle.self).cancel()
    unsafe Handle.free(subscriber, as: SubscriberHandle.self)
}

/// `fb_subscriber_next_event`.
@_cdecl("fb_subscriber_next_event")
public func fbSubscriberNextEvent(
    _ subscriber: OpaquePointer?,
    _ timeoutNanoseconds: Int64,
    _ event: UnsafeMutablePointer<fb_event>?,
    _ error: UnsafeMutablePointer<fb_error>?
) -> fb_status {
    unsafe boundary(error) { () throws(ABIError) in
        let function = "fb_subscriber_next_event"
        guard let subscriber = unsafe subscriber else { throw .null("subscriber", in: function) }
        guard let event = unsafe event else { throw .null("event", in: function) }
        unsafe event.pointee = fb_event()
        let handle = unsafe Handle.borrow(subscriber, as: SubscriberHandle.self)
        let next = try handle.nextEvent(timeoutNanoseconds: timeoutNanoseconds).get()
        unsafe event.pointee = try makeEvent(next, status: { handle.subscriber.publisherStatus })
    }
}

/// An event for C; a frame becomes an `fb_frame` handle the caller owns. `status` gives the publisher's latest
/// STATUS, whose cost, frame duration and frames shed go with a pressure event.
func makeEvent(
    _ event: SubscriberEvent,
    status: () -> PublisherStatus?
) throws(ABIError) -> fb_event {
    var result = unsafe fb_event()
    switch event {
    case .connected(let session), .reconnected(let session):
        unsafe result.type = UInt32(FB_EVENT_CONNECTED.rawValue)
        unsafe result.session = fb_session(
            session,
            isReconnect: { if case .reconnected = event { true } else { false } }()
        )
    case .frame(let sample):
        // A frame that cannot be locked is released here (dropping `sample`) and reported as the call's error.
        let frame = try FrameHandle(sample: sample)
        unsafe result.type = UInt32(FB_EVENT_FRAME.rawValue)
        unsafe result.frame = unsafe Handle.make(frame)
    case .dropped(let drop):
        unsafe result.type = UInt32(FB_EVENT_DROP.rawValue)
        unsafe result.drop = fb_drop(
            reason: UInt32(drop.reason.rawValue),
            reserved: 0,
            first_sequence: drop.sequences.lowerBound,
            last_sequence: drop.sequences.upperBound,
            frame_count: drop.frameCount
        )
    case .systemPressureChanged(let state):
        // Only with FB_SUBSCRIBER_SYSTEM_PRESSURE (receivesStatus is off without it).
        unsafe result.type = UInt32(FB_EVENT_SYSTEM_PRESSURE.rawValue)
        unsafe result.system_pressure = fb_system_pressure(state, status: status())
    case .ended(let error):
        let mapped = ABIError(error)
        unsafe result.type = UInt32(FB_EVENT_END.rawValue)
        unsafe result.end_status = mapped.status.rawValue
        unsafe withUnsafeMutableBytes(of: &result.end_message) { buffer in
            unsafe copyMessage(mapped.message, into: buffer)
        }
    }
    return unsafe result
}

extension fb_system_pressure {
    /// The event's level and factors; cost, frame duration and frames shed from the publisher's latest STATUS.
    init(_ state: SystemPressureState, status: PublisherStatus?) {
        self.init(
            level: UInt32(state.level.rawValue),
            factors: UInt32(state.factors.rawValue),
            cost: status?.cost ?? -1,
            frame_duration_ns: status?.frameDuration.nanoseconds ?? Int64.min,  // FB_TIME_NONE
            frames_shed: status?.framesShed ?? 0
        )
    }
}

extension fb_session {
    init(_ session: Subscriber.Session, isReconnect: Bool) {
        self.init(
            format: session.format.fourCC,
            is_reconnect: isReconnect ? 1 : 0,
            stream_id: session.streamID,
            subscriber_id: session.subscriberID,
            maximum_held_frames: UInt32(clamping: session.maximumHeldFrames),
            granted_queue_depth: UInt32(clamping: session.grantedQueueDepth)
        )
    }
}

/// `fb_subscriber_interrupt`.
@_cdecl("fb_subscriber_interrupt")
public func fbSubscriberInterrupt(_ subscriber: OpaquePointer?) {
    guard let subscriber = unsafe subscriber else { return }
    unsafe Handle.borrow(subscriber, as: SubscriberHandle.self).interrupt()
}

/// `fb_subscriber_resume`.
@_cdecl("fb_subscriber_resume")
public func fbSubscriberResume(_ subscriber: OpaquePointer?) {
    guard let subscriber = unsafe subscriber else { return }
    unsafe Handle.borrow(subscriber, as: SubscriberHandle.self).resume()
}

/// `fb_subscriber_get_session`.
@_cdecl("fb_subscriber_get_session")
public func fbSubscriberGetSession(
    _ subscriber: OpaquePointer?,
    _ session: UnsafeMutablePointer<fb_session>?,
    _ error: UnsafeMutablePointer<fb_error>?
) -> fb_status {
    unsafe boundary(error) { () throws(ABIError) in
        let function = "fb_subscriber_get_session"
        guard let subscriber = unsafe subscriber else { throw .null("subscriber", in: function) }
        guard let session = unsafe session else { throw .null("session", in: function) }
        guard let current = unsafe Handle.borrow(subscriber, as: SubscriberHandle.self).subscriber.session else {
            throw ABIError(.closed, "\(function): no handshake has completed yet")
        }
        unsafe session.pointee = fb_session(current, isReconnect: false)
    }
}

/// `fb_subscriber_is_connected`.
@_cdecl("fb_subscriber_is_connected")
public func fbSubscriberIsConnected(_ subscriber: OpaquePointer?) -> Int32 {
    guard let subscriber = unsafe subscriber else { return 0 }
    return unsafe Handle.borrow(subscriber, as: SubscriberHandle.self).subscriber.isConnected ? 1 : 0
}

/// `fb_subscriber_get_statistics`.
@_cdecl("fb_subscriber_get_statistics")
public func fbSubscriberGetStatistics(
    _ subscriber: OpaquePointer?,
    _ statistics: UnsafeMutablePointer<fb_subscriber_statistics>?,
    _ error: UnsafeMutablePointer<fb_error>?
) -> fb_status {
    unsafe boundary(error) { () throws(ABIError) in
        let function = "fb_subscriber_get_statistics"
        guard let subscriber = unsafe subscriber else { throw .null("subscriber", in: function) }
        guard let statistics = unsafe statistics else { throw .null("statistics", in: function) }
        let counters = unsafe Handle.borrow(subscriber, as: SubscriberHandle.self).subscriber.statistics
        unsafe statistics.pointee = fb_subscriber_statistics(
            delivered: UInt64(clamping: counters.delivered),
            dropped_frame_was_late: UInt64(clamping: counters.dropped[.frameWasLate, default: 0]),
            dropped_out_of_buffers: UInt64(clamping: counters.dropped[.outOfBuffers, default: 0]),
            dropped_discontinuity: UInt64(clamping: counters.dropped[.discontinuity, default: 0]),
            held_now: UInt64(clamping: counters.heldNow),
            queue_depth: UInt64(clamping: counters.queueDepth),
            bytes_delivered: UInt64(clamping: counters.bytesDelivered),
            latency_count: UInt64(clamping: counters.latency.count),
            latency_p50_ns: counters.latency.p50,
            latency_p99_ns: counters.latency.p99,
            latency_p999_ns: counters.latency.p999,
            latency_max_ns: counters.latency.maximum
        )
    }
}

// MARK: Frames

/// `fb_frame_get_info`.
@_cdecl("fb_frame_get_info")
public func fbFrameGetInfo(
    _ frame: OpaquePointer?,
    _ info: UnsafeMutablePointer<fb_frame_info>?,
    _ error: UnsafeMutablePointer<fb_error>?
) -> fb_status {
    unsafe boundary(error) { () throws(ABIError) in
        guard let frame = unsafe frame else { throw .null("frame", in: "fb_frame_get_info") }
        guard let info = unsafe info else { throw .null("info", in: "fb_frame_get_info") }
        unsafe info.pointee = Handle.borrow(frame, as: FrameHandle.self).info
    }
}

/// `fb_frame_dup_fd`: -1 on failure; a surface held by several descriptors (a memfd or DMA-BUF per plane) is
/// `FB_ERROR_FORMAT_MISMATCH`, for `fb_frame_dup_fds`.
@_cdecl("fb_frame_dup_fd")
public func fbFrameDupFD(_ frame: OpaquePointer?, _ error: UnsafeMutablePointer<fb_error>?) -> Int32 {
    var descriptor: Int32 = -1
    _ = unsafe boundary(error) { () throws(ABIError) in
        let function = "fb_frame_dup_fd"
        guard let frame = unsafe frame else { throw .null("frame", in: function) }
        let surface = unsafe Handle.borrow(frame, as: FrameHandle.self).buffer.surface
        // Checked before anything is duplicated; a per-plane surface is legal publisher input (PROTOCOL.md §5.4).
        guard surface.descriptorCount == 1 else {
            throw ABIError(
                .formatMismatch,
                "\(function): the surface is held by \(surface.descriptorCount) descriptors (one per plane); "
                    + "use fb_frame_dup_fds"
            )
        }
        let descriptors = try exportDescriptors(of: surface, in: function).descriptors
        guard descriptors.count == 1 else {
            Syscall.closeEach(descriptors)
            throw ABIError(.internal, "\(function): \(descriptors.count) descriptors exported")
        }
        descriptor = descriptors[0].rawValue
    }
    return descriptor
}

/// `fb_frame_dup_fds`: every plane's descriptor, offset and stride, and the buffer's kind and modifier.
@_cdecl("fb_frame_dup_fds")
public func fbFrameDupFDs(
    _ frame: OpaquePointer?,
    _ fds: UnsafeMutablePointer<fb_frame_fds>?,
    _ error: UnsafeMutablePointer<fb_error>?
) -> fb_status {
    unsafe boundary(error) { () throws(ABIError) in
        let function = "fb_frame_dup_fds"
        guard let frame = unsafe frame else { throw .null("frame", in: function) }
        guard let fds = unsafe fds else { throw .null("fds", in: function) }
        let surface = unsafe Handle.borrow(frame, as: FrameHandle.self).buffer.surface
        let exported = try exportDescriptors(of: surface, in: function)
        // The handle's descriptors are ours to close; each entry gets its own duplicate, so the caller's rule is
        // simply "close every planes[i].fd".
        defer { Syscall.closeEach(exported.descriptors) }
        let layout = exported.layout
        // One entry per plane; an opaque (compressed) surface is one entry for its bytes from offset 0.
        let entries: [(descriptor: Int, offset: Int, bytesPerRow: Int)] =
            layout.planes.isEmpty
            ? [(0, 0, 0)]
            : zip(layout.planes, exported.planeDescriptorIndices).map { ($1, $0.offset, $0.bytesPerRow) }
        guard entries.count <= Int(FB_MAX_PLANES),
            entries.allSatisfy({ $0.descriptor >= 0 && $0.descriptor < exported.descriptors.count })
        else {
            throw ABIError(
                .internal,
                "\(function): \(entries.count) planes over \(exported.descriptors.count) descriptors"
            )
        }
        var result = fb_frame_fds()
        var planes: [fb_frame_plane_fd] = []
        var duplicated: [FileDescriptor] = []
        for entry in entries {
            switch Syscall.duplicate(exported.descriptors[entry.descriptor]) {
            case .success(let descriptor): duplicated.append(descriptor)
            case .failure(let errno):
                Syscall.closeEach(duplicated)
                throw ABIError(.systemCall, "\(function): fcntl(F_DUPFD_CLOEXEC)", systemErrno: errno.rawValue)
            }
            planes.append(
                fb_frame_plane_fd(
                    fd: duplicated[duplicated.count - 1].rawValue,
                    reserved: 0,
                    offset: UInt64(clamping: entry.offset),
                    bytes_per_row: UInt64(clamping: entry.bytesPerRow),
                    size: UInt64(clamping: exported.byteCounts[entry.descriptor])
                )
            )
        }
        result.count = UInt32(planes.count)
        switch exported.backing {
        case .memfd:
            result.is_dma_buf = 0
            result.modifier = 0  // DRM_FORMAT_MOD_LINEAR: plain rows
        case .dmaBuf(let modifier):
            result.is_dma_buf = 1
            result.modifier = modifier
        }
        unsafe withUnsafeMutableBytes(of: &result.planes) { raw in
            let slots = unsafe raw.bindMemory(to: fb_frame_plane_fd.self)
            for index in 0..<slots.count {
                unsafe slots[index] =
                    index < planes.count
                    ? planes[index]
                    : fb_frame_plane_fd(
                        fd: -1,
                        reserved: 0,
                        offset: 0,
                        bytes_per_row: 0,
                        size: 0
                    )
            }
        }
        unsafe fds.pointee = result
    }
}

/// A surface's handle taken apart: descriptors the caller owns (read-only reopens of memfds, duplicates of
/// DMA-BUFs) and what locates the planes in them.
private func exportDescriptors(
    of surface: Surface,
    in function: String
) throws(ABIError) -> (
    descriptors: [FileDescriptor], layout: SurfaceLayout, planeDescriptorIndices: [Int], byteCounts: [Int],
    backing: Surface.Backing
) {
    let handle: SurfaceHandle
    do { handle = try surface.makeHandle() } catch {
        let status: ABIStatus = error.code == .systemCall ? .systemCall : .formatMismatch
        throw ABIError(status, "\(function): \(error)", systemErrno: error.errno?.rawValue ?? 0)
    }
    let layout = handle.layout
    let indices = handle.planeDescriptorIndices
    let byteCounts = handle.descriptorByteCounts
    let backing = handle.backing
    let descriptors = handle.takeDescriptors()
    guard byteCounts.count == descriptors.count else {
        Syscall.closeEach(descriptors)
        throw ABIError(.internal, "\(function): \(byteCounts.count) sizes for \(descriptors.count) descriptors")
    }
    return (descriptors, layout, indices, byteCounts, backing)
}

/// `fb_frame_release`.
@_cdecl("fb_frame_release")
public func fbFrameRelease(_ frame: OpaquePointer?) {
    guard let frame = unsafe frame else { return }
    unsafe Handle.free(frame, as: FrameHandle.self)
}
