import CFrameBusABI
import FrameBus

// The publisher half of the C ABI; include/framebus.h documents each function.

/// `fb_publisher_options_init`.
@_cdecl("fb_publisher_options_init")
public func fbPublisherOptionsInit(_ options: UnsafeMutablePointer<fb_publisher_options>?) {
    guard let options = unsafe options else { return }
    var defaults = unsafe fb_publisher_options()
    unsafe defaults.minimum_buffer_count = 4
    unsafe defaults.maximum_buffer_count = 18
    unsafe defaults.maximum_subscribers = 4
    unsafe defaults.extra_held_frames_per_subscriber = 4
    unsafe defaults.socket_mode = 0o600
    unsafe options.pointee = defaults
}

/// `fb_publisher_create`.
@_cdecl("fb_publisher_create")
public func fbPublisherCreate(
    _ options: UnsafePointer<fb_publisher_options>?,
    _ outPublisher: UnsafeMutablePointer<OpaquePointer?>?,
    _ error: UnsafeMutablePointer<fb_error>?
) -> fb_status {
    unsafe boundary(error) { () throws(ABIError) in
        let function = "fb_publisher_create"
        guard let options = unsafe options?.pointee else { throw .null("options", in: function) }
        guard let outPublisher = unsafe outPublisher else { throw .null("out_publisher", in: function) }
        let path = try unsafe boundedString(options.path, limit: maximumSocketPathLength, "\(function): path")
        guard let format = unsafe try? PixelFormat(fourCC: options.format), !format.isCompressed else {
            throw ABIError(
                .formatMismatch,
                unsafe "\(function): format \(fourCCName(options.format)) is not a base format"
            )
        }
        let servable = PublisherHandle.servable(by: format)
        let offered: [PixelFormat]
        if unsafe options.offered_format_count == 0 {
            offered = servable
        } else {
            offered = try unsafe formatList(
                options.offered_formats,
                count: options.offered_format_count,
                limit: 16,
                "\(function): offered_formats"
            )
            if let other = offered.first(where: { !servable.contains($0) }) {
                throw ABIError(.formatMismatch, "\(function): a pool of \(format) cannot serve \(other)")
            }
        }
        let maximumBuffers = unsafe options.maximum_buffer_count
        guard maximumBuffers >= 1, maximumBuffers <= 1024, unsafe options.minimum_buffer_count <= maximumBuffers else {
            throw ABIError(
                .invalidArgument,
                unsafe "\(function): buffer counts \(options.minimum_buffer_count)...\(maximumBuffers) (need 1...1024)"
            )
        }
        guard unsafe options.maximum_subscribers >= 1, unsafe options.maximum_subscribers <= 1024,
            unsafe options.extra_held_frames_per_subscriber <= 1024, unsafe options.socket_mode <= 0o777
        else {
            throw ABIError(
                .invalidArgument,
                "\(function): maximum_subscribers 1...1024, extra_held_frames_per_subscriber up to 1024 and "
                    + "socket_mode up to 0777 are allowed"
            )
        }
        let effort: SurfaceCodec.Effort
        switch unsafe options.compression_effort {
        case UInt32(FB_CODEC_EFFORT_FAST): effort = .fast
        case UInt32(FB_CODEC_EFFORT_BEST): effort = .best
        case let other:
            throw ABIError(
                .invalidArgument,
                "\(function): compression_effort \(other) is neither FB_CODEC_EFFORT_FAST (0) nor "
                    + "FB_CODEC_EFFORT_BEST (1)"
            )
        }
        try unsafe checkCallerSize(Int(options.width), Int(options.height), fit: format, function)
        let pool: PixelBufferPool
        do {
            pool = unsafe try PixelBufferPool(
                attributes: .init(
                    width: Int(options.width),
                    height: Int(options.height),
                    pixelFormat: format,
                    minimumBufferCount: Int(options.minimum_buffer_count),
                    allocationThreshold: Int(maximumBuffers)
                )
            )
        } catch {
            throw ABIError(any: error)
        }
        var configuration = Publisher.Configuration(path: path, formats: offered)
        configuration.logger = LogRoute.logger(label: "framebus.publisher")
        configuration.socketMode = unsafe options.socket_mode
        configuration.maximumSubscribers = unsafe Int(options.maximum_subscribers)
        configuration.extraHeldFramesPerSubscriber = unsafe Int(options.extra_held_frames_per_subscriber)
        configuration.compressionEffort = effort
        let publisher: Publisher
        do { publisher = try Publisher(configuration: configuration) } catch { throw ABIError(any: error) }
        // The publisher learns the pool's capacity (its held-frame budget) from the first buffer it hands out; take one
        // now, so that the limits granted to the first subscribers already count it.
        _ = try? publisher.makePixelBuffer(from: pool)
        unsafe outPublisher.pointee = Handle.make(PublisherHandle(publisher: publisher, pool: pool))
    }
}

