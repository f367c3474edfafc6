import Foundation
// Bus modes of the test peer.
//
// bus-subscriber PATH [--accept 420v,&8v0] [--queue N] [--delay-ms D] [--hold N] [--frames N] [--timeout S]
//                     [--checksum] [--reconnect] [--setuid UID] [--publisher-uid UID] [--deferred]
//   Subscribes (delegate API) and prints one line per event, then a final "stats ..." line:
//     welcome format=F stream=ID
//     frame seq=S hash=H disc=D bytes=B backing=K fds=N
//                                              (hash: FNV-1a 64 of the packed image bytes; compressed frames are
//                                               decoded first, so the hash proves the codec path bit-exact;
//                                               backing: memfd or dmabuf:MODIFIER of the surface received, held
//                                               by N descriptors)
//     drop reason=R first=S last=S count=N
//     end code=C message=M
//     refused code=C message=M                 (the handshake failed; after the "end" line)
//     stats delivered=N late=N outOfBuffers=N discontinuity=N
//   Exits when delivered + dropped frames reach --frames, on end of stream (unless --reconnect), or at --timeout.
//   --hold N keeps the first N frames forever (never releases them); --delay-ms sleeps in didOutput.
//   --no-status: do not ask for STATUS (HELLO without wantsStatus).
//   --publisher-uid UID also trusts a publisher running as UID (SO_PEERCRED; by default only our own uid).
//
// bus-publisher PATH [--format 420v] [--size 320x240] [--fps 100] [--frames N] [--compressed] [--wait-for-subscriber]
//   [--stay]
//   Publishes the moving test pattern until killed or N frames; prints "listening" once ready. With
//   --wait-for-subscriber the first frame waits for a subscriber.
//   --stay: after N frames, prints "idle" and keeps the bus open, publishing nothing, until killed.
//   --bus-pressure: real system pressure that a test can count on: a SystemPressurePolicy in which only the bus
//   factor counts, with thresholds so low that any measured cost reaches serious. The monitor thread measures it as
//   always, so subscribers that asked for STATUS see nominal (no frame yet, no cost), then serious [bus] once frames
//   flow (within a window or two), through the real STATUS path. Frames carry a duration of 1/fps.
//   --bus-pressure-pulse S: real system pressure that rises and comes back down to nominal: a SystemPressurePolicy
//   in which only the bus factor counts (its thresholds the default ones), a hold time and a sample interval of
//   0.5 s. For the first S
//   seconds after the first frame, frames say they last 100 ns, so the real work of publishing each one (measured by
//   the publisher's cost meter) is far above its interval: the monitor raises the level to critical [bus]. After that
//   they last 1/fps, the cost falls far below the interval, and the level comes down one step per hold time to
//   nominal (the policy's hysteresis). Prints "calm" when the frames' duration changes. S = 4 leaves three cost
//   windows of the pulse (1 s each; the frame that ends the window after the pulse is already calm) for the monitor,
//   which samples every 2 s at nominal, to see one with a second to spare.
import FrameBus
import FrameBusTesting
import Glibc
import ImageSources
import Synchronization

/// The hash of a frame's image (decoded first if compressed).
func frameHash(_ buffer: PixelBuffer) throws -> UInt64 {
    var image = buffer
    if buffer.pixelFormat.isCompressed {
        image = try PixelBuffer(width: buffer.width, height: buffer.height, pixelFormat: buffer.pixelFormat.base)
        try SurfaceCodec.decompress(buffer, into: image)
    }
    try image.lock(.readOnly)
    defer { try? image.unlock(.readOnly) }
    return fnv1a(try image.packedBytes())
}

struct PeerOptions {
    var values: [String: String] = [:]
    var flags: Set<String> = []

    init(_ arguments: ArraySlice<String>) {
        var iterator = arguments.makeIterator()
        while let argument = iterator.next() {
            guard argument.hasPrefix("--") else { continue }
            let name = String(argument.dropFirst(2))
            if [
                "checksum", "reconnect", "compressed", "wait-for-subscriber", "stay", "deferred", "no-status",
                "bus-pressure",
            ].contains(name) {
                flags.insert(name)
            } else if let value = iterator.next() {
                values[name] = value
            }
        }
    }

    func int(_ name: String, _ fallback: Int) -> Int { values[name].flatMap { Int($0) } ?? fallback }
}

func emit(_ line: String) {
    FileHandle.standardOutput.write((line + "\n").data(using: .utf8)!)
}

