import CFrameBusABI
import FrameBus
import FrameBusRecording
import Glibc

// The recorder part of the C ABI; include/framebus.h documents each function.

/// The longest output path accepted (PATH_MAX with its NUL).
private let maximumOutputPathLength = 4095

/// `fb_recorder_options_init`.
@_cdecl("fb_recorder_options_init")
public func fbRecorderOptionsInit(_ options: UnsafeMutablePointer<fb_recorder_options>?) {
    guard let options = unsafe options else { return }
    // Every default is 0 (or NULL): base formats, O_DIRECT, 256 MiB backlog, queue 16, 1 s checkpoints, 5 s wait.
    unsafe options.pointee = fb_recorder_options()
}

/// `fb_recorder_create`.
@_cdecl("fb_recorder_create")
public func fbRecorderCreate(
    _ options: UnsafePointer<fb_recorder_options>?,
    _ outRecorder: UnsafeMutablePointer<OpaquePointer?>?,
    _ error: UnsafeMutablePointer<fb_error>?
) -> fb_status {
    unsafe boundary(error) { () throws(ABIError) in
        let function = "fb_recorder_create"
        guard let outRecorder = unsafe outRecorder else { throw .null("out_recorder", in: function) }
        guard let pointer = unsafe options else { throw .null("options", in: function) }
        // One copy of the caller's struct, its strings copied out and every field validated before it bounds anything.
        let copy = unsafe pointer.pointee
        let options = try unsafe RecorderOptions(copy, function)
        let configuration = try options.configuration(function)
        let recorder: Recorder
        do throws(RecordingError) {
            recorder = try Recorder(configuration: configuration)
        } catch {
            throw ABIError(error, in: function)
        }
        unsafe outRecorder.pointee = Handle.make(recorder)
    }
}

/// The caller's options, copied out of its struct (which holds pointers) into plain values.
private struct RecorderOptions {
    var path: String
    var output: String
    var compressed: UInt32
    var buffered: UInt32
    var backlogBytes: UInt64
    var queueDepth: UInt32
    var checkpointMilliseconds: UInt32
    var connectTimeoutMilliseconds: UInt32
    var writesInFlight: UInt32
    var reservedAreZero: Bool

    init(_ options: fb_recorder_options, _ function: String) throws(ABIError) {
        path = try unsafe boundedString(options.path, limit: maximumSocketPathLength, "\(function): path")
        output = try unsafe boundedString(
            options.output_path,
            limit: maximumOutputPathLength,
            "\(function): output_path"
        )
        compressed = unsafe options.compressed
        buffered = unsafe options.buffered
        backlogBytes = unsafe options.backlog_bytes
        queueDepth = unsafe options.queue_depth
        checkpointMilliseconds = unsafe options.checkpoint_ms
        connectTimeoutMilliseconds = unsafe options.connect_timeout_ms
        writesInFlight = unsafe options.writes_in_flight
        reservedAreZero = unsafe withUnsafeBytes(of: options.reserved) { unsafe $0.allSatisfy { $0 == 0 } }
    }

    /// The recorder's configuration; every field checked against its documented range.
    func configuration(_ function: String) throws(ABIError) -> Recorder.Configuration {
        guard !path.isEmpty, !output.isEmpty else { throw ABIError(.invalidArgument, "\(function): an empty path") }
        guard reservedAreZero else { throw ABIError(.invalidArgument, "\(function): a reserved field is not 0") }
        guard compressed <= 1, buffered <= 1 else {
            throw ABIError(.invalidArgument, "\(function): compressed and buffered are 0 or 1")
        }
        var configuration = Recorder.Configuration(
            path: path,
            outputPath: output,
            logger: LogRoute.logger(label: "framebus.recorder")
        )
        configuration.recordsCompressed = compressed == 1
        configuration.usesDirectIO = buffered == 0
        if backlogBytes != 0 {
            guard backlogBytes >= 1 << 20, backlogBytes <= 1 << 40 else {
                throw ABIError(.invalidArgument, "\(function): backlog_bytes \(backlogBytes) is not 1 MiB…1 TiB")
            }
            configuration.backlogByteCount = Int(backlogBytes)
        }
        if queueDepth != 0 {
            guard queueDepth <= 64 else {
                throw ABIError(.invalidArgument, "\(function): queue_depth \(queueDepth) is not 1…64")
            }
            configuration.queueDepth = Int(queueDepth)
        }
        if checkpointMilliseconds != 0 {
            guard (10...1000).contains(checkpointMilliseconds) else {
                throw ABIError(
                    .invalidArgument,
                    "\(function): checkpoint_ms \(checkpointMilliseconds) is not 10…1000"
                )
            }
            configuration.checkpointInterval = .milliseconds(Int64(checkpointMilliseconds))
        }
        if connectTimeoutMilliseconds != 0 {
            configuration.connectTimeout = .milliseconds(Int64(connectTimeoutMilliseconds))
        }
        if writesInFlight != 0 {
            guard writesInFlight <= 16 else {
                throw ABIError(.invalidArgument, "\(function): writes_in_flight \(writesInFlight) is not 1…16")
            }
            configuration.writesInFlight = Int(writesInFlight)
        }
        return configuration
    }
}

/// `fb_recorder_get_status`.
@_cdecl("fb_recorder_get_status")
public func fbRecorderGetStatus(
    _ recorder: OpaquePointer?,
    _ status: UnsafeMutablePointer<fb_recorder_status>?,
    _ error: UnsafeMutablePointer<fb_error>?
) -> fb_status {
    unsafe boundary(error) { () throws(ABIError) in
        let function = "fb_recorder_get_status"
        guard let recorder = unsafe recorder else { throw .null("recorder", in: function) }
        guard let status = unsafe status else { throw .null("status", in: function) }
        let snapshot = unsafe Handle.borrow(recorder, as: Recorder.self).status
        unsafe status.pointee = cStatus(snapshot)
    }
}

