import Atomics
import FrameBus
import Surfaces
import SystemPackage
import Foundation

/// Entry points for the ring fuzzer and the concurrent-writer harness (Fuzz/Rings): real ring files, mapped as a
/// publisher and a subscriber map them, with hostile contents. Not for applications.
public enum RingFuzzing {
    /// What one input did (for the fuzzer's invariants).
    public struct Outcome: Hashable, Sendable {
        /// Slots the subscriber side handed to its state machine.
        public var subscriberEntries = 0
        /// Slots the publisher side handed to its state machine.
        public var publisherEntries = 0
        public var subscriberEnded = false
        public var publisherEnded = false
    }

    /// Writes `input` into both ring files as a hostile peer would (a tail, a head, then raw slots), and runs both
    /// readers over them: the subscriber's (announce ring → ``SubscriberStateMachine``) and the publisher's (release
    /// ring → ``PublisherStateMachine``, for a subscriber that holds frames 0…3). Traps on a broken invariant.
    ///
    /// Layout of `input`: u64 announce tail, u64 release tail, u64 release ring's head of the announce ring, then
    /// slots of 128 bytes, alternately for the announce and the release ring (a short last slot is zero-padded).
    public static func run(_ input: [UInt8]) -> Outcome {
        var outcome = Outcome()
        guard let (publisherSide, subscriberSide) = try? pair() else { return outcome }
        func u64(_ index: Int) -> UInt64 {
            var value: UInt64 = 0
            for offset in (0..<8).reversed() where index * 8 + offset < input.count {
                value = value << 8 | UInt64(input[index * 8 + offset])
            }
            return value
        }
        var slots = input.count > 24 ? Array(input[24...]) : []
        var index: UInt64 = 0
        while !slots.isEmpty {
            var slot = Array(slots.prefix(RingLayout.slotSize))
            slots.removeFirst(slot.count)
            slot += [UInt8](repeating: 0, count: RingLayout.slotSize - slot.count)
            let own = index % 2 == 0 ? publisherSide.own : subscriberSide.own
            own.scribble(offset: RingLayout.headerSize + Int((index / 2) % UInt64(RingLayout.slotCount)) * 128, slot)
            index += 1
        }
        // Small tails most of the time, so slots are read; any value sometimes.
        let announceTail = u64(0) & 0x8000_0000_0000_0000 != 0 ? u64(0) : u64(0) % 300
        let releaseTail = u64(1) & 0x8000_0000_0000_0000 != 0 ? u64(1) : u64(1) % 300
        publisherSide.own.store(announceTail, RingLayout.tailOffset)
        subscriberSide.own.store(releaseTail, RingLayout.tailOffset)
        subscriberSide.own.store(u64(2), RingLayout.peerHeadOffset)

        // The subscriber's side: an active version-3 session with surface 1 announced, as SubscriberConnection runs.
        var machine = SubscriberStateMachine(
            acceptedFormats: [.yuv420BiPlanarVideoRange8],
            delivery: .queue(depth: 4)
        )
        _ = machine.connected(offeringRings: true)
        _ = machine.received(
            .welcome(
                WireWelcome(
                    version: 3, deliveryMode: 1, queueDepth: 4, maximumHeldFrames: 8,
                    format: PixelFormat.yuv420BiPlanarVideoRange8.fourCC, maximumMessageSize: 4096, streamID: 1,
                    subscriberID: 1, nextSequence: 0, maximumAnnouncedSurfaces: 16
                )
            )
        )
        var reader = RingReader(channel: subscriberSide)
        var held = 0
        reading: for _ in 0..<RingLayout.slotCount + 1 {
            switch reader.peek() {
            case .failure, .success(nil): break reading
            case .success(let entry?):
                reader.advance()
                outcome.subscriberEntries += 1
                switch machine.receivedFromRing(entry.message, heldFrames: held) {
                case .close: outcome.subscriberEnded = true
                case .deliverFrame: held += 1
                default: break
                }
                if outcome.subscriberEnded { break reading }
            }
        }
        // Futex wake-ups (§9.8): the hostile publisher's wake count and `controlSent` (from the tails' bits), read by
        // a subscriber going to sleep; a sleep that would block is not taken (the words only decide whether to).
        publisherSide.own.store32(UInt32(truncatingIfNeeded: u64(0) >> 16), RingLayout.wakeCountOffset)
        publisherSide.own.store(u64(1) >> 8, RingLayout.controlSentOffset)
        if case .success(_?) = reader.prepareToSleepOnFutex(hasNews: { $0 != 0 && $0 != u64(2) }) {
            // Allowed to sleep only with nothing to read: nobody writes the files meanwhile in this single thread.
            if case .success(_?) = reader.peek() { preconditionFailure("would sleep with a message waiting") }
        }
        reader.clearSleeping()
        precondition(outcome.subscriberEntries <= RingLayout.slotCount, "read more than a ring of slots")
        precondition(held <= 8, "held \(held) frames past maximumHeldFrames 8")

        // The publisher's side: subscriber 1 (version 3) holds frames 0…3 on surface 5.
        var publisher = PublisherStateMachine<Int>(
            limits: .accepting(formats: [PixelFormat.yuv420BiPlanarVideoRange8.fourCC], allowedUserIDs: [0]),
            streamID: 1
        )
        publisher.learnPoolCapacity(64)
        let id = publisher.connectionAccepted(.peer(processID: 1, userID: 0), now: 0)
        _ = publisher.received(
            WireMessage.hello(
                WireHello(version: 3, deliveryMode: 1, queueDepth: 4, formats: [PixelFormat.yuv420BiPlanarVideoRange8.fourCC])
            ).encoded(),
            descriptorCount: 2, isTruncated: false, from: id, rings: .ready, now: 0
        )
        precondition(publisher.sessionVersion(of: id) == 3, "no version-3 session")
        let surface = WireSurface(
            surfaceID: 5, pixelFormat: PixelFormat.yuv420BiPlanarVideoRange8.fourCC, width: 4, height: 2,
            backing: .memfd, descriptorByteCounts: [12],
            planes: [
                WireSurfacePlane(offset: 0, bytesPerRow: 4, width: 4, height: 2, bytesPerElement: 1),
                WireSurfacePlane(offset: 8, bytesPerRow: 4, width: 2, height: 1, bytesPerElement: 2),
            ]
        )
        for _ in 0..<4 {
            guard let plan = publisher.beginFrame(format: surface.pixelFormat, width: 4, height: 2, discontinuity: false)
            else { break }
            _ = publisher.deliver(
                WireFrame(
                    sequence: plan.sequence, surfaceID: 0, presentationTime: .invalid, duration: .invalid,
                    publishTime: 0, bytesUsed: 0, flags: 0
                ),
                format: surface.pixelFormat,
                representation: .frame(surfaceID: 5, surface: surface, surfaceV1: nil, bytesUsed: 12, resource: 5),
                isConversion: false,
                now: 0
            )
        }
        let heldBefore = publisher.heldFrameCount
        let rings = PublisherRings(channel: publisherSide)
        // As when frames are being published: not armed, the ring reaped by the next publish (§9.5).
        _ = rings.disarm()
        let violation = rings.drainReleases(limit: RingLayout.slotCount + 1) { entry in
            outcome.publisherEntries += 1
            _ = publisher.receivedFromRing(entry, from: id, now: 1)
            return publisher.sessionVersion(of: id) != nil
        }
        // What Publisher.serviceRings does with a violation: that session ends.
        if let violation { _ = publisher.ringViolation(violation, from: id, now: 1) }
        outcome.publisherEnded = violation != nil || publisher.sessionVersion(of: id) == nil
        precondition(outcome.publisherEntries <= RingLayout.slotCount, "read more than a ring of slots")
        precondition(publisher.heldFrameCount <= heldBefore, "a release ring made the publisher hold more")
        if outcome.publisherEnded { precondition(publisher.heldFrameCount == 0, "an ended session still holds") }
        // And the publisher's writer reads the subscriber's (hostile) head without trapping.
        let appended = rings.append(
            .drop(WireDrop(firstSequence: 9, lastSequence: 9, reason: WireDropReason.outOfBuffers.rawValue))
        )
        _ = appended
        return outcome
    }

