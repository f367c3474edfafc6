// Hostile version-3 peers (docs/PROTOCOL.md §9): they complete a real version-3 handshake, then write garbage
// into the ring file only they can write.
//
// ring-hostile-subscriber PATH SCENARIO
//   Subscribes (version 3, latest-only, 420v), waits for the first frame in the publisher's announce ring, then:
//   release-garbage  one slot of random bytes in its release ring
//   release-unheld   a well-formed RELEASE of a frame it never got
//   tail-jump        its release ring's tail far beyond anything written
//   head-jump        its head of the announce ring far beyond what the publisher wrote
//   wake-flood       wake-up datagrams from two threads, as fast as they go, until the publisher closes; prints
//                    "flooded sent=N" (datagrams the kernel took) before the ending
//   wake-redirected  (at the handshake) a wake-up socket connected to a datagram socket it bound at PATH.third
//                    instead of its pair's end B; prints "refused …" and "third-party datagrams=N"
//   Prints "welcome version=V", "frame sequence=S", then "error code=C" (the publisher's ERROR) or "closed".
//
// ring-hostile-publisher PATH SCENARIO
//   Listens, welcomes one version-3 subscriber (granting 420v), then writes into its announce ring:
//   tail-jump        a tail 1000 slots ahead
//   slot-garbage     one slot of random bytes
//   unknown-surface  a well-formed FRAME on a surface never announced
//   control-ahead    a FRAME that says 5 socket messages came before it, then END_OF_STREAM on the socket
//   wake-flood       (futex wake-ups, §9.8) 10 000 wake-ups with nothing to read, then END_OF_STREAM
//   wake-garbage     1 000 random values stored into the wake count, each with a wake-up, then END_OF_STREAM
//   control-garbage  a `controlSent` that claims 2⁶⁴ − 2 socket messages, left for 200 ms, then END_OF_STREAM
//   wake-redirected  (at the handshake) WELCOME carries a wake-up socket connected to a datagram socket it bound at
//                    PATH.third; prints "refused …" when the subscriber hangs up, and "third-party datagrams=N"
//   (the wake scenarios print "futex=B" first, and "done" once END_OF_STREAM is sent)
//   Prints "listening", "welcomed", then "error code=C" (the subscriber's ERROR) or "closed".
import CFrameBusShims
import Foundation
import Glibc
import FrameBus
import FrameBusTesting

private func randomSlot() -> [UInt8] {
    var generator = SystemRandomNumberGenerator()
    return (0..<128).map { _ in UInt8.random(in: 0...255, using: &generator) }
}

private func reportEnding(_ peer: HostileRingPeer) {
    while let message = peer.nextMessage(timeoutMilliseconds: 10_000) {
        if case .error(let error) = message {
            emit("error code=\(error.code) reason=\(error.reason.prefix(120))")
            return
        }
    }
    emit("closed")
}

/// A datagram socket bound at `path` (a third party's), and another one connected to it: what a hostile peer hands
/// over instead of its wake-up pair's end B (docs/PROTOCOL.md §9.1).
private func thirdPartySockets(_ path: String) -> (bound: Int32, connected: Int32)? {
    unlink(path)
    let type = Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue)
    let bound = socket(AF_UNIX, type, 0)
    let connected = socket(AF_UNIX, type, 0)
    var address = sockaddr_un()
    address.sun_family = sa_family_t(AF_UNIX)
    let bytes = Array(path.utf8)
    guard bound >= 0, connected >= 0, bytes.count < MemoryLayout.size(ofValue: address.sun_path) else { return nil }
    withUnsafeMutableBytes(of: &address.sun_path) { raw in
        for (index, byte) in bytes.enumerated() { raw[index] = byte }
    }
    let ok = withUnsafePointer(to: &address) { pointer in
        pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            bind(bound, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) == 0
                && connect(connected, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) == 0
        }
    }
    return ok ? (bound, connected) : nil
}

