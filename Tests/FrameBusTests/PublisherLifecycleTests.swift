import Foundation
import Glibc
import Testing
import TestSupport

@testable import FrameBus

@Suite(.timeLimit(.minutes(5))) struct PublisherLifecycleTests {
    struct BadConfiguration: Sendable, CustomTestStringConvertible {
        let name: String
        let change: @Sendable (inout Publisher.Configuration) -> Void
        var testDescription: String { name }
    }

    /// Values that the protocol carries in 16-bit fields (or that make no sense) are refused with a typed error when
    /// the publisher is made; before, `UInt16(...)` trapped when the first subscriber said HELLO.
    static let badConfigurations: [BadConfiguration] = [
        BadConfiguration(name: "no formats") { $0.formats = [] },
        BadConfiguration(name: "no subscribers") { $0.maximumSubscribers = 0 },
        BadConfiguration(name: "70000 subscribers") { $0.maximumSubscribers = 70_000 },
        BadConfiguration(name: "70000 extra held frames") { $0.extraHeldFramesPerSubscriber = 70_000 },
        BadConfiguration(name: "negative extra held frames") { $0.extraHeldFramesPerSubscriber = -1 },
        BadConfiguration(name: "1 announced surface") { $0.maximumAnnouncedSurfaces = 1 },
        BadConfiguration(name: "70000 announced surfaces") { $0.maximumAnnouncedSurfaces = 70_000 },
        BadConfiguration(name: "no pending handshakes") { $0.maximumPendingHandshakes = 0 },
        BadConfiguration(name: "no queued messages") { $0.maximumQueuedMessages = 0 },
        BadConfiguration(name: "held-frame budget 0") { $0.heldFrameBudget = 0 },
        BadConfiguration(name: "zero handshake timeout") { $0.handshakeTimeout = .zero },
        BadConfiguration(name: "socket mode 0o1777") { $0.socketMode = 0o1777 },
        BadConfiguration(name: "no conversion buffers") { $0.conversionBufferLimit = 0 },
        BadConfiguration(name: "no conversion threads") { $0.conversionThreadCount = 0 },
        BadConfiguration(name: "65 conversion threads") { $0.conversionThreadCount = 65 },
    ]

    @Test(arguments: badConfigurations) func outOfRangeConfigurationIsATypedError(_ bad: BadConfiguration) {
        var configuration = Publisher.Configuration(path: temporaryBusPath("config"), formats: [.bgra8])
        bad.change(&configuration)
        #expect(throws: FrameBusError.self) { try configuration.validate() }
        #expect(
            performing: { try Publisher(configuration: configuration) },
            throws: { ($0 as? FrameBusError)?.code == .invalidArgument }
        )
    }

    @Test func theLargestValidConfigurationWelcomesASubscriber() async throws {
        let path = temporaryBusPath("largest")
        var configuration = Publisher.Configuration(path: path, formats: [.yuv420BiPlanarVideoRange8])
        configuration.extraHeldFramesPerSubscriber = Int(UInt16.max)
        configuration.maximumAnnouncedSurfaces = Int(UInt16.max)
        configuration.maximumSubscribers = Int(UInt16.max)
        let publisher = try Publisher(configuration: configuration)
        defer { publisher.stop() }
        let raw = try RawPeer(connectingTo: path)
        let welcome = try #require(await raw.handshake())
        #expect(welcome.maximumHeldFrames >= 1)
    }

    @Test func stopIsIdempotentSendsOneEndOfStreamAndFreesThePath() async throws {
        let path = temporaryBusPath("stop")
        let publisher = try Publisher(configuration: .init(path: path, formats: [.yuv420BiPlanarVideoRange8]))
        let raw = try RawPeer(connectingTo: path)
        try #require(await raw.handshake() != nil)
        try #require(await eventually { publisher.subscriberCount == 1 })
        publisher.stop()
        publisher.stop()
        #expect(!FileManager.default.fileExists(atPath: path))
        var ends = 0
        while let message = await raw.next(timeout: 5) {
            if case .endOfStream = message { ends += 1 }
        }
        #expect(ends == 1)
        #expect(throws: FrameBusError.self) {
            try publisher.publish(try PixelBuffer(width: 16, height: 16, pixelFormat: .yuv420BiPlanarVideoRange8))
        }
        // The path is free at once for the next publisher.
        let next = try Publisher(configuration: .init(path: path, formats: [.yuv420BiPlanarVideoRange8]))
        next.stop()
    }
}
