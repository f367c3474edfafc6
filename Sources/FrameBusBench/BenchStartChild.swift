import Foundation
import FrameBus

#if canImport(Glibc)
import Glibc
#endif

/// The child side of `framebus bench start`: one short-lived consumer process that notes CLOCK_MONOTONIC at each
/// phase of its start (process entered, connected and welcomed, first frame in hand, its pixels read) and prints
/// them as one JSON line on standard output before it exits.
struct BenchStartChild {
    var kind: String
    var path: String
    var isDeferred: Bool
    var accept: String
    var queue: Int?
    /// Noted by `main` before the command line was parsed; here, when `run()` began otherwise.
    var entered: UInt64

    /// What the child prints: every field a CLOCK_MONOTONIC time in nanoseconds, or a count.
    struct Phases: Codable {
        var main: UInt64
        /// The floor's bare connect: just before `connect(2)`.
        var connecting: UInt64?
        var connected: UInt64?
        var frame: UInt64?
        var mapped: UInt64?
        /// Every page of every plane read once (one byte a page): what a consumer that reads the frame pays for its
        /// first mapping, beyond the first byte.
        var pagesRead: UInt64?
        var publish: UInt64?
        var sequence: UInt64?
        var sent: UInt64?
        var error: String?
    }

    func run() -> Never {
        var phases = Phases(main: entered)
        switch kind {
        case "floor":
            break
        case "floor-connect":
            // A bare SEQPACKET connect and one datagram, to the bench's own listener.
            do {
                phases.connecting = BenchmarkSocket.monotonicNanoseconds()
                let socket = try BenchmarkSocket.connect(path: path, stream: false)
                phases.connected = BenchmarkSocket.monotonicNanoseconds()
                let sent = BenchmarkSocket.monotonicNanoseconds()
                var datagram: [UInt8] = []
                withUnsafeBytes(of: sent.littleEndian) { datagram.append(contentsOf: $0) }
                try socket.send(datagram)
                phases.sent = sent
            } catch {
                phases.error = "\(error)"
            }
        case "delegate", "waiting", "events", "poller":
            phases = subscribe(phases)
        default:
            phases.error = "unknown child kind \(kind)"
        }
        let data = (try? JSONEncoder().encode(phases)) ?? Data("{}".utf8)
        FileHandle.standardOutput.write(data + Data("\n".utf8))
        exit(phases.error == nil ? 0 : 1)
    }

    private func subscribe(_ start: Phases) -> Phases {
        var phases = start
        let formats: [PixelFormat]
        do {
            formats = try accept.split(separator: ",").map { try PixelFormat(String($0)) }
        } catch {
            phases.error = "\(error)"
            return phases
        }
        var configuration = Subscriber.Configuration(path: path, acceptedFormats: formats)
        configuration.connectTimeout = .seconds(20)
        if let queue { configuration.delivery = .queue(depth: queue) }
        configuration.isDeferred = isDeferred
        let subscriber: Subscriber
        do {
            subscriber = try Subscriber(configuration: configuration)
        } catch {
            phases.error = "\(error)"
            return phases
        }
        if kind == "waiting" {
            FileHandle.standardOutput.write(Data("waiting\n".utf8))
        }
        let recorder = PhaseRecorder()
        switch kind {
        case "events":
            let done = DispatchSemaphore(value: 0)
            Task {
                do {
                    for try await event in subscriber.events {
                        if recorder.take(event) { break }
                    }
                } catch {
                    recorder.fail("\(error)")
                }
                done.signal()
            }
            if done.wait(timeout: .now() + 30) == .timedOut { recorder.fail("no frame in 30 s") }
        case "poller":
            do {
                let poller = try subscriber.makeBlockingPoller()
                let deadline = BenchmarkSocket.monotonicNanoseconds() + 30_000_000_000
                loop: while BenchmarkSocket.monotonicNanoseconds() < deadline {
                    switch poller.next(timeoutNanoseconds: 30_000_000_000) {
                    case .event(let event): if recorder.take(event) { break loop }
                    case .finished: break loop
                    case .timedOut, .interrupted, .busy: continue
                    }
                }
            } catch {
                recorder.fail("\(error)")
            }
        default:
            subscriber.setDelegate(recorder)
            if !recorder.wait(seconds: 30) { recorder.fail("no frame in 30 s") }
        }
        subscriber.cancel()
        let result = recorder.phases
        phases.connected = result.connected
        phases.frame = result.frame
        phases.mapped = result.mapped
        phases.pagesRead = result.pagesRead
        phases.publish = result.publish
        phases.sequence = result.sequence
        phases.error = result.error
        return phases
    }
}

