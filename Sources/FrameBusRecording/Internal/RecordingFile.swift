import Surfaces
import Synchronization
import SystemPackage

/// The recording's file descriptor and the rules for writing it: `O_DIRECT` when the file system takes it (else
/// buffered writes whose pages are pushed out and dropped at each checkpoint), space reserved ahead with
/// `fallocate(FALLOC_FL_KEEP_SIZE)`, and `fdatasync` at checkpoints. Reservations, checkpoints and the close are
/// the I/O thread's alone (or the recorder's before that thread starts / after it ended); the write workers call
/// ``write(_:at:)`` and ``startWriteback(from:upTo:)`` at the same time, at disjoint offsets: the direct-I/O mode
/// they share is behind a lock.
final class RecordingFile: @unchecked Sendable {
    // @unchecked: the reservation state is the I/O thread's alone (handed over by starting and joining it); the
    // direct-I/O mode, which the write workers share, is in a Mutex.
    let descriptor: Int32
    private let mode: Mutex<(isDirect: Bool, refusal: String?)>
    /// Whether writes bypass the page cache.
    var isDirect: Bool { mode.withLock { $0.isDirect } }
    /// Why writes are buffered, when `O_DIRECT` was asked for and refused.
    var directRefusal: String? { mode.withLock { $0.refusal } }
    /// The end of the space reserved so far (bytes from the start of the file).
    private(set) var reservedEnd: Int64 = 0
    /// Why nothing is reserved ahead, when the file system cannot (`EOPNOTSUPP`).
    private(set) var reservationRefusal: String?
    /// Bytes after `reservedEnd` that later writes may still need (the last reservation that failed, or nil).
    private(set) var reservationFailure: Errno?

    init(path: String, direct: Bool) throws(RecordingError) {
        var refusal: String?
        if direct {
            switch Syscall.openRecording(path, direct: true) {
            case .success(let fd):
                descriptor = fd
                mode = Mutex((true, nil))
                return
            case .failure(let error) where error == .invalidArgument:
                // tmpfs before Linux 6.6 and some FUSE file systems refuse O_DIRECT at open.
                refusal = "open with O_DIRECT: \(error)"
            case .failure(let error):
                throw RecordingError(Self.code(for: error), "open(\(path))", errno: error)
            }
        }
        switch Syscall.openRecording(path, direct: false) {
        case .success(let fd):
            descriptor = fd
            mode = Mutex((false, refusal))
        case .failure(let error):
            throw RecordingError(Self.code(for: error), "open(\(path))", errno: error)
        }
    }

    deinit { Syscall.closeFile(descriptor) }

    /// Which recording error a failed write, reservation or sync is: out of space, or an I/O error.
    static func code(for error: Errno) -> RecordingError.Code {
        switch error {
        case .noSpace, .diskQuotaExceeded, .fileTooLarge: .diskFull
        case .invalidArgument: .invalidArgument
        default: .ioError
        }
    }

    /// Writes `bytes` at `offset`. A direct write the file system refuses (`EINVAL`: a file system that accepts
    /// the flag at open but not the I/O) turns `O_DIRECT` off for the rest of the recording and is retried buffered.
    /// Safe to call from several threads at disjoint offsets.
    func write(_ bytes: UnsafeRawBufferPointer, at offset: Int64) -> Result<Void, Errno> {
        let result = unsafe Syscall.writeAll(descriptor, bytes, at: offset)
        if case .failure(.invalidArgument) = result {
            let turnedOff = mode.withLock { mode -> Result<Void, Errno> in
                // Already off: another writer turned it off meanwhile (a buffered EINVAL is retried once, harmlessly).
                guard mode.isDirect else { return .success(()) }
                if case .failure(let error) = Syscall.setDirect(descriptor, false) { return .failure(error) }
                mode = (false, "write with O_DIRECT: \(Errno.invalidArgument)")
                return .success(())
            }
            if case .failure(let error) = turnedOff { return .failure(error) }
            return unsafe Syscall.writeAll(descriptor, bytes, at: offset)
        }
        return result
    }

