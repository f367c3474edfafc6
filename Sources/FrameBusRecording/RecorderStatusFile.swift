import Foundation
import FrameBus
import Glibc
import Surfaces
import Synchronization

/// A recorder's status where other processes find it: `framebus top` shows, beside each subscriber that is a
/// recorder, its remaining capacity, backlog, busy reasons and drops.
///
/// The recorder publishes a small JSON file, `framebus-recorder-PID-N.json` in the runtime directory
/// (``SocketPath/runtimeDirectory()``, mode 0600), written whole and renamed into place at most once a second by
/// its I/O thread (and when it starts and stops), and removed when the recording is closed. A process is found by
/// the subscriber's process id the publisher reports; `N` tells apart recorders of one process, and the file names
/// the bus socket it records. The file is written by another process: ``read(path:allowedUserIDs:)`` takes at most
/// ``maximumByteCount`` bytes of a regular file owned by an allowed user, and every field is checked.
public struct RecorderStatusFile: Sendable, Equatable {
    /// The format's version (1).
    public var version = 1
    /// The recorder's process.
    public var processID: Int32 = 0
    /// The bus socket it records.
    public var socketPath = ""
    /// The recording's path.
    public var outputPath = ""
    /// When the file was written, seconds since 1970.
    public var time: Double = 0
    /// Frames and bytes written so far.
    public var framesWritten: UInt64 = 0
    public var bytesWritten: Int64 = 0
    /// Bytes per second over the last seconds.
    public var bytesPerSecond: Double = 0
    /// Space left: bytes, and seconds at the current rate (nil before the rate is known).
    public var remainingBytes: Int64 = 0
    public var remainingSeconds: Double?
    /// The backlog now, its size and its peak.
    public var backlogBytes: Int64 = 0
    public var backlogCapacity: Int64 = 0
    public var backlogPeakBytes: Int64 = 0
    /// Busy reasons (``RecorderBusyReason`` raw values; unknown ones from a newer writer are kept as text).
    public var busy: [String] = []
    /// Frames that did not reach the disk, by reason (``RecordingDropReason`` descriptions).
    public var drops: [String: UInt64] = [:]
    /// Whether writes bypass the page cache.
    public var direct = false
    /// Why the recording stopped writing, if it did.
    public var failure: String?

    /// The most bytes a status file may have.
    public static let maximumByteCount = 8192

    public init() {}

    /// The status of `status`, for the recorder of `processID` on `socketPath` writing `outputPath`.
    init(_ status: RecorderStatus, processID: Int32, socketPath: String, outputPath: String, time: Double) {
        self.processID = processID
        self.socketPath = socketPath
        self.outputPath = outputPath
        self.time = time
        framesWritten = status.framesWritten
        bytesWritten = status.bytesWritten
        bytesPerSecond = status.bytesPerSecond
        remainingBytes = status.remainingBytes
        remainingSeconds = status.remainingSeconds.flatMap { $0.isFinite ? $0 : nil }
        backlogBytes = Int64(status.backlogBytes)
        backlogCapacity = Int64(status.backlogCapacity)
        backlogPeakBytes = Int64(status.backlogPeakBytes)
        busy = status.busyReasons.map(\.rawValue).sorted()
        for (reason, count) in status.drops where count > 0 { drops[reason.description] = count }
        direct = status.usesDirectIO
        failure = status.failure.map { "\($0)" }
    }

    /// The file name's prefix for the recorders of `processID`: `framebus-recorder-PID-`.
    public static func namePrefix(processID: Int32) -> String { "framebus-recorder-\(processID)-" }