/// `fb_recorder_wait`.
@_cdecl("fb_recorder_wait")
public func fbRecorderWait(
    _ recorder: OpaquePointer?,
    _ timeoutNanoseconds: Int64,
    _ status: UnsafeMutablePointer<fb_recorder_status>?,
    _ error: UnsafeMutablePointer<fb_error>?
) -> fb_status {
    unsafe boundary(error) { () throws(ABIError) in
        let function = "fb_recorder_wait"
        guard let recorder = unsafe recorder else { throw .null("recorder", in: function) }
        let handle = unsafe Handle.borrow(recorder, as: Recorder.self)
        // Negative: no limit (a century stands for it).
        let limit: Duration = timeoutNanoseconds < 0 ? .seconds(3_153_600_000) : .nanoseconds(timeoutNanoseconds)
        let ended = handle.waitForEnd(timeout: limit)
        if let status = unsafe status { unsafe status.pointee = cStatus(handle.status) }
        guard ended else { throw ABIError(.timedOut, "\(function): the stream did not end in time") }
    }
}

/// `fb_recorder_stop`.
@_cdecl("fb_recorder_stop")
public func fbRecorderStop(
    _ recorder: OpaquePointer?,
    _ finalStatus: UnsafeMutablePointer<fb_recorder_status>?,
    _ error: UnsafeMutablePointer<fb_error>?
) -> fb_status {
    unsafe boundary(error) { () throws(ABIError) in
        guard let recorder = unsafe recorder else { throw .null("recorder", in: "fb_recorder_stop") }
        let final = unsafe Handle.borrow(recorder, as: Recorder.self).stop()
        if let finalStatus = unsafe finalStatus { unsafe finalStatus.pointee = cStatus(final) }
    }
}

/// `fb_recorder_destroy`.
@_cdecl("fb_recorder_destroy")
public func fbRecorderDestroy(_ recorder: OpaquePointer?) {
    guard let recorder = unsafe recorder else { return }
    unsafe Handle.borrow(recorder, as: Recorder.self).stop()
    unsafe Handle.free(recorder, as: Recorder.self)
}

/// A recorder status as the C struct.
private func cStatus(_ status: RecorderStatus) -> fb_recorder_status {
    var result = fb_recorder_status()
    result.frames_accepted = status.framesAccepted
    result.frames_written = status.framesWritten
    result.bytes_written = UInt64(clamping: status.bytesWritten)
    result.bytes_durable = UInt64(clamping: status.bytesDurable)
    result.dropped_frames = status.droppedFrames
    unsafe withUnsafeMutableBytes(of: &result.drops) { raw in
        let drops = unsafe raw.bindMemory(to: UInt64.self)
        for (reason, count) in status.drops where Int(reason.rawValue) < drops.count {
            unsafe drops[Int(reason.rawValue)] = count
        }
    }
    result.backlog_bytes = UInt64(clamping: status.backlogBytes)
    result.backlog_capacity = UInt64(clamping: status.backlogCapacity)
    result.backlog_peak_bytes = UInt64(clamping: status.backlogPeakBytes)
    result.remaining_bytes = UInt64(clamping: status.remainingBytes)
    result.remaining_seconds = status.remainingSeconds ?? -1
    result.bytes_per_second = status.bytesPerSecond
    result.write_latency_p50_us = status.writeLatencyP50Microseconds
    result.write_latency_p99_us = status.writeLatencyP99Microseconds
    var busy: UInt32 = 0
    for reason in status.busyReasons {
        let bit =
            switch reason {
            case .writeStall: UInt32(FB_RECORDER_BUSY_WRITE_STALL)
            case .syncing: UInt32(FB_RECORDER_BUSY_SYNCING)
            case .reserving: UInt32(FB_RECORDER_BUSY_RESERVING)
            case .backlogFilling: UInt32(FB_RECORDER_BUSY_BACKLOG_FILLING)
            case .bufferedWrites: UInt32(FB_RECORDER_BUSY_BUFFERED_WRITES)
            }
        busy |= bit
    }
    result.busy_reasons = busy
    result.uses_direct_io = status.usesDirectIO ? 1 : 0
    result.stream_ended = status.streamEnd != nil ? 1 : 0
    result.closed = status.isClosed ? 1 : 0
    if let failure = status.failure {
        let error = ABIError(failure, in: "recorder")
        result.failure = fb_status(error.status.rawValue)
        result.failure_errno = error.systemErrno
    }
    return result
}

extension ABIError {
    /// Maps a recording error. Disk full and I/O errors are failed system calls: their errno (`ENOSPC`, `EIO`, …)
    /// says which.
    init(_ error: RecordingError, in function: String) {
        let status: ABIStatus =
            switch error.code {
            case .systemCall, .diskFull, .ioError: .systemCall
            case .invalidArgument: .invalidArgument
            case .subscriber: .refused
            case .notARecording, .malformed, .truncated: .corruptData
            case .unsupported: .formatMismatch
            case .closed: .closed
            default: .internal
            }
        var errno = error.errno?.rawValue ?? 0
        if errno == 0, error.code == .diskFull { errno = ENOSPC }
        if errno == 0, error.code == .ioError { errno = EIO }
        self.init(status, "\(function): \(error)", systemErrno: errno)
    }
}
