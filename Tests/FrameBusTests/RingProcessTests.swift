import Foundation
import FrameBusTesting
import TestSupport
import Testing

@testable import FrameBus

/// Protocol version 3 across processes (docs/PROTOCOL.md §9): real rings between a publisher and subscribers, and
/// peers that write garbage into the ring file only they can write. A hostile peer ends its own session with a
/// typed error; nobody traps, and an honest subscriber of the same publisher keeps its frames.
@Suite(.timeLimit(.minutes(5))) struct RingProcessTests {
    static func publisher(_ path: String) throws -> (Publisher, PixelBufferPool) {
        var configuration = Publisher.Configuration(path: path, formats: [.yuv420BiPlanarVideoRange8])
        configuration.heldFrameBudget = 32
        return (try Publisher(configuration: configuration), try PublisherFairnessTests.pool(threshold: 40))
    }

    static func subscriber(_ path: String, rings: Bool = true) throws -> Subscriber {
        var configuration = Subscriber.Configuration(
            path: path,
            acceptedFormats: [.yuv420BiPlanarVideoRange8],
            delivery: .queue(depth: 4)
        )
        configuration.connectTimeout = .seconds(120)
        configuration.usesSharedMemoryRings = rings
        return try Subscriber(configuration: configuration)
    }

    /// Collects frame checksums from `subscriber` until `count` frames came or the stream ended.
    static func collect(_ subscriber: Subscriber, count: Int) async throws -> (sums: [UInt64: UInt64], end: FrameBusError?) {
        var sums: [UInt64: UInt64] = [:]
        for try await event in subscriber.events {
            switch event {
            case .frame(let sample):
                let buffer = try #require(sample.imageBuffer)
                let bytes = try buffer.withLock(.readOnly) { try buffer.packedBytes() }
                sums[sample.busSequenceNumber ?? .max] = fnv1a(bytes)
                if sums.count >= count { return (sums, nil) }
            case .ended(let error): return (sums, error)
            default: break
            }
        }
        return (sums, nil)
    }

    @Test func ringAndSocketSubscribersGetTheSameBitExactFramesFromOnePublisher() async throws {
        let path = temporaryBusPath("rings")
        let (publisher, pool) = try Self.publisher(path)
        defer { publisher.stop() }
        let ringSubscriber = try Self.subscriber(path)
        let socketSubscriber = try Self.subscriber(path, rings: false)
        defer {
            ringSubscriber.cancel()
            socketSubscriber.cancel()
        }
        // The publisher counts a subscriber when it sends WELCOME; the subscriber has a session once it read it.
        #expect(
            await eventually {
                publisher.subscriberCount == 2 && ringSubscriber.session != nil && socketSubscriber.session != nil
            }
        )
        #expect(ringSubscriber.session?.protocolVersion == 3)
        #expect(socketSubscriber.session?.protocolVersion == 2)
        async let ringFrames = Self.collect(ringSubscriber, count: 40)
        async let socketFrames = Self.collect(socketSubscriber, count: 40)
        let producer = PacedProducer(publisher: publisher, pool: pool, fps: 200)
        let (ring, socket) = try await (ringFrames, socketFrames)
        producer.stop()
        #expect(ring.end == nil && socket.end == nil, "\(String(describing: ring.end)) \(String(describing: socket.end))")
        #expect(ring.sums.count == 40 && socket.sums.count == 40)
        // Every frame both received has the same bytes. Which frames each one gets depends on how the machine
        // schedules them (queue depth 4 at 200 fps: a loaded CI runner shared only 15 of 40), so only ask for some.
        for (sequence, sum) in ring.sums { if let other = socket.sums[sequence] { #expect(sum == other) } }
        #expect(!Set(ring.sums.keys).intersection(socket.sums.keys).isEmpty)
    }

    @Test(arguments: ["release-garbage", "release-unheld", "tail-jump", "head-jump"])
    func aSubscriberWritingGarbageIntoItsReleaseRingEndsOnlyItself(_ scenario: String) async throws {
        let path = temporaryBusPath("ring-hostile-sub")
        let (publisher, pool) = try Self.publisher(path)
        defer { publisher.stop() }
        let honest = try Self.subscriber(path)
        defer { honest.cancel() }
        #expect(await eventually { publisher.subscriberCount == 1 })
        let producer = PacedProducer(publisher: publisher, pool: pool, fps: 100)
        defer { producer.stop() }
        let peer = try await startPeer(["ring-hostile-subscriber", path, scenario])
        #expect(await eventually(timeout: 30) { peer.output.contains("error code=") || peer.output.contains("closed") })
        let expected = scenario == "release-unheld" ? WireErrorCode.invalidRequest : .malformedMessage
        #expect(peer.output.contains("welcome version=3"), "\(peer.output)")
        #expect(peer.output.contains("error code=\(expected.rawValue)"), "\(peer.output)")
        // The honest subscriber keeps receiving frames after the hostile one was cut off.
        let (frames, end) = try await Self.collect(honest, count: 30)
        #expect(frames.count == 30 && end == nil, "\(String(describing: end))")
        #expect(await eventually { publisher.subscriberCount == 1 })
    }

    @Test(arguments: ["tail-jump", "slot-garbage", "unknown-surface"])
    func aPublisherWritingGarbageIntoItsAnnounceRingIsAProtocolViolation(_ scenario: String) async throws {
        let path = temporaryBusPath("ring-hostile-pub")
        let peer = try await startPeer(["ring-hostile-publisher", path, scenario])
        #expect(await eventually { peer.output.contains("listening") })
        let subscriber = try Self.subscriber(path)
        defer { subscriber.cancel() }
        let (frames, end) = try await Self.collect(subscriber, count: 1)
        #expect(frames.isEmpty)
        #expect(end?.code == .protocolViolation, "\(String(describing: end))")
        #expect(await eventually(timeout: 30) { peer.output.contains("error code=") }, "\(peer.output)")
        #expect(peer.output.contains("error code=\(WireErrorCode.malformedMessage.rawValue)"), "\(peer.output)")
    }

    @Test func aSlotThatWaitsForSocketMessagesNeverOvertakesThem() async throws {
        let path = temporaryBusPath("ring-control-ahead")
        let peer = try await startPeer(["ring-hostile-publisher", path, "control-ahead"])
        #expect(await eventually { peer.output.contains("listening") })
        let subscriber = try Self.subscriber(path)
        defer { subscriber.cancel() }
        let (frames, end) = try await Self.collect(subscriber, count: 1)
        // END_OF_STREAM (socket message 1) is handled; the slot that claims 5 came before it never is.
        #expect(frames.isEmpty)
        #expect(end?.code == .endOfStream, "\(String(describing: end))")
    }

    @Test func aPublisherWithoutVersionThreeIsAskedAgainWithVersionTwoAtOnce() async throws {
        let path = temporaryBusPath("ring-v2-only")
        let peer = try await startPeer(["version2-only-publisher", path])
        #expect(await eventually { peer.output.contains("listening") })
        // No reconnects: the fallback to version 2 must not depend on the reconnect policy.
        let subscriber = try Self.subscriber(path)
        defer { subscriber.cancel() }
        let (frames, end) = try await Self.collect(subscriber, count: 1)
        #expect(frames.isEmpty)
        #expect(end?.code == .endOfStream, "\(String(describing: end))")
        #expect(subscriber.session?.protocolVersion == 2)
        #expect(peer.output.contains("hello version=3") && peer.output.contains("hello version=2"), "\(peer.output)")
    }

    /// A subscriber that keeps every frame gets DROPs for the rest; when the publisher stops, the DROP it wrote into
    /// the ring before END_OF_STREAM is published before END_OF_STREAM is sent, so every sequence is accounted for.
    @Test func everySequenceIsAccountedForWhenThePublisherStops() async throws {
        let path = temporaryBusPath("ring-stop")
        let (publisher, pool) = try Self.publisher(path)
        let subscriber = try Self.subscriber(path)
        defer { subscriber.cancel() }
        #expect(await eventually { publisher.subscriberCount == 1 })
        let count = 30
        for _ in 0..<count {
            let buffer = try publisher.makePixelBuffer(from: pool)
            _ = try publisher.publish(buffer)
        }
        publisher.stop()
        var kept: [SampleBuffer] = []
        var covered = Set<UInt64>()
        var end: FrameBusError?
        for try await event in subscriber.events {
            switch event {
            case .frame(let sample):
                kept.append(sample)
                if let sequence = sample.busSequenceNumber { covered.insert(sequence) }
            case .dropped(let drop):
                for sequence in drop.sequences.lowerBound...min(drop.sequences.upperBound, 1000) { covered.insert(sequence) }
            case .ended(let error): end = error
            default: break
            }
        }
        #expect(end?.code == .endOfStream, "\(String(describing: end))")
        #expect(!kept.isEmpty)
        #expect(covered.isSuperset(of: Set(0..<UInt64(count))), "missing \(Set(0..<UInt64(count)).subtracting(covered).sorted())")
    }
}