    /// Seeds: well-formed slots of every kind.
    public static func seeds() -> [[UInt8]] {
        func u64(_ value: UInt64) -> [UInt8] { (0..<8).map { UInt8(truncatingIfNeeded: value >> (8 * UInt64($0))) } }
        let frame = WireMessage.frame(
            WireFrame(
                sequence: 0, surfaceID: 1, presentationTime: .invalid, duration: .invalid, publishTime: 0,
                bytesUsed: 0, flags: 0
            )
        ).encoded()
        let release = WireMessage.release(WireRelease(sequence: 1, surfaceID: 5, flags: 0)).encoded()
        let drop = WireMessage.drop(WireDrop(firstSequence: 1, lastSequence: 2, reason: 2)).encoded()
        return [
            u64(1) + u64(1) + u64(0) + RingLayout.slot(controlCount: 0, message: frame)
                + RingLayout.slot(controlCount: 0, message: release),
            u64(2) + u64(2) + u64(0) + RingLayout.slot(controlCount: 0, message: frame)
                + RingLayout.slot(controlCount: 0, message: release) + RingLayout.slot(controlCount: 0, message: drop)
                + RingLayout.slot(controlCount: 0, message: release),
            u64(.max) + u64(300) + u64(.max),
        ]
    }

    /// Two joined channels in this process, as a publisher and a subscriber would hold them.
    static func pair() throws(FrameBusError) -> (publisher: RingChannel, subscriber: RingChannel) {
        let publisherHalf = try RingChannel.Half(role: .announce)
        let subscriberHalf = try RingChannel.Half(role: .release)
        func dup(_ descriptor: Int32) throws(FrameBusError) -> FileDescriptorBox {
            try FileDescriptorBox.duplicating(descriptor)
        }
        let publisher = try publisherHalf.joining(
            peerRing: dup(subscriberHalf.descriptors[0]).fd,
            peerWake: dup(subscriberHalf.descriptors[1]).fd,
            peerRole: .release
        )
        let subscriber = try subscriberHalf.joining(
            peerRing: dup(publisherHalf.descriptors[0]).fd,
            peerWake: dup(publisherHalf.descriptors[1]).fd,
            peerRole: .announce
        )
        return (publisher, subscriber)
    }

