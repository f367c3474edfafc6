import Foundation
import Glibc
import PixelBuffers
import TestSupport
import Testing

@testable import FrameBus

/// Futex wake-ups (docs/PROTOCOL.md §9.8): negotiated in the ring file headers, used only when both sides say so;
/// a sleeping subscriber is woken by the publisher's `FUTEX_WAKE` on its announce ring, never by a datagram; a
/// publisher that dies without a word is noticed within the liveness interval; a publisher that rewrites the wake
/// count or `controlSent`, or wakes without cause, only makes its own subscriber look again.
@Suite(.timeLimit(.minutes(5))) struct FutexWakeTests {
    static func subscriber(_ path: String, futex: Bool = true) throws -> Subscriber {
        var configuration = Subscriber.Configuration(
            path: path,
            acceptedFormats: [.yuv420BiPlanarVideoRange8],
            delivery: .queue(depth: 4)
        )
        configuration.connectTimeout = .seconds(120)
        configuration.usesFutexWakeUps = futex
        return try Subscriber(configuration: configuration)
    }

    /// Takes events from `subscriber` until `count` sequence numbers are accounted for (frames taken plus frames
    /// reported dropped: a busy machine may drop some for a slow consumer, and a drop is never silent) or the end;
    /// the frames taken and how it ended.
    static func take(_ subscriber: Subscriber, count: Int) async throws -> (frames: Int, end: FrameBusError?) {
        var frames = 0
        var accounted = 0
        for try await event in subscriber.events {
            switch event {
            case .frame:
                frames += 1
                accounted += 1
            case .dropped(let drop):
                accounted += Int(clamping: drop.frameCount)
            case .ended(let error): return (frames, error)
            default: break
            }
            if accounted >= count { return (frames, nil) }
        }
        return (frames, nil)
    }

    /// The ring level of §9.8 on real ring files: a reader that never said it sleeps costs the writer no wake call
    /// (the wake count still moves); one that said so gets exactly one `FUTEX_WAKE` per commit; a wake that comes
    /// between the reader's recheck and its `futex_waitv` is not lost (the count changed, so the wait returns at once);
    /// and a reader asleep on another thread is woken by the commit, not by its timeout.
    @Test func aReaderThatNeverSleepsCostsNoWakeCallAndASleeperGetsOnePerCommit() async throws {
        let (publisher, subscriber) = try RingChannelTests.pair(futex: Syscall.hasFutexWaitv)
        try #require(publisher.wakesPeerByFutex, "futex_waitv (Linux 5.16+) is needed for futex wake-ups")
        var writer = RingWriter(channel: publisher)
        var reader = RingReader(channel: subscriber)
        let frame = WireMessage.drop(WireDrop(firstSequence: 0, lastSequence: 0, reason: 1)).encoded()
        // Never sleeping: ten messages, no wake call, the wake count raised ten times.
        for _ in 0..<10 {
            let appended = writer.append(frame)
            #expect(appended == .success(true))
            let committed = writer.commit()
            #expect(committed == .published, "no FUTEX_WAKE for a reader that never said it sleeps")
        }
        #expect(publisher.own.load32(RingLayout.wakeCountOffset) == 10)
        for _ in 0..<10 {
            guard case .success(_?) = reader.peek() else {
                Issue.record("a message is missing")
                return
            }
            reader.advance()
        }
        // Saying it sleeps: one wake call per commit while the flag stays set.
        let doorbell = try Doorbell()
        guard case .success(let seen?) = reader.prepareToSleepOnFutex(hasNews: { _ in false }) else {
            Issue.record("an empty ring refused the sleep")
            return
        }
        let appended2 = writer.append(frame)
        #expect(appended2 == .success(true))
        let committed2 = writer.commit()
        #expect(committed2 == .wokePeer, "one FUTEX_WAKE for the reader that said it sleeps")
        // The wake came before the wait: the word changed, so the wait returns at once instead of sleeping.
        let early = subscriber.peer.futexWait(
            RingLayout.wakeCountOffset,
            seen: seen,
            doorbell: doorbell,
            rang: doorbell.ringCount,
            timeoutNanoseconds: 10_000_000_000
        )
        #expect(early == .changed)
        reader.clearSleeping()
        guard case .success(_?) = reader.peek() else {
            Issue.record("the message that woke us is missing")
            return
        }
        reader.advance()
        // Asleep on another thread: the commit wakes it (not the 60 s timeout).
        guard case .success(let asleep?) = reader.prepareToSleepOnFutex(hasNews: { _ in false }) else {
            Issue.record("an empty ring refused the sleep")
            return
        }
        let rang = doorbell.ringCount
        let peer = subscriber.peer
        async let outcome = onDedicatedThread("futex-sleeper") {
            peer.futexWait(
                RingLayout.wakeCountOffset,
                seen: asleep,
                doorbell: doorbell,
                rang: rang,
                timeoutNanoseconds: 60_000_000_000
            )
        }
        let appended3 = writer.append(frame)
        #expect(appended3 == .success(true))
        let committed3 = writer.commit()
        #expect(committed3 == .wokePeer)
        let woke = try await outcome
        #expect(woke == .woken || woke == .changed, "woken by the commit (or it came before the wait began)")
        reader.clearSleeping()
    }

    @Test(arguments: [(true, true), (true, false), (false, true), (false, false)])
    func theWakeKindIsFutexOnlyWhenBothSidesSaySo(_ sides: (publisher: Bool, subscriber: Bool)) async throws {
        let path = temporaryBusPath("futex-negotiation")
        var configuration = Publisher.Configuration(path: path, formats: [.yuv420BiPlanarVideoRange8])
        configuration.usesFutexWakeUps = sides.publisher
        let publisher = try Publisher(configuration: configuration)
        defer { publisher.stop() }
        let pool = try PublisherFairnessTests.pool(threshold: 16)
        let subscriber = try Self.subscriber(path, futex: sides.subscriber)
        defer { subscriber.cancel() }
        #expect(await eventually { subscriber.session != nil && publisher.subscriberCount == 1 })
        let session = try #require(subscriber.session)
        #expect(session.protocolVersion == 3)
        #expect(session.usesFutexWakeUps == (sides.publisher && sides.subscriber))
        // Frames flow either way; publishing paced by delivery, so the subscriber sleeps between them.
        async let taken = Self.take(subscriber, count: 5)
        for _ in 0..<5 {
            let read = subscriber.wakeUpCounts.ringMessages
            try publisher.publish(try publisher.makePixelBuffer(from: pool))
            // The next frame only after this one reached the subscriber's ring reader (bounded by `eventually`).
            _ = await eventually { subscriber.wakeUpCounts.ringMessages > read }
        }
        let (frames, end) = try await taken
        #expect(frames >= 1 && end == nil)
        let counts = subscriber.wakeUpCounts
        if session.usesFutexWakeUps {
            #expect(counts.socketSleeps == 0 && counts.socketWakeUps == 0, "no datagram wake-up in a futex session")
            #expect(counts.futexSleeps > 0)
        } else {
            #expect(counts.futexSleeps == 0 && counts.futexWakeUps == 0, "no futex sleep without both sides' word")
            #expect(counts.socketSleeps > 0)
        }
    }

    @Test func aPacedStreamFromAnotherProcessWakesTheSubscriberAtMostOncePerFrameAndNeverByDatagram() async throws {
        let path = temporaryBusPath("futex-paced")
        let peer = try await startPeer([
            "bus-publisher", path, "--fps", "100", "--frames", "60", "--wait-for-subscriber",
        ])
        #expect(await peer.waitForOutput("listening"))
        let subscriber = try Self.subscriber(path)
        defer { subscriber.cancel() }
        #expect(await eventually { subscriber.session != nil })
        #expect(subscriber.session?.usesFutexWakeUps == true)
        // Until the publisher's END_OF_STREAM (how many frames the consumer takes depends on scheduling: a busy
        // machine drops some for it, announced by DROP messages in the ring).
        let (frames, end) = try await Self.take(subscriber, count: 60)
        #expect(frames >= 1)
        #expect(end == nil || end?.code == .endOfStream)
        // The connection thread adds each batch of ring messages to its counts after delivering the batch.
        #expect(await eventually { subscriber.wakeUpCounts.ringMessages >= UInt64(frames) })
        let counts = subscriber.wakeUpCounts
        // Each ring message (FRAME, DROP) and each socket message raises the wake count once and is followed by at most
        // one FUTEX_WAKE, and so is the end of the session: more wake-ups than that would be wake-ups without cause.
        #expect(counts.futexWakeUps >= 1)
        #expect(counts.futexWakeUps <= counts.ringMessages &+ counts.socketMessages &+ 1)
        #expect(counts.socketSleeps == 0 && counts.socketWakeUps == 0)
        _ = try await peer.exitStatus(within: 120)
    }

    /// A paced frame's wake-up comes before the publisher reaps the releases waiting in the rings (docs/PROTOCOL.md
    /// §9.5) whenever they cannot change what the frame's delivery admits: here every frame, since the subscriber in
    /// another process holds none when the next is published. That order is the machine's decision
    /// (``ReapAfterWakingTests`` check it changes nothing a subscriber sees); across processes, each frame is still
    /// delivered and none dropped.
    @Test func aPacedStreamReapedAfterEachWakeUpDeliversEveryFrame() async throws {
        let path = temporaryBusPath("reap-after-waking")
        let publisher = try Publisher(
            configuration: .init(path: path, formats: [.yuv420BiPlanarVideoRange8])
        )
        defer { publisher.stop() }
        let total = 20
        let peer = try await startPeer([
            "bus-subscriber", path, "--queue", "4", "--frames", "\(total)", "--timeout", "600",
        ])
        try #require(await eventually(timeout: 120) { publisher.subscriberCount == 1 })
        let pool = try PublisherFairnessTests.pool(threshold: 16)
        for _ in 0..<total {
            try publisher.publish(try publisher.makePixelBuffer(from: pool))
            // The next frame once this one came back (the loop thread reaps an idle stream's releases itself).
            try #require(await eventually(timeout: 120) { publisher.heldFrameCount == 0 })
        }
        #expect(await peer.waitForExit(timeout: 120))
        let stats = try #require(peer.records("stats").first, "\(peer.output)")
        #expect(stats["delivered"] == "\(total)")
        #expect(stats["outOfBuffers"] == "0")
    }

    @Test func aSubscriberSleepingOnTheFutexNoticesAPublisherKilledWithSIGKILL() async throws {
        let path = temporaryBusPath("futex-kill")
        let peer = try await startPeer(["bus-publisher", path, "--fps", "50", "--wait-for-subscriber"])
        #expect(await peer.waitForOutput("listening"))
        let subscriber = try Self.subscriber(path)
        defer { subscriber.cancel() }
        var frames = 0
        var ended: FrameBusError?
        for try await event in subscriber.events {
            switch event {
            case .frame:
                frames += 1
                if frames == 3 {
                    #expect(subscriber.session?.usesFutexWakeUps == true)
                    peer.send(SIGKILL)
                }
            case .ended(let error):
                ended = error
            default: break
            }
            if ended != nil { break }
        }
        // The stream ends (end of file on the socket, read within the liveness interval): no hang, no frame lost
        // before the kill.
        #expect(frames >= 3)
        #expect(ended?.code == .endOfStream)
        #expect(await peer.waitForExit(timeout: 60))
    }

    /// §9.8's back-off: after each sleep that only timed out the liveness interval doubles, up to the ceiling; any
    /// other end of a sleep (a wake-up, a changed word, a signal, the doorbell) brings it back to the base.
    @Test func theLivenessIntervalDoublesOnlyWhileSleepsTimeOutAndIsCapped() {
        let base = WakePolicy.futexLivenessInterval
        let ceiling = WakePolicy.futexLivenessCeiling
        var interval = base
        var seen: [Int64] = []
        for _ in 0..<7 {
            interval = WakePolicy.livenessInterval(after: .timedOut, current: interval)
            seen.append(interval)
        }
        #expect(seen == [40, 80, 160, 200, 200, 200, 200].map { Int64($0) * 1_000_000 })
        #expect(seen.last == ceiling)
        for outcome: FutexWaitOutcome in [.woken, .doorbell, .changed, .failed(.interrupted)] {
            #expect(WakePolicy.livenessInterval(after: outcome, current: ceiling) == base)
            #expect(WakePolicy.livenessInterval(after: outcome, current: base) == base)
        }
        // Whatever it was (even a value it never takes), a timeout never passes the ceiling nor goes below twice the base.
        for current in [Int64.min, -1, 0, 1, base - 1, ceiling - 1, ceiling, ceiling + 1, Int64.max] {
            let next = WakePolicy.livenessInterval(after: .timedOut, current: current)
            #expect(next <= ceiling && next >= min(2 * base, ceiling))
        }
    }

    /// An idle futex-woken subscriber of a publisher in another process backs its liveness interval off to the
    /// ceiling (the counts the connection thread keeps: the timeouts it slept through and the last timeout it used),
    /// and still notices that publisher's SIGKILL (end of file read after at most one backed-off interval).
    @Test func anIdleSubscriberBacksOffItsLivenessIntervalAndStillNoticesAKilledPublisher() async throws {
        let path = temporaryBusPath("futex-idle")
        let peer = try await startPeer([
            "bus-publisher", path, "--fps", "100", "--frames", "3", "--wait-for-subscriber", "--stay",
        ])
        #expect(await peer.waitForOutput("listening"))
        let subscriber = try Self.subscriber(path)
        defer { subscriber.cancel() }
        #expect(await eventually { subscriber.session != nil })
        try #require(subscriber.session?.usesFutexWakeUps == true)
        #expect(await peer.waitForOutput("idle"))
        // 20 + 40 + 80 + 160 ms of timeouts reach the ceiling; nothing else wakes the idle connection thread.
        #expect(
            await eventually(timeout: 120) {
                subscriber.wakeUpCounts.lastLivenessInterval == WakePolicy.futexLivenessCeiling
            }
        )
        let counts = subscriber.wakeUpCounts
        #expect(counts.futexTimeouts >= 4)
        peer.send(SIGKILL)
        var ended: FrameBusError?
        for try await event in subscriber.events {
            if case .ended(let error) = event {
                ended = error
                break
            }
        }
        #expect(ended?.code == .endOfStream)
        #expect(await peer.waitForExit(timeout: 60))
    }

    @Test(arguments: ["wake-flood", "control-garbage", "wake-garbage"])
    func aPublisherThatAbusesTheWakeWordsOnlyMakesItsSubscriberLookAgain(_ scenario: String) async throws {
        let path = temporaryBusPath("futex-hostile")
        let peer = try await startPeer(["ring-hostile-publisher", path, scenario])
        #expect(await peer.waitForOutput("listening"))
        let subscriber = try Self.subscriber(path)
        defer { subscriber.cancel() }
        // The hostile publisher abuses the words, then ends the stream: the subscriber sees the END_OF_STREAM (within
        // the liveness interval at most, since this publisher never raises `controlSent` honestly), not an error.
        let (frames, end) = try await Self.take(subscriber, count: 1)
        #expect(await peer.waitForOutput("futex=true"), "the subscriber offered futex wake-ups and the peer took them")
        #expect(frames == 0)
        #expect(end?.code == .endOfStream)
        #expect(await peer.waitForOutput("done"))
        // A `controlSent` that never matches is looked at once per change, not on every turn: no spinning on the
        // socket (a spin would read it hundreds of thousands of times in the peer's 200 ms).
        #expect(subscriber.wakeUpCounts.socketReads < 2_000)
    }
}
