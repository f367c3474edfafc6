import Foundation
import FrameBusTesting
import Surfaces
import Synchronization
import SystemPackage
import Testing

@testable import FrameBus

/// Protocol version 3's rings (docs/PROTOCOL.md §9): the pure index and slot checks, both state machines fed ring
/// events, and real ring files and wake-up sockets in one process.
@Suite(.timeLimit(.minutes(5))) struct RingLayoutTests {
    @Test func theReadableCountIsBoundedByTheRingWhateverTheTailSays() {
        #expect(RingLayout.readable(head: 5, tail: 5) == .success(0))
        #expect(RingLayout.readable(head: 5, tail: 5 + 256) == .success(256))
        // More than a ring's worth ahead, behind the head, or wrapped around: all violations, none traps.
        #expect((try? RingLayout.readable(head: 5, tail: 5 + 257).get()) == nil)
        #expect((try? RingLayout.readable(head: 5, tail: 4).get()) == nil)
        #expect((try? RingLayout.readable(head: 0, tail: .max).get()) == nil)
        #expect(RingLayout.readable(head: .max - 1, tail: 2) == .success(4))
    }

    @Test func aReadersHeadOnlyMovesForwardAndNeverPassesWhatWasWritten() {
        #expect(RingLayout.room(written: 10, peerHead: 10, lastPeerHead: 3) == .success(256))
        #expect(RingLayout.room(written: 10, peerHead: 3, lastPeerHead: 3) == .success(249))
        #expect((try? RingLayout.room(written: 10, peerHead: 11, lastPeerHead: 3).get()) == nil, "past the tail")
        #expect((try? RingLayout.room(written: 10, peerHead: 2, lastPeerHead: 3).get()) == nil, "moved back")
        #expect((try? RingLayout.room(written: 300, peerHead: 0, lastPeerHead: 0).get()) == nil, "lapped")
        #expect((try? RingLayout.room(written: 10, peerHead: .max, lastPeerHead: 3).get()) == nil)
    }

    @Test func aSlotRoundTripsItsMessageAndEveryBadFieldIsRefused() throws {
        let release = WireMessage.release(WireRelease(sequence: 9, surfaceID: 4, flags: 0)).encoded()
        let slot = RingLayout.slot(controlCount: 3, message: release)
        #expect(slot.count == RingLayout.slotSize)
        #expect(RingLayout.entry(slot) == .success(RingEntry(controlCount: 3, message: release)))
        var badLength = slot
        badLength[RingLayout.slotLengthOffset] = 7
        #expect((try? RingLayout.entry(badLength).get()) == nil)
        badLength[RingLayout.slotLengthOffset] = UInt8(RingLayout.maximumMessageLength + 1)
        #expect((try? RingLayout.entry(badLength).get()) == nil)
        var badReserved = slot
        badReserved[RingLayout.slotReservedOffset + 2] = 1
        #expect((try? RingLayout.entry(badReserved).get()) == nil)
        #expect((try? RingLayout.entry(Array(slot.prefix(64))).get()) == nil)
    }

    @Test func theHeaderNamesMagicVersionRoleAndGeometry() {
        let header = RingLayout.header(role: .release)
        #expect(header[0..<4] == [0x47, 0x52, 0x42, 0x46])  // 'FBRG' little-endian
        #expect(RingLayout.checkHeader(header, role: .release) == nil)
        #expect(RingLayout.checkHeader(header, role: .announce) != nil)
        var wrongSlots = header
        wrongSlots[RingLayout.slotCountOffset] = 1
        #expect(RingLayout.checkHeader(wrongSlots, role: .release) != nil)
    }
}