final class PeerSubscriberDelegate: SubscriberDelegate, @unchecked Sendable {
    // @unchecked: every field is touched only on `queue` (the delegate queue), or after `done` fired.
    let options: PeerOptions
    let done = DispatchSemaphore(value: 0)
    var held: [SampleBuffer] = []
    var delivered = 0
    var dropped: [DroppedFrameReason: Int] = [:]
    var finished = false

    init(options: PeerOptions) { self.options = options }

    private func checkFinished() {
        let target = options.int("frames", 0)
        if target > 0, !finished, delivered + dropped.values.reduce(0, +) >= target {
            finished = true
            done.signal()
        }
    }

    func subscriber(_ subscriber: Subscriber, didOutput sampleBuffer: SampleBuffer) {
        delivered += 1
        var hash: UInt64 = 0
        if options.flags.contains("checksum"), let image = sampleBuffer.imageBuffer {
            hash = (try? frameHash(image)) ?? 0
        }
        var backing = "none"
        switch sampleBuffer.imageBuffer?.surface.backing {
        case .memfd?: backing = "memfd"
        case .dmaBuf(let modifier)?: backing = "dmabuf:\(modifier)"
        case nil: break
        }
        emit(
            "frame seq=\(sampleBuffer.busSequenceNumber ?? 0) hash=\(String(hash, radix: 16)) "
                + "disc=\(sampleBuffer.discontinuity.rawValue) bytes=\(sampleBuffer.busBytesUsed ?? 0) "
                + "backing=\(backing) fds=\(sampleBuffer.imageBuffer?.surface.descriptorCount ?? 0)"
        )
        if held.count < options.int("hold", 0) { held.append(sampleBuffer) }
        let delay = options.int("delay-ms", 0)
        if delay > 0 { usleep(UInt32(delay * 1000)) }
        checkFinished()
    }

    func subscriber(_ subscriber: Subscriber, didDrop sampleBuffer: SampleBuffer) {
        let reason = sampleBuffer.droppedFrameReason ?? .discontinuity
        let range = sampleBuffer.busSequenceRange ?? 0...0
        let count = sampleBuffer.busDroppedFrameCount ?? 1
        dropped[reason, default: 0] += Int(clamping: count)
        emit("drop reason=\(reason) first=\(range.lowerBound) last=\(range.upperBound) count=\(count)")
        checkFinished()
    }

    func subscriber(_ subscriber: Subscriber, didConnect session: Subscriber.Session) {
        emit("welcome format=\(session.format) stream=\(session.streamID)")
    }

    func subscriber(_ subscriber: Subscriber, didEndWith error: FrameBusError) {
        emit("end code=\(error.code) message=\(error.message ?? "")")
        if error.code == .refused || error.code == .permissionDenied {
            emit("refused code=\(error.code) message=\(error.message ?? "")")
        }
        if !options.flags.contains("reconnect"), !finished {
            finished = true
            done.signal()
        }
    }
}

func runBusSubscriber(_ arguments: [String]) -> Int32 {
    guard let path = arguments.first else { return 2 }
    let options = PeerOptions(arguments.dropFirst())
    if let uid = options.values["setuid"].flatMap({ UInt32($0) }) {
        guard setgid(uid) == 0, setuid(uid) == 0 else {
            emit("setuid failed errno=\(errno)")
            return 3
        }
    }
    let formats = (options.values["accept"] ?? "420v").split(separator: ",").compactMap {
        try? PixelFormat(String($0))
    }
    var configuration = Subscriber.Configuration(path: path, acceptedFormats: formats)
    if let depth = options.values["queue"].flatMap({ Int($0) }) { configuration.delivery = .queue(depth: depth) }
    configuration.reconnects = options.flags.contains("reconnect")
    configuration.isDeferred = options.flags.contains("deferred")
    // --no-status: a subscriber that does not ask for STATUS (as one that predates it), so gets outOfBuffers for shed
    // frames.
    configuration.receivesStatus = !options.flags.contains("no-status")
    if let uid = options.values["publisher-uid"].flatMap({ UInt32($0) }) {
        configuration.allowedPublisherUserIDs.insert(uid)
    }
    let subscriber: Subscriber
    do { subscriber = try Subscriber(configuration: configuration) } catch {
        emit("refused code=\(error.code) message=\(error.message ?? "")")
        return 0
    }
    let delegate = PeerSubscriberDelegate(options: options)
    let queue = DispatchQueue(label: "peer.delegate")
    subscriber.setDelegate(delegate, queue: queue)
    _ = delegate.done.wait(timeout: .now() + .seconds(options.int("timeout", 300)))
    queue.sync {
        emit(
            "stats delivered=\(delegate.delivered) late=\(delegate.dropped[.frameWasLate] ?? 0) "
                + "outOfBuffers=\(delegate.dropped[.outOfBuffers] ?? 0) "
                + "discontinuity=\(delegate.dropped[.discontinuity] ?? 0)"
        )
    }
    subscriber.cancel()
    return 0
}

