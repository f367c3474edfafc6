import CFrameBusShims
import Foundation
import FrameBusTesting
import Glibc
import PixelBuffers
import SampleBuffers
import Synchronization
import SystemPackage
import TestSupport
import Testing

@testable import FrameBus

/// The subscriber's wake policy (``WakePolicy``): how its connection thread waits in each kind of session, and the
/// bound it keeps on how long a frame written to the announce ring can wait unseen.
@Suite struct SubscriberWakePolicyTests {
    /// Datagram sessions and handshakes poll without a cap; a futex-woken session sleeps on the futex unless it needs
    /// its socket's readiness, and then polls at most one liveness interval when the ring can bring a frame.
    @Test func aFutexSessionThatMustPollCapsThePollAtTheLivenessIntervalOnlyWhenTheRingCanBringAFrame() throws {
        let policy = WakePolicy()
        func describe(_ wait: WakePolicy.Wait) -> String {
            switch wait {
            case .futex: return "futex"
            case .poll(let cap?): return "poll \(cap) ms"
            case .poll(nil): return "poll"
            }
        }
        #expect(describe(policy.wait(rings: nil, isAwaitingWelcome: true, hasOutbound: false)) == "poll")
        #expect(describe(policy.wait(rings: nil, isAwaitingWelcome: false, hasOutbound: true)) == "poll")

        for futex in [true, false] {
            // As a handshake does: the publisher joins first (and writes its answer to the offer), then the subscriber.
            let publisherHalf = try RingChannel.Half(role: .announce)
            let subscriberHalf = try RingChannel.Half(role: .release, futexWake: futex)
            _ = try publisherHalf.joining(
                peerRing: FileDescriptor(rawValue: dup(subscriberHalf.descriptors[0])),
                peerWake: FileDescriptor(rawValue: dup(subscriberHalf.descriptors[1])),
                peerRole: .release
            )
            let channel = try subscriberHalf.joining(
                peerRing: FileDescriptor(rawValue: dup(publisherHalf.descriptors[0])),
                peerWake: FileDescriptor(rawValue: dup(publisherHalf.descriptors[1])),
                peerRole: .announce
            )
            let rings = SubscriberRings(channel: channel)
            let interval = Int32(WakePolicy.futexLivenessInterval / 1_000_000)
            let idle = describe(policy.wait(rings: rings, isAwaitingWelcome: false, hasOutbound: false))
            let withOutbox = describe(policy.wait(rings: rings, isAwaitingWelcome: false, hasOutbound: true))
            rings.isBlockedOnControl = true
            let blocked = describe(policy.wait(rings: rings, isAwaitingWelcome: false, hasOutbound: true))
            #expect(channel.usesFutexWake == (futex && Syscall.hasFutexWaitv))
            if channel.usesFutexWake {
                #expect(idle == "futex")
                #expect(withOutbox == "poll \(interval) ms", "a ring frame wakes only the futex, which poll misses")
                #expect(blocked == "poll", "the ring waits for the socket: its readiness ends the wait")
            } else {
                #expect([idle, withOutbox, blocked] == ["poll", "poll", "poll"])
            }
        }
    }