@Suite(.timeLimit(.minutes(5))) struct PublisherRingStateMachineTests {
    typealias Harness = MachineHarness

    static func ringHello() -> [UInt8] {
        WireMessage.hello(
            WireHello(version: 3, deliveryMode: 0, queueDepth: 1, formats: [Harness.nv12])
        ).encoded()
    }

    static func subscribeV3(_ harness: inout Harness, rings: Harness.Machine.RingOffer = .ready) -> Harness.ID {
        let id = harness.connect()
        harness.perform(
            harness.machine.received(
                ringHello(),
                descriptorCount: 2,
                isTruncated: false,
                from: id,
                rings: rings,
                now: harness.now
            )
        )
        return id
    }

    static func releaseEntry(_ sequence: UInt64, surface: UInt64, controlCount: UInt64 = 0) -> RingEntry {
        RingEntry(
            controlCount: controlCount,
            message: WireMessage.release(WireRelease(sequence: sequence, surfaceID: surface, flags: 0)).encoded()
        )
    }

    @Test func aVersionThreeHelloWithRingsIsWelcomedWithVersionThree() throws {
        var harness = Harness { $0.heldFrameBudget = 8 }
        let id = Self.subscribeV3(&harness)
        guard case .welcome(let welcome)? = harness.messages(id).first else {
            Issue.record("no WELCOME: \(harness.messages(id))")
            return
        }
        #expect(welcome.version == 3)
        #expect(WireMessage.welcome(welcome).descriptorCount == 2)
        #expect(harness.machine.sessionVersion(of: id) == 3)
    }

    @Test func withoutRingsAVersionThreeSubscriberGetsVersionTwo() throws {
        var harness = Harness()
        let id = Self.subscribeV3(&harness, rings: .none)
        guard case .welcome(let welcome)? = harness.messages(id).first else {
            Issue.record("no WELCOME")
            return
        }
        #expect(welcome.version == 2)
        #expect(harness.machine.sessionVersion(of: id) == 2)
    }

    @Test func refusedRingDescriptorsEndTheHandshakeWithMalformedMessage() {
        var harness = Harness()
        let id = Self.subscribeV3(&harness, rings: .refused("not a datagram socket"))
        #expect(harness.errors(id).map(\.code) == [WireErrorCode.malformedMessage.rawValue])
        #expect(harness.machine.sessionVersion(of: id) == nil)
    }

    @Test func aReleaseFromTheRingFreesTheFrameExactlyAsOnTheSocket() {
        var harness = Harness {
            $0.heldFrameBudget = 32
            $0.maximumSubscribers = 1
            $0.extraHeldFramesPerSubscriber = 4
        }
        let id = Self.subscribeV3(&harness)
        // Latest-only holds at most 1 + 4 extra = 5; the sixth frame is dropped until one is released.
        for _ in 0..<5 { harness.publish(on: 1) }
        #expect(harness.machine.heldFrameCount == 5)
        harness.publish(on: 1)
        #expect(harness.drops(id).isEmpty && harness.machine.heldFrameCount == 5)
        harness.perform(harness.machine.receivedFromRing(Self.releaseEntry(0, surface: 1), from: id, now: harness.now))
        #expect(harness.machine.heldFrameCount == 4)
        harness.publish(on: 1)
        #expect(harness.frames(id).map(\.sequence) == [0, 1, 2, 3, 4, 6])
        #expect(harness.errors(id).isEmpty)
    }

    @Test(arguments: [
        ("a frame it does not hold", releaseEntry(77, surface: 1), WireErrorCode.invalidRequest),
        ("the wrong surface", releaseEntry(0, surface: 2), .invalidRequest),
        ("a nonzero control count", releaseEntry(0, surface: 1, controlCount: 1), .malformedMessage),
        (
            "a FRAME",
            RingEntry(
                controlCount: 0,
                message: WireMessage.frame(
                    WireFrame(
                        sequence: 0, surfaceID: 1, presentationTime: .invalid, duration: .invalid, publishTime: 0,
                        bytesUsed: 0, flags: 0
                    )
                ).encoded()
            ), .malformedMessage
        ),
        ("garbage", RingEntry(controlCount: 0, message: [UInt8](repeating: 0xA5, count: 32)), .malformedMessage),
    ])
    func aBadReleaseSlotEndsOnlyThatSubscriber(_ name: String, _ entry: RingEntry, _ code: WireErrorCode) {
        var harness = Harness { $0.heldFrameBudget = 32 }
        let hostile = Self.subscribeV3(&harness)
        let honest = Self.subscribeV3(&harness)
        harness.publish(on: 1)
        harness.perform(harness.machine.receivedFromRing(entry, from: hostile, now: harness.now))
        #expect(harness.errors(hostile).map(\.code) == [code.rawValue], "\(name)")
        harness.publish(on: 1)
        #expect(harness.frames(honest).map(\.sequence) == [0, 1], "the honest subscriber is untouched")
        #expect(harness.errors(honest).isEmpty)
        #expect(harness.frames(hostile).map(\.sequence) == [0], "nothing more for the hostile one")
    }

    @Test func aRingMessageInAVersionTwoSessionIsMalformed() {
        var harness = Harness()
        let id = harness.subscribe()
        harness.publish(on: 1)
        harness.perform(harness.machine.receivedFromRing(Self.releaseEntry(0, surface: 1), from: id, now: harness.now))
        #expect(harness.errors(id).map(\.code) == [WireErrorCode.malformedMessage.rawValue])
    }

    @Test func aRingViolationEndsThatSessionAndReleasesWhatItHeld() {
        var harness = Harness { $0.heldFrameBudget = 32 }
        let id = Self.subscribeV3(&harness)
        harness.publish(on: 1)
        harness.publish(on: 1)
        #expect(harness.machine.heldFrameCount == 2)
        harness.perform(harness.machine.ringViolation("tail 9 not within 256 of head 400", from: id, now: harness.now))
        #expect(harness.errors(id).map(\.code) == [WireErrorCode.malformedMessage.rawValue])
        #expect(harness.machine.heldFrameCount == 0)
    }
}