func runBusPublisher(_ arguments: [String]) -> Int32 {
    guard let path = arguments.first else { return 2 }
    let options = PeerOptions(arguments.dropFirst())
    do {
        let format = try PixelFormat(options.values["format"] ?? "420v")
        let size = (options.values["size"] ?? "320x240").split(separator: "x").compactMap { Int($0) }
        guard size.count == 2 else { return 2 }
        var formats = [format]
        if options.flags.contains("compressed"), let compressed = format.compressedVariant {
            formats.append(compressed)
        }
        var configuration = Publisher.Configuration(path: path, formats: formats)
        let busPressure = options.flags.contains("bus-pressure")
        let pulse = options.values["bus-pressure-pulse"].flatMap(Double.init)
        if let pulse {
            guard pulse > 0, pulse <= 600 else { return 2 }
            var policy = SystemPressurePolicy()
            let never = SystemPressurePolicy.Thresholds(fair: nil, serious: nil, critical: nil)
            policy.cpu = never
            policy.memory = never
            policy.io = never
            policy.thermal = never
            policy.holdTime = .milliseconds(500)
            policy.sampleInterval = .milliseconds(500)
            configuration.systemPressurePolicy = policy
        } else if busPressure {
            var policy = SystemPressurePolicy()
            let never = SystemPressurePolicy.Thresholds(fair: nil, serious: nil, critical: nil)
            policy.cpu = never
            policy.memory = never
            policy.io = never
            policy.thermal = never
            policy.bus = .init(fair: 1e-9, serious: 2e-9, critical: nil)
            configuration.systemPressurePolicy = policy
        }
        let publisher = try Publisher(configuration: configuration)
        let pool = try PixelBufferPool(
            attributes: .init(width: size[0], height: size[1], pixelFormat: format, allocationThreshold: 16)
        )
        let pattern = try TestPattern(width: size[0], height: size[1], pixelFormat: format)
        emit("listening")
        // With --wait-for-subscriber, frame 0 goes out only once someone is there to get it (a bounded run of
        // --frames must not end before a slow test has connected).
        // Bounded (10 minutes; the stdin lifeline ends the peer sooner when its test goes away).
        if options.flags.contains("wait-for-subscriber") {
            let deadline = ContinuousClock.now + .seconds(600)
            while publisher.subscriberCount == 0 {
                guard ContinuousClock.now < deadline else {
                    emit("error no subscriber within 600 s")
                    publisher.stop()
                    return 1
                }
                usleep(1000)
            }
        }
        let fps = max(1, options.int("fps", 100))
        let interval = UInt32(1_000_000 / fps)
        var duration =
            busPressure || pulse != nil ? MediaTime(value: 1, timescale: Int32(clamping: fps)) : .invalid
        // The pulse: 100 ns frames until `calmAt` (set at the first frame).
        var calmAt: ContinuousClock.Instant?
        if let pulse {
            calmAt = .now + .milliseconds(Int64(pulse * 1000))
            duration = MediaTime(value: 1, timescale: 10_000_000)
        }
        let limit = options.int("frames", Int.max)
        var index = 0
        while index < limit {
            if let calm = calmAt, ContinuousClock.now >= calm {
                calmAt = nil
                duration = MediaTime(value: 1, timescale: Int32(clamping: fps))
                emit("calm")
            }
            if let buffer = try? publisher.makePixelBuffer(from: pool) {
                try buffer.lock()
                try pattern.fill(buffer, frameIndex: index)
                try buffer.unlock()
                try publisher.publish(
                    buffer,
                    timing: SampleTimingInfo(presentationTimeStamp: HostClock.now, duration: duration)
                )
            }
            index += 1
            usleep(interval)
        }
        if options.flags.contains("stay") {
            emit("idle")
            // Until killed (a test's SIGKILL, or the lifeline when the test goes away).
            while true { pause() }
        }
        publisher.stop()
        return 0
    } catch {
        emit("error \(error)")
        return 1
    }
}