    /// Review finding m1: a futex-woken subscriber whose outbox waits for room (its publisher does not read its
    /// socket) polls the socket; a frame the publisher then writes to the announce ring and announces with a futex
    /// wake-up must still arrive within the liveness interval, not after the poll's one-second timeout. The fake
    /// publisher (in this process) never reads its socket or the release ring, so releases fill the ring, then the
    /// socket, then the outbox; then, each time the connection thread is blocked in `poll`, it writes one frame.
    @Test(.timeLimit(.minutes(3)))
    func aRingFrameReachesAFutexWokenSubscriberWhoseOutboxWaitsWithinTheLivenessInterval() async throws {
        try #require(Syscall.hasFutexWaitv, "futex wake-ups need futex_waitv")
        let path = temporarySocketPath("wake-policy-m1")
        let format = PixelFormat.yuv420BiPlanarVideoRange8
        let publishing = DedicatedThreadTask("fake-publisher") {
            try HostileRingPeer.publish(path: path, format: format.fourCC)
        }
        var configuration = Subscriber.Configuration(path: path, acceptedFormats: [format], delivery: .latestOnly)
        configuration.connectTimeout = .seconds(120)
        configuration.usesFutexWakeUps = true
        let subscriber = try Subscriber(configuration: configuration)
        defer { subscriber.cancel() }
        let frames = ArrivalRecorder()
        subscriber.setDelegate(frames)
        let peer = try await publishing.value
        defer { peer.close() }
        try #require(peer.usesFutexWake)

        let result = try await onDedicatedThread("m1-driver") { () -> (filled: Bool, waits: [UInt64]) in
            // A surface the subscriber can import: a sealed memfd, every page written (committed, §5.7).
            let layout = try PixelBuffer(width: 64, height: 48, pixelFormat: format).surface.layout
            let fd = cfb_memfd_create("m1", CFB_MFD_CLOEXEC | CFB_MFD_ALLOW_SEALING)
            guard fd >= 0 else { throw TestSupportError("memfd_create failed") }
            defer { close(fd) }
            let zeros = [UInt8](repeating: 0, count: layout.allocationSize)
            guard write(fd, zeros, zeros.count) == zeros.count,
                cfb_add_seals(fd, CFB_F_SEAL_SHRINK | CFB_F_SEAL_GROW | CFB_F_SEAL_WRITE | CFB_F_SEAL_SEAL) == 0
            else { throw TestSupportError("cannot fill and seal the memfd") }
            let surface = WireSurface(
                surfaceID: 1,
                pixelFormat: format.fourCC,
                width: UInt32(layout.width),
                height: UInt32(layout.height),
                descriptorByteCounts: [UInt64(layout.allocationSize)],
                planes: layout.planes.map {
                    WireSurfacePlane(
                        offset: UInt64($0.offset),
                        bytesPerRow: UInt32($0.bytesPerRow),
                        width: UInt32($0.width),
                        height: UInt32($0.height),
                        bytesPerElement: UInt32($0.bytesPerElement)
                    )
                }
            )
            peer.send(.surface(surface), descriptors: [fd])
            var sequence: UInt64 = 0
            func sendFrame() -> Bool {
                let frame = WireFrame(
                    sequence: sequence,
                    surfaceID: 1,
                    presentationTime: .invalid,
                    duration: .invalid,
                    publishTime: 0,
                    bytesUsed: 0,
                    flags: 0
                )
                sequence += 1
                // Control count 1: the frame comes after the SURFACE (§9.4).
                peer.append(.frame(frame), controlCount: 1)
                return frames.waitForFrame(number: Int(sequence), seconds: 20)
            }
            // Fill: every frame released at once, until a release waits in the outbox.
            var filled = false
            for _ in 0..<20_000 {
                guard sendFrame() else { break }
                if subscriber.core.sender.hasOutbound {
                    filled = true
                    break
                }
            }
            guard filled else { return (false, []) }
            // Measure: frames now kept (no release rings the doorbell), each written while the thread is in poll.
            frames.keepsFrames = true
            var waits: [UInt64] = []
            for _ in 0..<3 {
                guard frames.waitUntilBlockedInPoll(seconds: 20) else { break }
                let start = ProcessInfoShim.monotonicNanoseconds()
                guard sendFrame() else { break }
                waits.append(ProcessInfoShim.monotonicNanoseconds() - start)
            }
            return (true, waits)
        }
        #expect(result.filled, "the releases never reached the outbox")
        #expect(result.waits.count == 3, "\(result.waits)")
        // The liveness interval is 20 ms; the old poll waited up to 1 s. Half a second leaves room for a loaded
        // machine and still fails every frame of the old behaviour.
        for wait in result.waits { #expect(wait < 500_000_000, "a ring frame waited \(wait / 1_000_000) ms") }
        #expect(subscriber.core.sender.hasOverflowed == false)
    }
}

/// A delegate on the connection thread that counts frames (releasing each at once, or keeping them), remembers the
/// thread it runs on, and lets a test wait for the n-th frame.
private final class ArrivalRecorder: SubscriberDelegate, @unchecked Sendable {
    // @unchecked: `state` is a Mutex; `arrived` a semaphore.
    private struct State {
        var count = 0
        var thread: pid_t = 0
        var kept: [SampleBuffer] = []
        var keepsFrames = false
    }
    private let state = Mutex(State())
    private let arrived = DispatchSemaphore(value: 0)

    var keepsFrames: Bool {
        get { state.withLock { $0.keepsFrames } }
        set { state.withLock { $0.keepsFrames = newValue } }
    }

    func subscriber(_ subscriber: Subscriber, didOutput sampleBuffer: SampleBuffer) {
        state.withLock {
            $0.count += 1
            $0.thread = pid_t(cfb_thread_id())
            if $0.keepsFrames { $0.kept.append(sampleBuffer) }
        }
        arrived.signal()
    }

    /// Waits until `number` frames arrived in all.
    func waitForFrame(number: Int, seconds: Double) -> Bool {
        let deadline = DispatchTime.now() + seconds
        while state.withLock({ $0.count }) < number {
            guard arrived.wait(timeout: deadline) == .success else { return false }
        }
        return true
    }

    /// Waits until the connection thread is blocked in `poll` or `ppoll` (`/proc/self/task/<tid>/syscall`), checking
    /// every millisecond.
    func waitUntilBlockedInPoll(seconds: Double) -> Bool {
        let thread = state.withLock { $0.thread }
        let deadline = ProcessInfoShim.monotonicNanoseconds() + UInt64(seconds * 1e9)
        #if arch(x86_64)
        let calls: Set<String> = ["7", "271"]
        #else
        let calls: Set<String> = ["73"]
        #endif
        while ProcessInfoShim.monotonicNanoseconds() < deadline {
            if let text = try? String(contentsOfFile: "/proc/self/task/\(thread)/syscall", encoding: .utf8),
                let number = text.split(separator: " ").first, calls.contains(String(number))
            {
                return true
            }
            usleep(1000)
        }
        return false
    }
}
