import Foundation
import FrameBusTesting
import TestSupport
import Testing

@testable import FrameBus

/// docs/PROTOCOL.md Appendix B, read from the document itself: the version-3 HELLO and WELCOME, a new ring file's
/// header, one slot of each ring, and the counters of both ring files through a short exchange. Each vector is
/// produced by the library (encoder, ring file creation, ring writers) and read back by it (decoder, ring readers),
/// so the document cannot drift from the code.
@Suite(.timeLimit(.minutes(5))) struct ProtocolV3VectorsTests {
    /// Appendix B's text, from its heading to the next appendix.
    static func appendix() throws -> String { try section("## Appendix B. Version-3 examples\n") }

    /// The bytes of every fenced block of Appendix B, in order.
    static func blocks() throws -> [[UInt8]] {
        let parts = try appendix().components(separatedBy: "```")
        // Fences alternate: text, block, text, block, ...
        return stride(from: 1, to: parts.count, by: 2).map { hexBytes(parts[$0]) }
    }

    /// The rows of B.4's table: the cells of each line whose first cell is a step number.
    static func steps() throws -> [[String]] {
        try appendix().split(separator: "\n").compactMap { line -> [String]? in
            guard line.hasPrefix("| ") else { return nil }
            let cells = line.split(separator: "|", omittingEmptySubsequences: false).dropFirst().dropLast()
                .map { $0.trimmingCharacters(in: .whitespaces) }
            guard let first = cells.first, !first.isEmpty, first.allSatisfy(\.isASCII), first.allSatisfy(\.isNumber)
            else { return nil }
            return Array(cells)
        }
    }

    /// The text of the appendix whose heading starts with `heading`, up to the next `## ` heading.
    static func section(_ heading: String) throws -> String {
        let url = TestLocations.packageRoot.appendingPathComponent("docs/PROTOCOL.md")
        let text = try String(contentsOf: url, encoding: .utf8)
        guard let start = text.range(of: "\n" + heading) else {
            throw TestSupportError("docs/PROTOCOL.md has no \(heading)")
        }
        let rest = text[start.upperBound...]
        let end = rest.range(of: "\n## ")?.lowerBound ?? rest.endIndex
        return String(rest[..<end])
    }

    static let nv12: UInt32 = 0x3432_3076

    static let hello = WireMessage.hello(
        WireHello(version: 3, deliveryMode: 1, queueDepth: 4, flags: WireHello.acceptsDMABufFlag, formats: [nv12])
    )
    static let welcome = WireMessage.welcome(
        WireWelcome(
            version: 3,
            deliveryMode: 1,
            queueDepth: 4,
            maximumHeldFrames: 6,
            format: nv12,
            maximumMessageSize: 4096,
            streamID: 0x0123_4567_89AB_CDEF,
            subscriberID: 5,
            nextSequence: 0,
            maximumAnnouncedSurfaces: 64
        )
    )
    static func frame(_ sequence: UInt64) -> WireFrame {
        WireFrame(
            sequence: sequence,
            surfaceID: 7,
            presentationTime: WireTime(value: Int64(sequence) * 1500, timescale: 90000, flags: 1),
            duration: WireTime(value: 1500, timescale: 90000, flags: 1),
            publishTime: 1_000_000 + sequence * 16_666_667,
            bytesUsed: 12,
            flags: sequence == 0 ? 2 : 0,
            attachments: (1, 1, 1, 1)
        )
    }
    static let release = WireRelease(sequence: 0, surfaceID: 7, flags: 0)

    @Test func theAppendixHasItsFiveBlocksAndItsEightSteps() throws {
        #expect(try Self.blocks().map(\.count) == [28, 56, 16, RingLayout.slotSize, RingLayout.slotSize])
        #expect(try Self.steps().map { $0[0] } == (0...7).map(String.init))
    }

    /// Appendix A's blocks are the bytes `WireMessageTests` checks the encoder and decoder against, so that appendix
    /// cannot drift either (RETIRE_SURFACE and GOODBYE share one block).
    @Test func appendixAHoldsTheBytesTheWireTestsCheck() throws {
        let parts = try Self.section("## Appendix A. Example datagrams").components(separatedBy: "```")
        let blocks = stride(from: 1, to: parts.count, by: 2).map { hexBytes(parts[$0]) }
        let vectors = GoldenVectors.self
        #expect(
            blocks == [
                vectors.helloV2, vectors.helloV1, vectors.helloMonitor, vectors.welcomeV2, vectors.error,
                vectors.surface, vectors.frame, vectors.drop, vectors.endOfStream, vectors.release,
                vectors.retire + vectors.goodbye, vectors.monitorReport,
            ]
        )
    }

    @Test func theVersionThreeHelloAndWelcomeAreTheEncodersBytesAndDecodeToTheirMessages() throws {
        let blocks = try Self.blocks()
        for (bytes, message) in [(blocks[0], Self.hello), (blocks[1], Self.welcome)] {
            #expect(message.encoded() == bytes)
            #expect(message.descriptorCount == 2)
            #expect(try WireMessage.decode(bytes, descriptorCount: 2) == message)
            // "The same bytes with 0 fds are malformed (a missing descriptor); so is either with any fd count other
            // than 2."
            for count in [0, 1, 3, 4] {
                do {
                    _ = try WireMessage.decode(bytes, descriptorCount: count)
                    Issue.record("\(message.type.name) with \(count) fds decoded")
                } catch {
                    #expect(error.kind == (count < 2 ? .missingDescriptor : .unexpectedDescriptors))
                }
            }
        }
    }

    @Test func aNewRingFileHasTheDocumentsHeaderAndNothingElse() throws {
        let header = try Self.blocks()[2]
        let half = try RingChannel.Half(role: .announce)
        let file = half.ring.copy(offset: 0, count: RingLayout.byteCount)
        #expect(Array(file[0..<16]) == header)
        #expect(RingLayout.header(role: .announce) == header)
        #expect(file[16...].allSatisfy { $0 == 0 }, "bytes 16–36 863 of a new ring file are 0")
        // The reader's checks: accepted as an announce ring, refused as a release ring; the release ring's header
        // differs only in byte 6 (§9.2's example).
        #expect(RingLayout.checkHeader(header, role: .announce) == nil)
        #expect(RingLayout.checkHeader(header, role: .release) != nil)
        var release = header
        release[6] = 2
        #expect(RingLayout.header(role: .release) == release)
        #expect(release == hexBytes("47 52 42 46 03 00 02 00 00 01 00 00 80 00 00 00"))
        // And a peer importing the file (sealed, sized, this header) maps it.
        let imported = try RingMapping.importing(RingChannelTests.duplicate(half.descriptors[0]), role: .announce)
        #expect(imported.copy(offset: 0, count: 16) == header)
    }

    /// §9.8 and B.2: the offer is bit 0 of the release ring's `wakeKinds` (offset 16), the answer the same bit of the
    /// announce ring's, written at the join, before WELCOME; either side without it leaves both at 0.
    @Test func theFutexOfferAndAnswerAreTheDocumentsHeaderBytes() throws {
        let text = try Self.appendix()
        let documented = hexBytes("47 52 42 46 03 00 02 00 00 01 00 00 80 00 00 00 01 00 00 00")
        #expect(text.contains("`47 52 42 46 03 00 02 00 00 01 00 00 80 00 00 00 01 00 00 00`"))
        for (offers, accepts) in [(true, true), (true, false), (false, true)] {
            let subscriberHalf = try RingChannel.Half(role: .release, futexWake: offers)
            let publisherHalf = try RingChannel.Half(role: .announce, futexWake: accepts)
            let offered = offers && Syscall.hasFutexWaitv
            let releaseHeader = subscriberHalf.ring.copy(offset: 0, count: 20)
            if offered {
                #expect(releaseHeader == documented)
            } else {
                #expect(releaseHeader[16..<20].allSatisfy { $0 == 0 })
            }
            let publisher = try publisherHalf.joining(
                peerRing: RingChannelTests.duplicate(subscriberHalf.descriptors[0]),
                peerWake: RingChannelTests.duplicate(subscriberHalf.descriptors[1]),
                peerRole: .release
            )
            let answer: [UInt8] = offered && accepts ? [1, 0, 0, 0] : [0, 0, 0, 0]
            #expect(publisherHalf.ring.copy(offset: 16, count: 4) == answer)
            let subscriber = try subscriberHalf.joining(
                peerRing: RingChannelTests.duplicate(publisherHalf.descriptors[0]),
                peerWake: RingChannelTests.duplicate(publisherHalf.descriptors[1]),
                peerRole: .announce
            )
            #expect(publisher.usesFutexWake == (offered && accepts))
            #expect(subscriber.usesFutexWake == (offered && accepts))
            #expect(publisher.wakesPeerByFutex == (offered && accepts) && !subscriber.wakesPeerByFutex)
        }
    }

    @Test func theRingWritersProduceTheDocumentsSlotsAndTheReadersReadThemAsStated() throws {
        let blocks = try Self.blocks()
        let (frameSlot, releaseSlot) = (blocks[3], blocks[4])
        let (publisher, subscriber) = try RingChannelTests.pair()
        // The publisher sent WELCOME and one SURFACE, then writes FRAME 0 into the announce ring.
        let rings = PublisherRings(channel: publisher)
        rings.sentOnSocket(Self.welcome)
        rings.sentOnSocket(try WireMessage.decode(GoldenVectors.surface, descriptorCount: 2))
        guard case .appended = rings.append(.frame(Self.frame(0))) else {
            Issue.record("the announce ring refused FRAME 0")
            return
        }
        #expect(rings.commit() == nil)
        #expect(subscriber.peer.copySlot(0) == frameSlot, "slot 0 of the publisher's file, as the subscriber sees it")
        #expect(RingLayout.slot(controlCount: 1, message: WireMessage.frame(Self.frame(0)).encoded()) == frameSlot)
        let frameEntry = try RingLayout.entry(frameSlot).get()
        #expect(frameEntry.controlCount == 1)
        #expect(try WireMessage.decode(frameEntry.message, descriptorCount: 0) == .frame(Self.frame(0)))

        // The subscriber releases it through its release ring.
        let releases = ReleaseRing(channel: subscriber)
        #expect(releases.send(WireMessage.release(Self.release).encoded()) == .sent)
        #expect(publisher.peer.copySlot(0) == releaseSlot, "slot 0 of the subscriber's file, as the publisher sees it")
        let releaseEntry = try RingLayout.entry(releaseSlot).get()
        #expect(releaseEntry.controlCount == 0)
        #expect(try WireMessage.decode(releaseEntry.message, descriptorCount: 0) == .release(Self.release))
        var reaped: [RingEntry] = []
        #expect(rings.drainReleases(limit: RingLayout.slotCount) { reaped.append($0); return true } == nil)
        #expect(reaped == [releaseEntry])

        // The bytes past the message are unspecified: a reader reads the same entry whatever they hold.
        var scribbled = frameSlot
        for index in (RingLayout.slotMessageOffset + 80)..<RingLayout.slotSize { scribbled[index] = 0xA5 }
        #expect(RingLayout.entry(scribbled) == .success(frameEntry))
    }

    /// Datagrams waiting on `wake` (one side's end A), counted without consuming them: read one at a time, then sent
    /// again through the other side's end B (`refill`), whose datagrams mean nothing but their arrival.
    static func waiting(_ wake: WakeSocket, refill: WakeSocket) -> Int {
        let count = RingChannelTests.pendingWakeUps(wake)
        for _ in 0..<count { _ = refill.signal() }
        return count
    }

    @Test func theWorkedExampleLeavesTheDocumentedCountersInBothRingFiles() throws {
        let table = try Self.steps()
        let (publisher, subscriber) = try RingChannelTests.pair()
        let rings = PublisherRings(channel: publisher)
        let announce = SubscriberRings(channel: subscriber)
        let releases = ReleaseRing(channel: subscriber)
        var readBySubscriber: [RingEntry] = []
        var reapedByPublisher: [RingEntry] = []

        func counters() -> [Int] {
            let offsets = [
                RingLayout.tailOffset, RingLayout.peerHeadOffset, RingLayout.sleepingOffset, RingLayout.wantsRoomOffset,
            ]
            // The announce file is the publisher's own, the release file the subscriber's own.
            return offsets.map { Int(publisher.own.load($0)) } + offsets.map { Int(subscriber.own.load($0)) } + [
                Self.waiting(subscriber.ownWake, refill: publisher.peerWake),
                Self.waiting(publisher.ownWake, refill: subscriber.peerWake),
            ]
        }
        func expectStep(_ step: Int, sourceLocation: SourceLocation = #_sourceLocation) {
            guard step < table.count, table[step].count == 13 else {
                Issue.record("B.4 has no 13-column row for step \(step)", sourceLocation: sourceLocation)
                return
            }
            let documented = table[step][3...].map { Int($0) ?? -1 }
            #expect(counters() == documented, "step \(step): \(table[step][2])", sourceLocation: sourceLocation)
        }

        // 0: after WELCOME and SURFACE 7, read by the subscriber.
        rings.sentOnSocket(Self.welcome)
        rings.sentOnSocket(try WireMessage.decode(GoldenVectors.surface, descriptorCount: 2))
        announce.controlReceived = 1
        expectStep(0)
        // 1: the subscriber finds the ring empty and says it sleeps.
        let sleeps = announce.reader.prepareToSleep()
        #expect(sleeps == .success(true))
        expectStep(1)
        // 2, 3: the publisher writes FRAME 0 and FRAME 1, each published and waking the sleeping subscriber.
        for sequence: UInt64 in [0, 1] {
            guard case .appended = rings.append(.frame(Self.frame(sequence))) else {
                Issue.record("the announce ring refused FRAME \(sequence)")
                return
            }
            #expect(rings.commit() == nil)
            expectStep(2 + Int(sequence))
        }
        // 4: the subscriber wakes (one recv), reads both slots (their control count is reached), publishes its head.
        #expect(RingChannelTests.isReadable(subscriber.ownWake))
        let woke = announce.reader.wokeUp(drainLimit: 1)
        #expect(woke)
        while case .success(let entry?) = announce.reader.peek(), entry.controlCount <= announce.controlReceived {
            readBySubscriber.append(entry)
            announce.reader.advance()
        }
        let published = announce.reader.publishHead()
        #expect(published)
        #expect(
            try readBySubscriber.map { try WireMessage.decode($0.message, descriptorCount: 0) }
                == [.frame(Self.frame(0)), .frame(Self.frame(1))]
        )
        #expect(readBySubscriber.map(\.controlCount) == [1, 1])
        expectStep(4)
        // 5: the subscriber releases frame 0 (the publisher is not asleep: no wake-up).
        #expect(releases.send(WireMessage.release(Self.release).encoded()) == .sent)
        expectStep(5)
        // 6: the publisher reaps before its next publish.
        #expect(rings.drainReleases(limit: RingLayout.slotCount) { reapedByPublisher.append($0); return true } == nil)
        #expect(
            try reapedByPublisher.map { try WireMessage.decode($0.message, descriptorCount: 0) }
                == [.release(Self.release)]
        )
        expectStep(6)
        // 7: nothing new; the subscriber says it sleeps, and the wake-up left from step 3 wakes it at once.
        let sleepsAgain = announce.reader.prepareToSleep()
        #expect(sleepsAgain == .success(true))
        #expect(RingChannelTests.isReadable(subscriber.ownWake), "a spurious wake-up is waiting")
        let wokeAgain = announce.reader.wokeUp(drainLimit: 1)
        #expect(wokeAgain)
        let nothing = try announce.reader.peek().get()
        #expect(nothing == nil)
        expectStep(7)
    }
}