    /// Makes sure the space up to `end` is reserved, reserving `step` bytes at a time. A file system without
    /// `fallocate` is remembered and not asked again; running out of space is returned (the caller decides).
    func reserve(upTo end: Int64, step: Int64) -> Result<Void, Errno> {
        guard reservationRefusal == nil, end > reservedEnd else { return .success(()) }
        var target = reservedEnd
        while target < end { target += step }
        switch Syscall.reserve(descriptor, offset: reservedEnd, length: target - reservedEnd) {
        case .success:
            reservedEnd = target
            return .success(())
        case .failure(let error) where error == .notSupported || error == .notSupportedOnSocket:
            reservationRefusal = "fallocate: \(error)"
            return .success(())
        case .failure(let error) where error == .noSpace && target > end:
            // Not a whole step: take what is needed, if that much is left.
            if case .success = Syscall.reserve(descriptor, offset: reservedEnd, length: end - reservedEnd) {
                reservedEnd = end
                reservationFailure = error
                return .success(())
            }
            reservationFailure = error
            return .failure(error)
        case .failure(let error):
            reservationFailure = error
            return .failure(error)
        }
    }

    /// Whether reservations are made (false where `fallocate` is not supported).
    var reserves: Bool { reservationRefusal == nil }

    /// A checkpoint: everything written up to `end` reaches the disk. Buffered, the range's writeback is started
    /// and waited for and its pages dropped from the cache, so a recording never fills the page cache.
    func checkpoint(from start: Int64, upTo end: Int64) -> Result<Void, Errno> {
        if !isDirect, end > start {
            if case .failure(let error) = Syscall.syncRange(descriptor, offset: start, length: end - start, wait: true)
            {
                return .failure(error)
            }
        }
        if case .failure(let error) = Syscall.syncData(descriptor) { return .failure(error) }
        if !isDirect, end > start { _ = Syscall.dropCache(descriptor, offset: start, length: end - start) }
        return .success(())
    }

    /// Starts writeback of a buffered range without waiting (between checkpoints, so the cache drains steadily).
    func startWriteback(from start: Int64, upTo end: Int64) {
        guard !isDirect, end > start else { return }
        _ = Syscall.syncRange(descriptor, offset: start, length: end - start, wait: false)
    }

    /// Ends the file at `size` and gives back the space reserved past it.
    func finish(size: Int64) -> Result<Void, Errno> {
        // Truncating to the size the file already has may keep FALLOC_FL_KEEP_SIZE blocks; shrinking frees them.
        if case .failure(let error) = Syscall.truncate(descriptor, to: size + 1) { return .failure(error) }
        if case .failure(let error) = Syscall.truncate(descriptor, to: size) { return .failure(error) }
        return Syscall.syncData(descriptor)
    }

    /// Free space on the file system for us, plus what is reserved and not yet written past `written`.
    func remainingBytes(written: Int64) -> Int64 {
        let free = (try? Syscall.availableBytes(descriptor).get()) ?? 0
        return free.addingReportingOverflow(max(0, reservedEnd - written)).partialValue
    }
}

extension RecordingFile {
    /// Writes a block-aligned stretch of the ring.
    func write(from ring: AlignedRing, position: Int, count: Int) -> Result<Void, Errno> {
        unsafe ring.withBytes(at: position, count: count) { unsafe write($0, at: Int64(position)) }
    }

    /// Writes bytes built in memory (the header, the trailer): a multiple of 4096 bytes, at an aligned offset.
    func write(_ bytes: [UInt8], at offset: Int64) -> Result<Void, Errno> {
        guard let aligned = AlignedBytes(bytes) else { return .failure(.noMemory) }
        return unsafe aligned.withBytes { unsafe write($0, at: offset) }
    }
}