    /// The JSON text written.
    func encoded() -> Data {
        var object: [String: Any] = [
            "version": version, "pid": Int(processID), "socket": socketPath, "output": outputPath, "time": time,
            "framesWritten": framesWritten, "bytesWritten": bytesWritten, "bytesPerSecond": bytesPerSecond,
            "remainingBytes": remainingBytes, "backlogBytes": backlogBytes, "backlogCapacity": backlogCapacity,
            "backlogPeakBytes": backlogPeakBytes, "busy": busy, "drops": drops, "direct": direct,
        ]
        if let remainingSeconds { object["remainingSeconds"] = remainingSeconds }
        if let failure { object["failure"] = failure }
        return (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])) ?? Data()
    }

    /// Decodes a status file's bytes; nil if they are not one (every field checked: types, ranges, lengths).
    public static func decode(_ data: Data) -> RecorderStatusFile? {
        guard data.count <= maximumByteCount,
            let object = (try? JSONSerialization.jsonObject(with: data)) as? [String: Any],
            (object["version"] as? Int) == 1
        else { return nil }
        func count(_ key: String) -> Int64? {
            guard let number = object[key] as? NSNumber else { return nil }
            let value = number.doubleValue
            guard value.isFinite, value >= 0, value < 9e18 else { return nil }
            return number.int64Value
        }
        func real(_ key: String) -> Double? {
            guard let value = (object[key] as? NSNumber)?.doubleValue, value.isFinite, value >= 0, value < 1e18 else {
                return nil
            }
            return value
        }
        func text(_ key: String) -> String? {
            guard let value = object[key] as? String, value.utf8.count <= 4096 else { return nil }
            return value
        }
        var file = RecorderStatusFile()
        guard let pid = count("pid"), pid <= Int64(Int32.max), let socket = text("socket"), let output = text("output"),
            let time = real("time"), let frames = count("framesWritten"), let bytes = count("bytesWritten"),
            let rate = real("bytesPerSecond"), let remaining = count("remainingBytes"),
            let backlog = count("backlogBytes"), let capacity = count("backlogCapacity"),
            let peak = count("backlogPeakBytes"), let direct = object["direct"] as? Bool
        else { return nil }
        file.processID = Int32(pid)
        file.socketPath = socket
        file.outputPath = output
        file.time = time
        file.framesWritten = UInt64(frames)
        file.bytesWritten = bytes
        file.bytesPerSecond = rate
        file.remainingBytes = remaining
        file.remainingSeconds = real("remainingSeconds")
        file.backlogBytes = backlog
        file.backlogCapacity = capacity
        file.backlogPeakBytes = peak
        file.direct = direct
        file.failure = text("failure")
        if let busy = object["busy"] as? [Any] {
            file.busy = Array(busy.compactMap { $0 as? String }.filter { $0.utf8.count <= 64 }.prefix(16))
        }
        if let drops = object["drops"] as? [String: Any] {
            for (reason, value) in drops.prefix(32) where reason.utf8.count <= 64 {
                guard let number = value as? NSNumber, number.doubleValue.isFinite, number.doubleValue >= 0,
                    number.doubleValue < 1.8e19
                else { continue }
                file.drops[reason] = number.uint64Value
            }
        }
        return file
    }

    /// Reads the status file at `path`: a regular file (not followed through a symbolic link) owned by one of
    /// `allowedUserIDs`, at most ``maximumByteCount`` bytes; nil otherwise or if it does not decode.
    public static func read(path: String, allowedUserIDs: Set<UInt32>) -> RecorderStatusFile? {
        Syscall.readSmallFile(path, ownedBy: allowedUserIDs, atMost: maximumByteCount).flatMap(decode)
    }

    /// The status files of the recorders of `processID` in `directory` that record `socketPath`.
    public static func find(
        processID: Int32,
        socketPath: String,
        directory: String,
        allowedUserIDs: Set<UInt32>
    ) -> [RecorderStatusFile] {
        let prefix = namePrefix(processID: processID)
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        return names.filter { $0.hasPrefix(prefix) && $0.hasSuffix(".json") }.sorted().prefix(16).compactMap { name in
            guard let file = read(path: directory + "/" + name, allowedUserIDs: allowedUserIDs),
                file.processID == processID, file.socketPath == socketPath
            else { return nil }
            return file
        }
    }
}

/// Writes one recorder's status file (see ``RecorderStatusFile``): whole, to a temporary name, renamed into place.
final class RecorderStatusWriter: Sendable {
    let path: String
    private let socketPath: String
    private let outputPath: String
    private static let counter = Mutex(0)

    /// A writer for a file in `directory`, or nil if there is no directory.
    init?(directory: String?, socketPath: String, outputPath: String) {
        guard let directory, !directory.isEmpty else { return nil }
        let index = Self.counter.withLock { counter -> Int in
            counter += 1
            return counter
        }
        path = directory + "/" + RecorderStatusFile.namePrefix(processID: getpid()) + "\(index).json"
        self.socketPath = socketPath
        self.outputPath = outputPath
    }

    /// Writes `status`; failures are ignored (the status file is a window on the recorder, never its business).
    func write(_ status: RecorderStatus) {
        let file = RecorderStatusFile(
            status,
            processID: getpid(),
            socketPath: socketPath,
            outputPath: outputPath,
            time: Date().timeIntervalSince1970
        )
        Syscall.replaceFile(path, with: file.encoded())
    }

    /// Removes the file.
    func remove() {
        Syscall.removeFile(path)
        Syscall.removeFile(path + ".tmp")
    }
}