/// Datagrams waiting on the third party's socket (read without blocking).
private func thirdPartyDatagrams(_ bound: Int32) -> Int {
    var count = 0
    var byte: UInt8 = 0
    while recv(bound, &byte, 1, Int32(MSG_DONTWAIT)) >= 0 { count += 1 }
    return count
}

func runRingHostileSubscriber(_ arguments: [String]) -> Int32 {
    guard arguments.count >= 2 else { return 2 }
    let (path, scenario) = (arguments[0], arguments[1])
    var third: (bound: Int32, connected: Int32)?
    if scenario == "wake-redirected" {
        guard let sockets = thirdPartySockets(path + ".third") else { return 3 }
        third = sockets
    }
    let peer: HostileRingPeer
    do {
        peer = try HostileRingPeer.subscribe(
            path: path,
            format: PixelFormat.yuv420BiPlanarVideoRange8.fourCC,
            wakeDescriptor: third?.connected
        )
    } catch {
        emit("refused \(error)")
        if let third { emit("third-party datagrams=\(thirdPartyDatagrams(third.bound))") }
        return 0
    }
    if let third {
        // Accepted: the check is missing (the test fails on the missing "refused").
        emit("accepted")
        emit("third-party datagrams=\(thirdPartyDatagrams(third.bound))")
        return 0
    }
    if case .welcome(let welcome) = peer.handshake { emit("welcome version=\(welcome.version)") }
    // SURFACE arrives on the socket, FRAME in the ring.
    let deadline = Date().addingTimeInterval(20)
    while peer.peerTail == 0 && Date() < deadline {
        _ = peer.nextMessage(timeoutMilliseconds: 10)
    }
    guard case .frame(let frame)? = peer.peerMessage(at: 0) else {
        emit("no frame")
        return 0
    }
    emit("frame sequence=\(frame.sequence)")
    switch scenario {
    case "release-garbage": peer.appendRawSlot(randomSlot())
    case "release-unheld": peer.append(.release(WireRelease(sequence: 999_999, surfaceID: frame.surfaceID, flags: 0)))
    case "tail-jump": peer.setTail(1 << 40)
    case "head-jump": peer.setPeerHead(1 << 40)
    case "wake-flood":
        // Two threads, as the outside attack did; each stops once the publisher closed its end (send fails).
        let sent = ManagedCounter()
        let threads = (0..<2).map { _ in
            Thread {
                var mine = 0
                while peer.wakeByDatagram() { mine += 1 }
                sent.add(mine)
            }
        }
        for thread in threads { thread.start() }
        reportEnding(peer)
        sent.waitForAll(2)
        emit("flooded sent=\(sent.total)")
        return 0
    default: return 2
    }
    reportEnding(peer)
    return 0
}

/// Sums the flood threads' counts.
private final class ManagedCounter: @unchecked Sendable {
    // @unchecked: every field is touched under `condition`.
    private let condition = NSCondition()
    private var sum = 0
    private var finished = 0

    func add(_ count: Int) {
        condition.lock()
        sum += count
        finished += 1
        condition.broadcast()
        condition.unlock()
    }

    /// Waits until `threads` threads added their count (each ends once the publisher closed), at most 120 s: a
    /// flooder that never ends must not hang the peer (its lifeline ends it too).
    func waitForAll(_ threads: Int) {
        condition.lock()
        let deadline = Date().addingTimeInterval(120)
        while finished < threads, condition.wait(until: deadline) {}
        condition.unlock()
    }

    var total: Int {
        condition.lock()
        defer { condition.unlock() }
        return sum
    }
}