/// Notes the phases from whichever consumer kind delivers them; the first frame's pixels are read once (a byte of
/// each plane) so that the first mapping is paid where it is measured.
private final class PhaseRecorder: SubscriberDelegate, @unchecked Sendable {
    // @unchecked: every field is guarded by `condition`; `populatesPages` is set once.
    private let populatesPages = ProcessInfo.processInfo.environment["FRAMEBUS_BENCH_POPULATE"] == "1"
    private let condition = NSCondition()
    private var recorded = BenchStartChild.Phases(main: 0)
    private var isDone = false

    var phases: BenchStartChild.Phases {
        condition.lock()
        defer { condition.unlock() }
        return recorded
    }

    /// Returns true when the child has what it came for (or the stream ended).
    func take(_ event: SubscriberEvent) -> Bool {
        switch event {
        case .connected, .reconnected:
            connected()
            return false
        case .frame(let sample):
            output(sample)
            return true
        case .dropped, .systemPressureChanged:
            return false
        case .ended(let error):
            fail("\(error)")
            return true
        }
    }

    private func connected() {
        let now = BenchmarkSocket.monotonicNanoseconds()
        condition.lock()
        if recorded.connected == nil { recorded.connected = now }
        condition.unlock()
    }

    private func output(_ sample: SampleBuffer) {
        let arrived = BenchmarkSocket.monotonicNanoseconds()
        var touched: UInt64 = 0
        if let image = sample.imageBuffer, !image.pixelFormat.isCompressed {
            try? image.withLock(.readOnly) {
                for plane in 0..<image.planeCount {
                    try image.withBytes(ofPlane: plane) { bytes in
                        if bytes.byteCount > 0 {
                            touched &+= UInt64(bytes.unsafeLoad(fromByteOffset: 0, as: UInt8.self))
                        }
                    }
                }
            }
        }
        let mapped = BenchmarkSocket.monotonicNanoseconds() | (touched & 0)
        if let image = sample.imageBuffer, !image.pixelFormat.isCompressed {
            try? image.withLock(.readOnly) {
                for plane in 0..<image.planeCount {
                    // `bench start --populate`: the mapping's page tables filled in one call (MADV_POPULATE_READ)
                    // before the pages are read, against faulting them in one by one.
                    if populatesPages {
                        try image.withUnsafeBytes(ofPlane: plane) { bytes in
                            guard let base = bytes.baseAddress else { return }
                            let address = UInt(bitPattern: base)
                            let aligned = address & ~UInt(4095)
                            let length = Int(address - aligned) + bytes.count
                            _ = madvise(UnsafeMutableRawPointer(bitPattern: aligned), length, 22)  // MADV_POPULATE_READ
                        }
                    }
                    try image.withBytes(ofPlane: plane) { bytes in
                        var offset = 0
                        while offset < bytes.byteCount {
                            touched &+= UInt64(bytes.unsafeLoad(fromByteOffset: offset, as: UInt8.self))
                            offset += 4096
                        }
                    }
                }
            }
        }
        let pagesRead = BenchmarkSocket.monotonicNanoseconds() | (touched & 0)
        condition.lock()
        if recorded.frame == nil {
            recorded.frame = arrived
            recorded.mapped = mapped
            recorded.pagesRead = pagesRead
            recorded.publish = sample.busPublishTime
            recorded.sequence = sample.busSequenceNumber
        }
        isDone = true
        condition.broadcast()
        condition.unlock()
    }

    func fail(_ reason: String) {
        condition.lock()
        if recorded.error == nil && recorded.frame == nil { recorded.error = reason }
        isDone = true
        condition.broadcast()
        condition.unlock()
    }

    func wait(seconds: Double) -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        condition.lock()
        defer { condition.unlock() }
        while !isDone {
            if !condition.wait(until: deadline) { return false }
        }
        return true
    }

    func subscriber(_ subscriber: Subscriber, didOutput sampleBuffer: SampleBuffer) { output(sampleBuffer) }
    func subscriber(_ subscriber: Subscriber, didConnect session: Subscriber.Session) { connected() }
    func subscriber(_ subscriber: Subscriber, didEndWith error: FrameBusError) { fail("\(error)") }
}
