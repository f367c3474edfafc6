import Foundation
import Glibc
import SystemPackage
import TestSupport
import Testing

@testable import FrameBus

/// Protocol version 3's wake-up sockets against hostile peers (docs/PROTOCOL.md §9.1, §9.5): a wake-up socket must be
/// the other end of a socket pair the session's own peer made, so wake-ups never reach a third party; and a
/// subscriber that floods its wake-up socket costs the publisher a bounded number of reads and is ended, while an
/// honest subscriber of the same publisher keeps its frames.
@Suite(.timeLimit(.minutes(5))) struct WakeUpTrustTests {
    /// A hostile subscriber's HELLO carries a datagram socket connected to a third party's bound socket instead of
    /// its pair's end B: the publisher refuses the session (it would have sent its wake-ups there).
    @Test func aPublisherRefusesAWakeUpSocketConnectedToAThirdParty() async throws {
        let path = temporaryBusPath("wake-redirect-pub")
        let (publisher, pool) = try RingProcessTests.publisher(path)
        defer { publisher.stop() }
        let honest = try RingProcessTests.subscriber(path)
        defer { honest.cancel() }
        #expect(await eventually { publisher.subscriberCount == 1 })
        let producer = PacedProducer(publisher: publisher, pool: pool, fps: 100)
        defer { producer.stop() }
        let peer = try await startPeer(["ring-hostile-subscriber", path, "wake-redirected"])
        #expect(await eventually(timeout: 30) { peer.output.contains("third-party datagrams=") }, "\(peer.output)")
        #expect(peer.output.contains("refused"), "\(peer.output)")
        #expect(peer.output.contains("code: \(WireErrorCode.malformedMessage.rawValue)"), "\(peer.output)")
        #expect(peer.output.contains("third-party datagrams=0"), "\(peer.output)")
        let (frames, end) = try await RingProcessTests.collect(honest, count: 20)
        #expect(frames.count == 20 && end == nil, "\(String(describing: end))")
    }

    /// The other direction: a hostile publisher's WELCOME carries such a socket; the subscriber refuses it before it
    /// ever wakes the publisher through it.
    @Test func aSubscriberRefusesAWakeUpSocketConnectedToAThirdParty() async throws {
        let path = temporaryBusPath("wake-redirect-sub")
        let peer = try await startPeer(["ring-hostile-publisher", path, "wake-redirected"])
        #expect(await eventually { peer.output.contains("listening") })
        let subscriber = try RingProcessTests.subscriber(path)
        defer { subscriber.cancel() }
        let (frames, end) = try await RingProcessTests.collect(subscriber, count: 1)
        #expect(frames.isEmpty)
        #expect(end?.code == .protocolViolation, "\(String(describing: end))")
        #expect(await eventually(timeout: 30) { peer.output.contains("third-party datagrams=") }, "\(peer.output)")
        #expect(peer.output.contains("third-party datagrams=0"), "\(peer.output)")
    }

    /// A socket pair's end made by another process than the session's peer (here: by this process, while the
    /// peer is said to be another) is refused; the same end is accepted from its maker.
    @Test func aWakeUpSocketPairMustBeMadeByTheSessionsPeer() throws {
        var pair: [Int32] = [-1, -1]
        let type = Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue)
        #expect(socketpair(AF_UNIX, type, 0, &pair) == 0)
        defer { close(pair[0]) }
        let someoneElse = getpid() == 1 ? Int32(2) : Int32(1)
        #expect(throws: FrameBusError.self) {
            _ = try WakeSocket.importing(FileDescriptor(rawValue: dup(pair[1])), peerProcessID: someoneElse)
        }
        let accepted = try WakeSocket.importing(FileDescriptor(rawValue: pair[1]), peerProcessID: getpid())
        #expect(accepted.signal())
    }

    /// A subscriber flooding its wake-up socket from two threads is ended with ERROR `tooManyWakeUps` once its
    /// wake-ups exceed one per release and per announcement plus the allowance; the publisher read at most one
    /// drain more than that. The honest subscriber beside it gets its frames.
    @Test func aSubscriberFloodingItsWakeUpSocketIsEndedAndAnHonestOneIsServed() async throws {
        let path = temporaryBusPath("wake-flood")
        let (publisher, pool) = try RingProcessTests.publisher(path)
        defer { publisher.stop() }
        let honest = try RingProcessTests.subscriber(path)
        defer { honest.cancel() }
        #expect(await eventually { publisher.subscriberCount == 1 })
        let producer = PacedProducer(publisher: publisher, pool: pool, fps: 100)
        defer { producer.stop() }
        let peer = try await startPeer(["ring-hostile-subscriber", path, "wake-flood"])
        #expect(await eventually(timeout: 60) { peer.output.contains("flooded sent=") }, "\(peer.output)")
        #expect(peer.output.contains("welcome version=3"), "\(peer.output)")
        let code = WireErrorCode.tooManyWakeUps.rawValue
        #expect(peer.output.contains("error code=\(code)"), "\(peer.output)")
        // The reason says how many wake-ups the publisher read, for how many releases and announcements.
        let numbers = try #require(Self.floodFigures(peer.output), "\(peer.output)")
        let budget = PublisherRings.wakeUpAllowance + numbers.releases + numbers.announcements
        #expect(numbers.read > budget)
        #expect(numbers.read <= budget + UInt64(WakeSocket.drainLimit))
        // The honest subscriber keeps its frames.
        let (frames, end) = try await RingProcessTests.collect(honest, count: 30)
        #expect(frames.count == 30 && end == nil, "\(String(describing: end))")
        #expect(await eventually { publisher.subscriberCount == 1 })
    }

    /// "N wake-ups for R releases and A announcements" from the ERROR's reason.
    static func floodFigures(_ output: String) -> (read: UInt64, releases: UInt64, announcements: UInt64)? {
        guard let line = output.split(separator: "\n").first(where: { $0.contains("wake-ups for") }) else { return nil }
        let words = line.split(separator: " ").map { $0.hasPrefix("reason=") ? $0.dropFirst("reason=".count) : $0 }
        func number(before word: String) -> UInt64? {
            guard let index = words.firstIndex(where: { $0 == word }), index > 0 else { return nil }
            return UInt64(words[index - 1])
        }
        guard let read = number(before: "wake-ups"), let releases = number(before: "releases"),
            let announcements = number(before: "announcements")
        else { return nil }
        return (read, releases, announcements)
    }
}