func runRingHostilePublisher(_ arguments: [String]) -> Int32 {
    guard arguments.count >= 2 else { return 2 }
    let (path, scenario) = (arguments[0], arguments[1])
    var third: (bound: Int32, connected: Int32)?
    if scenario == "wake-redirected" {
        guard let sockets = thirdPartySockets(path + ".third") else { return 3 }
        third = sockets
    }
    emit("listening")
    let peer: HostileRingPeer
    do {
        peer = try HostileRingPeer.publish(
            path: path,
            format: PixelFormat.yuv420BiPlanarVideoRange8.fourCC,
            wakeDescriptor: third?.connected
        )
    } catch {
        emit("refused \(error)")
        return 0
    }
    emit("welcomed")
    if let third {
        reportEnding(peer)
        emit("third-party datagrams=\(thirdPartyDatagrams(third.bound))")
        return 0
    }
    func frame(surface: UInt64) -> WireMessage {
        .frame(
            WireFrame(
                sequence: 0,
                surfaceID: surface,
                presentationTime: .invalid,
                duration: .invalid,
                publishTime: 0,
                bytesUsed: 0,
                flags: 0
            )
        )
    }
    switch scenario {
    case "tail-jump": peer.setTail(1000)
    case "slot-garbage": peer.appendRawSlot(randomSlot())
    case "unknown-surface": peer.append(frame(surface: 77))
    case "control-ahead":
        peer.append(frame(surface: 77), controlCount: 5)
        peer.send(.endOfStream(WireEndOfStream(lastSequence: 0, reason: 0)))
    case "wake-flood", "wake-garbage", "control-garbage":
        emit("futex=\(peer.usesFutexWake)")
        if scenario == "wake-flood" {
            for _ in 0..<10_000 { peer.wake() }
        } else if scenario == "wake-garbage" {
            for _ in 0..<1_000 { peer.scribble32(UInt32.random(in: 0...UInt32.max), at: RingLayout.wakeCountOffset) }
        } else {
            peer.scribble64(UInt64.max - 1, at: RingLayout.controlSentOffset)
            // Not a wait for an event: the scenario is the garbage left in place for a fixed 200 ms, several of the
            // subscriber's 20 ms liveness intervals, over which the test counts its socket reads (a spin: thousands).
            usleep(200_000)
        }
        peer.send(.endOfStream(WireEndOfStream(lastSequence: 0, reason: 0)))
        emit("done")
    default: return 2
    }
    reportEnding(peer)
    return 0
}

// version2-only-publisher PATH
//   A publisher that speaks versions 1 and 2 only, as f0b5039 did: it answers a version-3 HELLO with ERROR
//   unsupportedVersion and closes; to a version-2 HELLO it sends WELCOME version 2, then END_OF_STREAM. Prints
//   "listening", then "hello version=V" for each HELLO it reads.
func runVersionTwoOnlyPublisher(_ arguments: [String]) -> Int32 {
    guard let path = arguments.first, let listener = listenUnix(path: path) else { return 2 }
    emit("listening")
    defer { unlink(path) }
    for _ in 0..<2 {
        var pending = pollfd(fd: listener, events: Int16(POLLIN), revents: 0)
        // Up to ten minutes (a loaded machine); the test's lifeline ends this peer sooner.
        guard Glibc.poll(&pending, 1, 600_000) > 0 else {
            emit("nobody connected")
            return 3
        }
        let accepted = accept(listener, nil, nil)
        guard accepted >= 0 else { return 3 }
        defer { close(accepted) }
        let connection = RawConnection(descriptor: accepted)
        guard case .message(.hello(let hello)) = connection.receive(timeout: 20_000) else {
            emit("no hello")
            return 4
        }
        emit("hello version=\(hello.version)")
        guard hello.version <= 2 else {
            connection.send(.error(WireErrorMessage(.unsupportedVersion, "version \(hello.version); this publisher speaks 1...2")))
            continue
        }
        connection.send(
            .welcome(
                WireWelcome(
                    version: 2, deliveryMode: hello.deliveryMode, queueDepth: hello.queueDepth, maximumHeldFrames: 8,
                    format: hello.formats[0], maximumMessageSize: 4096, streamID: 99, subscriberID: 1,
                    nextSequence: 0, maximumAnnouncedSurfaces: 256
                )
            )
        )
        connection.send(.endOfStream(WireEndOfStream(lastSequence: .max, reason: 0)))
        _ = connection.receive(timeout: 5_000)
        return 0
    }
    return 0
}
