import Foundation
import TestSupport
import Testing

@testable import FrameBus

/// System pressure reaches subscribers in other processes (STATUS, PROTOCOL.md §5.13) as an event, and `framebus
/// subscribe --json` prints it on the line of each second in which it changed. The publisher's state is set through
/// its monitor's entry point, as the monitor thread does (the real PSI path is SystemPressureMonitorTests').
@Suite(.timeLimit(.minutes(5))) struct SystemPressureSubscriberTests {
    static func publisher(_ tag: String) throws -> Publisher {
        var configuration = Publisher.Configuration(path: temporaryBusPath(tag), formats: [.yuv420BiPlanarVideoRange8])
        // No monitor thread: this test says what the pressure is.
        configuration.systemPressurePolicy = nil
        return try Publisher(configuration: configuration)
    }

    @Test func aSwiftSubscriberGetsTheStateAfterConnectingAndEachChangeAndTheStatus() async throws {
        let publisher = try Self.publisher("pressure-events")
        defer { publisher.stop() }
        let subscriber = try Subscriber(
            configuration: .init(path: publisher.configuration.path, acceptedFormats: [.yuv420BiPlanarVideoRange8])
        )
        defer { subscriber.cancel() }
        var iterator = subscriber.events.makeAsyncIterator()
        guard case .connected = try await iterator.next() else {
            Issue.record("no connected event")
            return
        }
        guard case .systemPressureChanged(let first) = try await iterator.next() else {
            Issue.record("no first pressure event")
            return
        }
        #expect(first == .nominal)
        let serious = SystemPressureState(level: .serious, factors: [.cpu, .bus])
        publisher.core.systemPressureChanged(serious)
        guard case .systemPressureChanged(let next) = try await iterator.next() else {
            Issue.record("no pressure event")
            return
        }
        #expect(next == serious)
        #expect(subscriber.publisherStatus?.systemPressure == serious)
        #expect(publisher.systemPressureState == serious)
    }

    @Test func aSubscriberThatDoesNotAskGetsNoStatus() async throws {
        let publisher = try Self.publisher("pressure-quiet")
        defer { publisher.stop() }
        var configuration = Subscriber.Configuration(
            path: publisher.configuration.path,
            acceptedFormats: [.yuv420BiPlanarVideoRange8]
        )
        configuration.receivesStatus = false
        let subscriber = try Subscriber(configuration: configuration)
        defer { subscriber.cancel() }
        var iterator = subscriber.events.makeAsyncIterator()
        guard case .connected = try await iterator.next() else {
            Issue.record("no connected event")
            return
        }
        publisher.core.systemPressureChanged(SystemPressureState(level: .critical, factors: .cpu))
        let pool = try PublisherFairnessTests.pool(threshold: 8)
        let buffer = try publisher.makePixelBuffer(from: pool)
        _ = try fillFrame(buffer, index: 0)
        try publisher.publish(buffer)
        guard case .frame = try await iterator.next() else {
            Issue.record("the frame was not the next event")
            return
        }
        #expect(subscriber.publisherStatus == nil)
    }

    /// `framebus subscribe --json` (a real process): the first second's line says nominal, a line says serious
    /// [cpu] after the change, and lines of seconds without a change say nothing about pressure.
    @Test func subscribeJSONPrintsThePressureOnTheLineOfTheSecondItChanged() async throws {
        let publisher = try Self.publisher("pressure-json")
        defer { publisher.stop() }
        let child = try await startFramebus([
            "subscribe", "--path", publisher.configuration.path, "--json", "--duration", "30",
        ])
        try #require(await eventually { publisher.subscriberCount == 1 }, "\(child.output)")
        func lines() -> [[String: Any]] {
            child.output.split(separator: "\n").compactMap {
                (try? JSONSerialization.jsonObject(with: Data($0.utf8))) as? [String: Any]
            }
        }
        func pressures() -> [[String: Any]] { lines().compactMap { $0["systemPressure"] as? [String: Any] } }
        try #require(await eventually { !pressures().isEmpty }, "\(child.output)")
        #expect(pressures().first?["level"] as? String == "nominal")
        #expect((pressures().first?["factors"] as? [String]) == [])
        publisher.core.systemPressureChanged(SystemPressureState(level: .serious, factors: .cpu))
        try #require(await eventually { pressures().count == 2 }, "\(child.output)")
        #expect(pressures().last?["level"] as? String == "serious")
        #expect((pressures().last?["factors"] as? [String]) == ["cpu"])
        // A second with no change prints no pressure.
        let count = lines().count
        try #require(await eventually { lines().count >= count + 2 }, "\(child.output)")
        #expect(pressures().count == 2, "\(child.output)")
        child.send(SIGTERM)
        #expect(await child.waitForExit(timeout: 60))
    }
}
