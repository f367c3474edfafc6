import Foundation
import TestSupport
import Testing

/// System pressure from C (Tests/CABI/pressure.c): a C subscriber created with FB_SUBSCRIBER_SYSTEM_PRESSURE gets
/// FB_EVENT_SYSTEM_PRESSURE events from a publisher in another process, and one created without it never does. The
/// publisher is FrameBusTestPeer's `bus-publisher --bus-pressure`: its real pressure monitor measures the stream's
/// real cost against a policy in which any cost is serious, and its STATUS messages travel the real socket.
@Suite(.serialized, .timeLimit(.minutes(5))) struct CABIPressureTests {
    /// Starts the pressure publisher and the C subscriber in `mode`; the subscriber's run after it exited.
    func run(_ mode: String) async throws -> (subscriber: ChildProcess, scratch: ScratchDirectory) {
        let scratch = try ScratchDirectory()
        let path = scratch.path("bus.sock")
        let program = try await CProgram.build("pressure")
        let publisher = try await ChildProcess(
            try CABILocations.productsDirectory().appendingPathComponent("FrameBusTestPeer"),
            ["bus-publisher", path, "--size", "64x48", "--fps", "50", "--wait-for-subscriber", "--bus-pressure"],
            lifeline: true,
            outputDirectory: scratch.url
        )
        #expect(await publisher.waitForOutput("listening", timeout: 120), "publisher: \(publisher.output)")
        let subscriber = try await program.start([path, mode], in: scratch)
        let status = (try? await subscriber.exitStatus(within: 180)) ?? -1
        #expect(status == 0, "the C subscriber exited \(status): \(subscriber.output)")
        await publisher.kill()  // it publishes until killed
        return (subscriber, scratch)
    }

    @Test func aSubscriberThatAsksGetsTheFirstStateThenTheChangeWithCostAndFrameDuration() async throws {
        let (subscriber, scratch) = try await run("flag")
        defer { withExtendedLifetime(scratch) {} }
        let abi = try #require(subscriber.records("abi").first, "\(subscriber.output)")
        #expect(abi["event_size"] == "336" && abi["union_offset"] == "16" && abi["session_offset"] == "48")
        #expect(abi["unknown_flag"] == "FB_ERROR_INVALID_ARGUMENT")
        let pressures = subscriber.records("pressure")
        #expect(pressures.count >= 2, "\(subscriber.output)")
        // The first, right after connecting: no frame has been published yet, so no cost and nothing pressing.
        let first = try #require(pressures.first)
        #expect(first["level"] == "0" && first["factors"] == "0", "\(subscriber.output)")
        // The last: serious (2), the bus factor (bit 4) alone, with the cost measured and the frames' 20 ms.
        let last = try #require(pressures.last)
        #expect(last["level"] == "2" && last["factors"] == "16", "\(subscriber.output)")
        #expect(last["cost_known"] == "1", "\(subscriber.output)")
        #expect(last["duration_ns"] == "20000000", "\(subscriber.output)")
        // Each event is a change: no two in a row say the same.
        for (previous, next) in zip(pressures, pressures.dropFirst()) {
            #expect(previous["level"] != next["level"] || previous["factors"] != next["factors"])
        }
    }

    @Test func aSubscriberThatDoesNotAskNeverSeesAPressureEvent() async throws {
        let (subscriber, scratch) = try await run("none")
        defer { withExtendedLifetime(scratch) {} }
        #expect(subscriber.records("pressure").isEmpty, "\(subscriber.output)")
        #expect(subscriber.records("frames").first?["pressure_events"] == "0", "\(subscriber.output)")
        #expect(subscriber.records("frames").first?["count"] == "60", "\(subscriber.output)")
    }
}