/// `fb_publisher_destroy`.
@_cdecl("fb_publisher_destroy")
public func fbPublisherDestroy(_ publisher: OpaquePointer?) {
    guard let publisher = unsafe publisher else { return }
    unsafe Handle.borrow(publisher, as: PublisherHandle.self).publisher.stop()
    unsafe Handle.free(publisher, as: PublisherHandle.self)
}

/// `fb_publisher_acquire_buffer`.
@_cdecl("fb_publisher_acquire_buffer")
public func fbPublisherAcquireBuffer(
    _ publisher: OpaquePointer?,
    _ outBuffer: UnsafeMutablePointer<OpaquePointer?>?,
    _ error: UnsafeMutablePointer<fb_error>?
) -> fb_status {
    unsafe acquireBuffer(publisher, timeoutNanoseconds: 0, outBuffer, error, "fb_publisher_acquire_buffer")
}

/// `fb_publisher_acquire_buffer_timeout`.
@_cdecl("fb_publisher_acquire_buffer_timeout")
public func fbPublisherAcquireBufferTimeout(
    _ publisher: OpaquePointer?,
    _ timeoutNanoseconds: Int64,
    _ outBuffer: UnsafeMutablePointer<OpaquePointer?>?,
    _ error: UnsafeMutablePointer<fb_error>?
) -> fb_status {
    unsafe acquireBuffer(
        publisher,
        timeoutNanoseconds: timeoutNanoseconds,
        outBuffer,
        error,
        "fb_publisher_acquire_buffer_timeout"
    )
}

private func acquireBuffer(
    _ publisher: OpaquePointer?,
    timeoutNanoseconds: Int64,
    _ outBuffer: UnsafeMutablePointer<OpaquePointer?>?,
    _ error: UnsafeMutablePointer<fb_error>?,
    _ function: String
) -> fb_status {
    unsafe boundary(error) { () throws(ABIError) in
        guard let publisher = unsafe publisher else { throw .null("publisher", in: function) }
        guard let outBuffer = unsafe outBuffer else { throw .null("out_buffer", in: function) }
        let handle = unsafe Handle.borrow(publisher, as: PublisherHandle.self)
        let buffer = try handle.acquire(timeoutNanoseconds: timeoutNanoseconds).get()
        unsafe outBuffer.pointee = Handle.make(try BufferHandle(publisher: handle.publisher, buffer: buffer))
    }
}

/// `fb_buffer_get_info`.
@_cdecl("fb_buffer_get_info")
public func fbBufferGetInfo(
    _ buffer: OpaquePointer?,
    _ info: UnsafeMutablePointer<fb_buffer_info>?,
    _ error: UnsafeMutablePointer<fb_error>?
) -> fb_status {
    unsafe boundary(error) { () throws(ABIError) in
        guard let buffer = unsafe buffer else { throw .null("buffer", in: "fb_buffer_get_info") }
        guard let info = unsafe info else { throw .null("info", in: "fb_buffer_get_info") }
        unsafe info.pointee = Handle.borrow(buffer, as: BufferHandle.self).info
    }
}

/// `fb_buffer_publish`: frees the buffer handle whatever happens.
@_cdecl("fb_buffer_publish")
public func fbBufferPublish(
    _ buffer: OpaquePointer?,
    _ info: UnsafePointer<fb_publish_info>?,
    _ outSequence: UnsafeMutablePointer<UInt64>?,
    _ error: UnsafeMutablePointer<fb_error>?
) -> fb_status {
    unsafe boundary(error) { () throws(ABIError) in
        let function = "fb_buffer_publish"
        guard let buffer = unsafe buffer else { throw .null("buffer", in: function) }
        let handle = unsafe Handle.borrow(buffer, as: BufferHandle.self)
        defer { unsafe Handle.free(buffer, as: BufferHandle.self) }
        handle.unlock()
        var timing = SampleTimingInfo.invalid
        var discontinuity = false
        if let info = unsafe info?.pointee {
            timing.presentationTimeStamp = try MediaTime(info.presentation_time, "\(function): presentation_time")
            timing.duration = try MediaTime(info.duration, "\(function): duration")
            guard info.flags & ~UInt32(FB_PUBLISH_FLAG_DISCONTINUITY) == 0 else {
                throw ABIError(.invalidArgument, "\(function): unknown flags \(info.flags)")
            }
            discontinuity = info.flags & UInt32(FB_PUBLISH_FLAG_DISCONTINUITY) != 0
            var attachments = handle.buffer.attachments
            try ColorimetryCodes.apply(
                primaries: info.colorimetry.primaries,
                transfer: info.colorimetry.transfer,
                matrix: info.colorimetry.matrix,
                chromaLocation: info.colorimetry.chroma_location,
                to: &attachments
            )
            handle.buffer.attachments = attachments
        }
        let sequence: UInt64
        do {
            sequence = try handle.publisher.publish(handle.buffer, timing: timing, discontinuity: discontinuity)
        } catch {
            throw ABIError(any: error)
        }
        if let outSequence = unsafe outSequence { unsafe outSequence.pointee = sequence }
    }
}