    /// The concurrent-writer harness: for `seconds`, a hostile thread rewrites every counter and slot of its ring
    /// files (tails, heads, flags, slot bytes) while this thread runs the real readers and writers against them, in
    /// both directions (publisher reading releases and writing announcements; subscriber reading announcements and
    /// writing releases). Returns how many rounds ran; traps (or AddressSanitizer reports) on any bad access.
    public static func race(seconds: Double) -> Int {
        guard let (publisherSide, subscriberSide) = try? pair() else { return 0 }
        let stop = ManagedAtomic<Bool>(false)
        let hostile = Thread {
            var generator = SystemRandomNumberGenerator()
            while !stop.load(ordering: .relaxed) {
                for side in [publisherSide, subscriberSide] {
                    let choice = UInt8.random(in: 0...7, using: &generator)
                    switch choice {
                    case 0: side.own.store(UInt64.random(in: 0...600, using: &generator), RingLayout.tailOffset)
                    case 1: side.own.store(.random(in: 0...UInt64.max, using: &generator), RingLayout.tailOffset)
                    case 2: side.own.store(UInt64.random(in: 0...600, using: &generator), RingLayout.peerHeadOffset)
                    case 3: side.own.store(UInt64.random(in: 0...1, using: &generator), RingLayout.sleepingOffset)
                    // Futex wake-ups (§9.8): the wake count and `controlSent`, any value, at any moment.
                    case 4: side.own.store32(.random(in: 0...UInt32.max, using: &generator), RingLayout.wakeCountOffset)
                    case 5: side.own.store(.random(in: 0...UInt64.max, using: &generator), RingLayout.controlSentOffset)
                    default:
                        let slot = Int.random(in: 0..<RingLayout.slotCount, using: &generator)
                        let bytes = (0..<RingLayout.slotSize).map { _ in UInt8.random(in: 0...255, using: &generator) }
                        side.own.scribble(offset: RingLayout.headerSize + slot * RingLayout.slotSize, bytes)
                    }
                }
            }
        }
        hostile.start()
        let deadline = Date().addingTimeInterval(seconds)
        var rounds = 0
        let release = WireMessage.release(WireRelease(sequence: 1, surfaceID: 5, flags: 0)).encoded()
        while Date() < deadline {
            // Each direction's reader and writer, exactly as the IO layers use them.
            var announceReader = RingReader(channel: subscriberSide)
            var releaseReader = RingReader(channel: publisherSide)
            var announceWriter = RingWriter(channel: publisherSide)
            // The subscriber's release writer wakes a lazily reaping publisher past its threshold (§9.5), reading the
            // hostile head into that arithmetic too.
            var releaseWriter = RingWriter(channel: subscriberSide, wakeThreshold: ReleaseRing.wakeThreshold)
            for _ in 0..<64 {
                if case .success(let entry?) = announceReader.peek() {
                    announceReader.advance()
                    precondition(entry.message.count <= RingLayout.maximumMessageLength)
                    _ = try? WireMessage.decode(entry.message, descriptorCount: 0)
                }
                if case .success(let entry?) = releaseReader.peek() {
                    releaseReader.advance()
                    _ = try? WireMessage.decode(entry.message, descriptorCount: 0)
                }
                _ = announceWriter.append(release)
                _ = releaseWriter.append(release)
                _ = announceWriter.commit()
                _ = releaseWriter.commit()
                _ = announceReader.publishHead()
                _ = releaseReader.prepareToSleep()
                // The subscriber going to sleep on the futex reads the hostile wake count, tail and `controlSent`.
                _ = announceReader.prepareToSleepOnFutex(hasNews: { $0 != 0 })
                announceReader.clearSleeping()
            }
            rounds += 1
        }
        stop.store(true, ordering: .relaxed)
        while !hostile.isFinished { usleep(1000) }
        return rounds
    }
}

/// A duplicated descriptor, for joining two halves inside one process.
struct FileDescriptorBox {
    let fd: FileDescriptor

    static func duplicating(_ descriptor: Int32) throws(FrameBusError) -> FileDescriptorBox {
        switch Syscall.duplicate(FileDescriptor(rawValue: descriptor)) {
        case .success(let fd): return FileDescriptorBox(fd: fd)
        case .failure(let errno): throw .systemCall("dup", errno)
        }
    }
}
