import Foundation
import TestSupport
import Testing

/// System pressure coming back down, seen from C (Tests/CABI/pressure_nominal.c). The publisher is FrameBusTestPeer's
/// `bus-publisher --bus-pressure-pulse 4`: for 4 s its frames say they last 100 ns, so its real monitor measures a real
/// cost far above the interval and raises the level (bus factor); then they last 20 ms, the cost falls far below
/// the interval, and the level comes down one step per hold time (0.5 s) to nominal, each change a STATUS on the real
/// socket and an FB_EVENT_SYSTEM_PRESSURE in C.
@Suite(.serialized, .timeLimit(.minutes(5))) struct CABIPressureNominalTests {
    @Test func aCSubscriberSeesTheLevelRiseWithTheBusFactorAndComeBackDownToNominal() async throws {
        let scratch = try ScratchDirectory()
        let path = scratch.path("bus.sock")
        let program = try await CProgram.build("pressure_nominal")
        let publisher = try await ChildProcess(
            try CABILocations.productsDirectory().appendingPathComponent("FrameBusTestPeer"),
            [
                "bus-publisher", path, "--size", "64x48", "--fps", "50", "--wait-for-subscriber",
                "--bus-pressure-pulse", "4",
            ],
            lifeline: true,
            outputDirectory: scratch.url
        )
        #expect(await publisher.waitForOutput("listening", timeout: 120), "publisher: \(publisher.output)")
        let subscriber = try await program.start([path], in: scratch)
        let status = (try? await subscriber.exitStatus(within: 120)) ?? -1
        await publisher.kill()  // it publishes until killed
        #expect(status == 0, "the C subscriber exited \(status): \(subscriber.output)")
        let levels = subscriber.records("pressure").compactMap { $0["level"].flatMap { Int($0) } }
        let factors = subscriber.records("pressure").compactMap { $0["factors"].flatMap { Int($0) } }
        // Nominal first (no frame yet), then up to serious (2) or critical (3) with the bus factor (bit 4) alone,
        // then down, one level at a time or more, never up again, to nominal.
        #expect(levels.first == 0 && factors.first == 0, "\(subscriber.output)")
        let peak = try #require(levels.indices.max { levels[$0] < levels[$1] }, "\(subscriber.output)")
        #expect(levels[peak] >= 2 && factors[peak] == 16, "\(subscriber.output)")
        let after = Array(levels[peak...])
        #expect(zip(after, after.dropFirst()).allSatisfy { $0 > $1 }, "\(subscriber.output)")
        #expect(levels.last == 0 && factors.last == 0, "\(subscriber.output)")
        #expect(publisher.output.contains("calm"), "publisher: \(publisher.output)")
    }
}