/// `fb_buffer_discard`.
@_cdecl("fb_buffer_discard")
public func fbBufferDiscard(_ buffer: OpaquePointer?) {
    guard let buffer = unsafe buffer else { return }
    unsafe Handle.free(buffer, as: BufferHandle.self)
}

/// `fb_publisher_report_drops`.
@_cdecl("fb_publisher_report_drops")
public func fbPublisherReportDrops(
    _ publisher: OpaquePointer?,
    _ reason: UInt32,
    _ count: UInt64,
    _ outFirst: UnsafeMutablePointer<UInt64>?,
    _ outLast: UnsafeMutablePointer<UInt64>?,
    _ error: UnsafeMutablePointer<fb_error>?
) -> fb_status {
    unsafe boundary(error) { () throws(ABIError) in
        let function = "fb_publisher_report_drops"
        guard let publisher = unsafe publisher else { throw .null("publisher", in: function) }
        // The C header names reasons 1…3; workFellBehind (4) is the publisher's own, never the producer's to report.
        guard let dropReason = UInt8(exactly: reason).flatMap(DroppedFrameReason.init(rawValue:)),
            dropReason != .workFellBehind
        else {
            throw ABIError(.invalidArgument, "\(function): unknown reason \(reason)")
        }
        guard count >= 1, count <= 1 << 32 else {
            throw ABIError(.invalidArgument, "\(function): count \(count) is not in 1...2^32")
        }
        let handle = unsafe Handle.borrow(publisher, as: PublisherHandle.self)
        guard let range = handle.publisher.reportDroppedFrames(reason: dropReason, count: Int(count)) else {
            throw ABIError(.closed, "\(function): the publisher is stopped")
        }
        if let outFirst = unsafe outFirst { unsafe outFirst.pointee = range.lowerBound }
        if let outLast = unsafe outLast { unsafe outLast.pointee = range.upperBound }
    }
}

/// `fb_publisher_get_statistics`.
@_cdecl("fb_publisher_get_statistics")
public func fbPublisherGetStatistics(
    _ publisher: OpaquePointer?,
    _ statistics: UnsafeMutablePointer<fb_publisher_statistics>?,
    _ error: UnsafeMutablePointer<fb_error>?
) -> fb_status {
    unsafe boundary(error) { () throws(ABIError) in
        let function = "fb_publisher_get_statistics"
        guard let publisher = unsafe publisher else { throw .null("publisher", in: function) }
        guard let statistics = unsafe statistics else { throw .null("statistics", in: function) }
        let handle = unsafe Handle.borrow(publisher, as: PublisherHandle.self)
        let counters = handle.publisher.statistics
        unsafe statistics.pointee = fb_publisher_statistics(
            published: UInt64(clamping: counters.published),
            dropped_at_source_frame_was_late: UInt64(clamping: counters.droppedAtSource[.frameWasLate, default: 0]),
            dropped_at_source_out_of_buffers: UInt64(clamping: counters.droppedAtSource[.outOfBuffers, default: 0]),
            dropped_at_source_discontinuity: UInt64(clamping: counters.droppedAtSource[.discontinuity, default: 0]),
            delivered: UInt64(clamping: counters.total.delivered),
            dropped_frame_was_late: UInt64(clamping: counters.total.dropped[.frameWasLate, default: 0]),
            dropped_out_of_buffers: UInt64(clamping: counters.total.dropped[.outOfBuffers, default: 0]),
            dropped_discontinuity: UInt64(clamping: counters.total.dropped[.discontinuity, default: 0]),
            held_now: UInt64(clamping: counters.total.heldNow),
            subscriber_count: UInt64(clamping: handle.publisher.subscriberCount),
            conversions: UInt64(clamping: counters.conversions)
        )
    }
}