@Suite(.timeLimit(.minutes(5))) struct SubscriberRingStateMachineTests {
    typealias Cases = SubscriberStateMachineTests

    static func activeV3Machine() -> SubscriberStateMachine {
        var machine = SubscriberStateMachine(acceptedFormats: [Cases.format], delivery: .queue(depth: 4))
        _ = machine.connected(offeringRings: true)
        _ = machine.received(Cases.welcome(version: 3))
        _ = machine.received(Cases.surface(1))
        return machine
    }

    @Test func offeringRingsSendsAVersionThreeHelloWithTwoDescriptors() {
        var machine = SubscriberStateMachine(acceptedFormats: [Cases.format], delivery: .latestOnly)
        let hello = machine.connected(offeringRings: true)
        guard case .hello(let fields) = hello else {
            Issue.record("not a HELLO")
            return
        }
        #expect(fields.version == 3)
        #expect(hello.descriptorCount == 2)
        #expect(machine.connected().descriptorCount == 0, "without rings: version 2, no fds")
    }

    @Test func aVersionTwoWelcomeAnswersAVersionThreeHello() {
        var machine = SubscriberStateMachine(acceptedFormats: [Cases.format], delivery: .latestOnly)
        _ = machine.connected(offeringRings: true)
        guard case .established(let session, _) = machine.received(Cases.welcome(version: 2)) else {
            Issue.record("not established")
            return
        }
        #expect(session.protocolVersion == 2)
    }

    @Test func theSessionSaysWhichDepthWasGrantedWhenItIsLessThanAskedFor() {
        var machine = SubscriberStateMachine(acceptedFormats: [Cases.format], delivery: .queue(depth: 16))
        _ = machine.connected()
        let welcome = WireMessage.welcome(
            WireWelcome(
                version: 2, deliveryMode: 1, queueDepth: 2, maximumHeldFrames: 2, format: Cases.format.fourCC,
                maximumMessageSize: 4096, streamID: 1, subscriberID: 1, nextSequence: 0, maximumAnnouncedSurfaces: 8
            )
        )
        guard case .established(let session, _) = machine.received(welcome) else {
            Issue.record("not established")
            return
        }
        #expect(session.grantedQueueDepth == 2)
        #expect(session.maximumHeldFrames == 2)
    }

    @Test func unsupportedVersionMakesTheNextHelloVersionTwo() {
        var machine = SubscriberStateMachine(acceptedFormats: [Cases.format], delivery: .latestOnly)
        _ = machine.connected(offeringRings: true)
        _ = machine.received(.error(WireErrorMessage(.unsupportedVersion, "speaks 1...2")))
        #expect(machine.retriesWithoutRings)
        guard case .hello(let hello) = machine.connected(offeringRings: true) else { return }
        #expect(hello.version == 2)
        #expect(!machine.retriesWithoutRings)
    }

    @Test func aFrameFromTheRingIsDeliveredAndOnTheSocketItIsMalformed() {
        var machine = Self.activeV3Machine()
        guard case .deliverFrame(let frame, _) = machine.receivedFromRing(Cases.frame(0).encoded()) else {
            Issue.record("not delivered")
            return
        }
        #expect(frame.sequence == 0)
        #expect(machine.receivedFromRing(Cases.drop(1, 3).encoded()) != .none)
        #expect(Cases.replyCode(machine.received(Cases.frame(4))) == .malformedMessage)
    }

    @Test(arguments: [
        ("a SURFACE", Cases.surface(2).encoded()),
        ("garbage", [UInt8](repeating: 0x5A, count: 80)),
        ("a RELEASE", WireMessage.release(WireRelease(sequence: 0, surfaceID: 1, flags: 0)).encoded()),
    ])
    func anythingButFrameOrDropInTheAnnounceRingIsMalformed(_ name: String, _ bytes: [UInt8]) {
        var machine = Self.activeV3Machine()
        #expect(Cases.replyCode(machine.receivedFromRing(bytes)) == .malformedMessage, "\(name)")
    }

    @Test func aFrameFromTheRingStillHonoursTheHeldLimitAndSequenceOrder() {
        var machine = Self.activeV3Machine()
        _ = machine.receivedFromRing(Cases.frame(5).encoded())
        #expect(Cases.replyCode(machine.receivedFromRing(Cases.frame(5).encoded())) == .malformedMessage)
        var full = Self.activeV3Machine()
        #expect(Cases.replyCode(full.receivedFromRing(Cases.frame(0).encoded(), heldFrames: 8)) == .malformedMessage)
    }
}

/// Real ring files and wake-up sockets in one process: the seals, the import checks, the sleep/wake ordering, and
/// wake-ups that no peer can make block.
@Suite(.timeLimit(.minutes(5))) struct RingChannelTests {
    static func duplicate(_ descriptor: Int32) throws -> FileDescriptor {
        try Syscall.duplicate(FileDescriptor(rawValue: descriptor)).get()
    }

    /// A publisher's and a subscriber's channel joined to each other.
    /// Both ends of one session in this process; `futex`: the subscriber offers and the publisher accepts futex
    /// wake-ups (§9.8), else the datagram wake-ups of §9.5.
    static func pair(futex: Bool = false) throws -> (publisher: RingChannel, subscriber: RingChannel) {
        let publisherHalf = try RingChannel.Half(role: .announce, futexWake: futex)
        let subscriberHalf = try RingChannel.Half(role: .release, futexWake: futex)
        let publisher = try publisherHalf.joining(
            peerRing: duplicate(subscriberHalf.descriptors[0]),
            peerWake: duplicate(subscriberHalf.descriptors[1]),
            peerRole: .release
        )
        let subscriber = try subscriberHalf.joining(
            peerRing: duplicate(publisherHalf.descriptors[0]),
            peerWake: duplicate(publisherHalf.descriptors[1]),
            peerRole: .announce
        )
        return (publisher, subscriber)
    }

    static func isReadable(_ wake: WakeSocket) -> Bool {
        (try? Syscall.poll([(wake.descriptor, PollEvents.readable)], timeout: 0).get().first ?? 0) ?? 0 != 0
    }

    @Test func messagesCrossInOrderAndTheWriterWakesOnlyASleepingReader() throws {
        let (publisher, subscriber) = try Self.pair()
        var writer = RingWriter(channel: publisher)
        var reader = RingReader(channel: subscriber)
        // The reader is awake: appending and committing sends no wake-up.
        let value1 = writer.append([1, 0, 0, 0, 8, 0, 0, 0])
        #expect(value1 == .success(true))
        let value2 = writer.commit()
        #expect(value2 == .published)
        #expect(!Self.isReadable(subscriber.ownWake))
        let value3 = try reader.peek().get()
        #expect(value3?.message == [1, 0, 0, 0, 8, 0, 0, 0])
        reader.advance()
        let value4 = try reader.peek().get()
        #expect(value4 == nil)
        // Now it says it sleeps (nothing new): the next commit wakes it.
        let value5 = try reader.prepareToSleep().get()
        #expect(value5 == true)
        let value6 = writer.append([2, 0, 0, 0, 8, 0, 0, 0], controlCount: 1)
        #expect(value6 == .success(true))
        let value7 = writer.commit()
        #expect(value7 == .wokePeer)
        #expect(Self.isReadable(subscriber.ownWake))
        let value8 = reader.wokeUp()
        #expect(value8)
        #expect(!Self.isReadable(subscriber.ownWake))
        let value9 = try reader.peek().get()
        #expect(value9 == RingEntry(controlCount: 1, message: [2, 0, 0, 0, 8, 0, 0, 0]))
    }

    /// Counts the wake-up datagrams waiting on `wake`, reading them one at a time (the subscriber's drain).
    static func pendingWakeUps(_ wake: WakeSocket) -> Int {
        var count = 0
        while isReadable(wake), wake.drain(limit: 1) { count += 1 }
        return count
    }

    @Test func aLazyReaderIsWokenOnceWhenTheThresholdIsReachedAndAgainOnlyAfterItCaughtUp() throws {
        // The release ring's rule (PROTOCOL.md §9.5): the publisher does not say it sleeps, yet is woken once when
        // `threshold` releases wait unread, not for each one.
        let (publisher, subscriber) = try Self.pair()
        let threshold = 4
        var writer = RingWriter(channel: subscriber, wakeThreshold: threshold)
        var reader = RingReader(channel: publisher)
        func release(_ count: Int) {
            for _ in 0..<count {
                let appended = writer.append([9, 0, 0, 0, 8, 0, 0, 0])
                #expect(appended == .success(true))
                let committed = writer.commit()
                #expect(committed != .wakeFailed)
            }
        }
        release(threshold - 1)
        #expect(Self.pendingWakeUps(publisher.ownWake) == 0, "below the threshold nobody is woken")
        release(1)
        #expect(Self.pendingWakeUps(publisher.ownWake) == 1, "reaching it wakes the reader once")
        release(threshold)
        #expect(Self.pendingWakeUps(publisher.ownWake) == 0, "more unread releases do not wake it again")
        // The reader catches up; the writer sees it at its next append, and the rule starts over.
        while case .success(.some) = reader.peek() { reader.advance() }
        let published = reader.publishHead()
        #expect(published)
        release(threshold - 1)
        #expect(Self.pendingWakeUps(publisher.ownWake) == 0)
        release(1)
        #expect(Self.pendingWakeUps(publisher.ownWake) == 1)
        // A reader that says it sleeps is woken by every commit, as before.
        while case .success(.some) = reader.peek() { reader.advance() }
        let publishedAgain = reader.publishHead()
        #expect(publishedAgain)
        let sleeps = try reader.prepareToSleep().get()
        #expect(sleeps == true)
        release(2)
        #expect(Self.pendingWakeUps(publisher.ownWake) == 2)
    }

    @Test func aDisarmedPublisherIsNotWokenForAReleaseButReapsItWhenItNextLooks() throws {
        let (publisher, subscriber) = try Self.pair()
        let rings = PublisherRings(channel: publisher)
        let releases = ReleaseRing(channel: subscriber)
        let message = WireMessage.release(WireRelease(sequence: 7, surfaceID: 3, flags: 0)).encoded()
        // Armed (the loop thread sleeps waiting for releases): a release wakes it.
        #expect(try rings.prepareToSleep().get() == true)
        rings.isArmed = true
        #expect(releases.send(message) == .sent)
        #expect(Self.pendingWakeUps(publisher.ownWake) == 1)
        var reaped: [RingEntry] = []
        #expect(rings.drainReleases(limit: RingLayout.slotCount) { reaped.append($0); return true } == nil)
        #expect(reaped.map(\.message) == [message])
        // Publishing disarms it: the next releases cost the subscriber no system call and wake nobody, and the
        // next look at the ring (the next publish) reaps them, each copied once.
        #expect(try rings.prepareToSleep().get() == true)
        rings.isArmed = true
        #expect(rings.disarm())
        #expect(!rings.disarm(), "disarming twice changes nothing")
        for _ in 0..<3 { #expect(releases.send(message) == .sent) }
        #expect(Self.pendingWakeUps(publisher.ownWake) == 0)
        reaped.removeAll()
        #expect(rings.drainReleases(limit: RingLayout.slotCount) { reaped.append($0); return true } == nil)
        #expect(reaped.count == 3)
        // Past the threshold a disarmed publisher is still woken, once.
        for _ in 0..<ReleaseRing.wakeThreshold { #expect(releases.send(message) == .sent) }
        #expect(Self.pendingWakeUps(publisher.ownWake) == 1)
    }

    @Test func aFullRingWaitsForRoomAndTheReaderWakesTheWriter() throws {
        let (publisher, subscriber) = try Self.pair()
        var writer = RingWriter(channel: publisher)
        var reader = RingReader(channel: subscriber)
        for _ in 0..<RingLayout.slotCount {
            let appended = writer.append([3, 0, 0, 0, 8, 0, 0, 0])
            #expect(appended == .success(true))
        }
        let value10 = writer.append([3, 0, 0, 0, 8, 0, 0, 0])
        #expect(value10 == .success(false))
        let value11 = writer.commit()
        #expect(value11 != .wakeFailed)
        let value12 = writer.waitForRoom()
        #expect(value12 == .success(true))
        _ = try reader.peek().get()
        reader.advance()
        let value13 = reader.publishHead()
        #expect(value13)
        #expect(Self.isReadable(publisher.ownWake), "the reader woke the writer that waited for room")
        let value14 = writer.append([3, 0, 0, 0, 8, 0, 0, 0])
        #expect(value14 == .success(true))
    }

    @Test func aTailFromNowhereIsAViolationNotATrap() throws {
        let (publisher, subscriber) = try Self.pair()
        var reader = RingReader(channel: subscriber)
        publisher.own.store(.max, RingLayout.tailOffset)
        let value15 = reader.peek()
        #expect((try? value15.get()) == nil)
        let value16 = reader.prepareToSleep()
        #expect((try? value16.get()) == nil)
        publisher.own.store(1, RingLayout.tailOffset)
        publisher.own.scribble(offset: RingLayout.headerSize, [UInt8](repeating: 0xFF, count: RingLayout.slotSize))
        let value17 = reader.peek()
        #expect((try? value17.get()) == nil, "slot length 0xFFFFFFFF")
    }

    @Test func thePeerCanOnlyMapOurRingReadOnly() throws {
        let half = try RingChannel.Half(role: .announce)
        let seals = try Syscall.seals(half.ring.descriptor).get()
        #expect(seals == 0x17, "seal, shrink, grow and future-write seals: 0x\(String(seals, radix: 16))")
        let writable = Syscall.mapShared(half.ring.descriptor, byteCount: RingLayout.byteCount, writable: true)
        #expect((try? writable.get()) == nil, "a second writable mapping is refused")
    }

    @Test func anUnsealedFileOrANonDatagramSocketIsRefused() throws {
        let memfd = try Syscall.memfdCreate(name: "unsealed", flags: 1).get()
        _ = Syscall.truncate(memfd, byteCount: RingLayout.byteCount)
        #expect(throws: FrameBusError.self) { _ = try RingMapping.importing(memfd, role: .release) }
        let half = try RingChannel.Half(role: .announce)
        let other = try RingChannel.Half(role: .release)
        func refusedAsWake(_ wake: FileDescriptor) -> Bool {
            do {
                _ = try half.joining(
                    peerRing: Self.duplicate(other.descriptors[0]),
                    peerWake: wake,
                    peerRole: .release
                )
                return false
            } catch let error as FrameBusError {
                return error.code == .protocolViolation
                    && error.message == "the wake-up descriptor is not a datagram socket"
            } catch {
                return false
            }
        }
        // The ring file (a memfd) where the wake-up socket belongs.
        #expect(refusedAsWake(try Self.duplicate(other.descriptors[0])))
        // A Unix stream socket.
        var stream: [Int32] = [-1, -1]
        #expect(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &stream) == 0)
        defer { close(stream[1]) }
        #expect(refusedAsWake(FileDescriptor(rawValue: stream[0])))
        // A datagram socket that is not a Unix one.
        let inet = socket(AF_INET, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        #expect(inet >= 0)
        #expect(refusedAsWake(FileDescriptor(rawValue: inet)))
        // The end B of a real wake-up pair is accepted.
        #expect(!refusedAsWake(try Self.duplicate(other.descriptors[1])))
        // A ring of the wrong role.
        #expect(throws: FrameBusError.self) {
            _ = try half.joining(
                peerRing: Self.duplicate(half.descriptors[0]),
                peerWake: Self.duplicate(other.descriptors[1]),
                peerRole: .release
            )
        }
    }

    /// Runs `body` on a thread of its own; its result, or nil if it has not returned within `seconds` (the thread is
    /// then left blocked: the test has failed anyway).
    static func onThread(
        withinSeconds seconds: Int = 10,
        _ body: @escaping @Sendable () -> Bool
    ) async -> Bool? {
        let slot = Mutex<CheckedContinuation<Bool?, Never>?>(nil)
        return await withCheckedContinuation { continuation in
            slot.withLock { $0 = continuation }
            Thread {
                let result = body()
                slot.withLock { $0.take() }?.resume(returning: result)
            }.start()
            DispatchQueue.global().asyncAfter(deadline: .now() + .seconds(seconds)) {
                slot.withLock { $0.take() }?.resume(returning: nil)
            }
        }
    }

    static func clearNonBlocking(_ descriptor: Int32) -> Bool {
        let flags = fcntl(descriptor, F_GETFL)
        return flags >= 0 && fcntl(descriptor, F_SETFL, flags & ~O_NONBLOCK) == 0
            && fcntl(descriptor, F_GETFL) & O_NONBLOCK == 0
    }

    @Test func aPeerThatClearsONonBlockCannotBlockSignalOrDrain() async throws {
        let (publisher, subscriber) = try Self.pair()
        // The subscriber (hostile here) clears O_NONBLOCK on the end B it handed out: the open file the publisher
        // sends on is the same, so the publisher's descriptor is now blocking too. It clears it on its end A as well.
        let handedOut = try Self.duplicate(subscriber.ownWake.handedOutEnd).rawValue
        defer { close(handedOut) }
        #expect(Self.clearNonBlocking(handedOut))
        #expect(Self.clearNonBlocking(subscriber.ownWake.descriptor))
        #expect(fcntl(publisher.peerWake.descriptor, F_GETFL) & O_NONBLOCK == 0, "the flag is shared")
        // Then it never drains: fill its queue until the kernel refuses more without waiting.
        var one: UInt8 = 1
        var queued = 0
        while queued < 100_000, send(handedOut, &one, 1, Int32(MSG_DONTWAIT) | Int32(MSG_NOSIGNAL)) == 1 {
            queued += 1
        }
        let full = errno == EAGAIN || errno == ENOBUFS
        #expect(full && queued > 0 && queued < WakeSocket.drainLimit, "queued \(queued), errno \(errno)")
        // A blocking send would now wait for room forever; ours returns at once, and counts as a wake-up.
        let signalled = await Self.onThread { publisher.peerWake.signal() }
        #expect(signalled == true)
        #expect(Self.isReadable(subscriber.ownWake))
        // Draining reads what is queued and stops at EAGAIN although the descriptor is blocking.
        let drained = await Self.onThread { subscriber.ownWake.drain() }
        #expect(drained == true)
        #expect(!Self.isReadable(subscriber.ownWake))
        // An empty blocking descriptor: a blocking recv would wait forever; ours returns at once.
        let drainedEmpty = await Self.onThread { subscriber.ownWake.drain() }
        #expect(drainedEmpty == true)
        // Wake-ups still work afterwards.
        #expect(publisher.peerWake.signal())
        #expect(Self.isReadable(subscriber.ownWake))
    }
}
