import Testing
import TestSupport

@testable import FrameBus
import FrameBusTesting

/// The subscriber fuzz target's body, run on its seeds and on deterministic mutations of them, so every `swift test`
/// exercises it (the libFuzzer run of Fuzz/Subscriber/run.sh goes further).
@Suite(.timeLimit(.minutes(5))) struct SubscriberFuzzingTests {
    /// SplitMix64: a fixed, portable sequence.
    struct SplitMix: RandomNumberGenerator {
        var state: UInt64
        mutating func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
    }

    @Test func theSeedsAreRealSessionsThatRunCleanly() {
        let seeds = SubscriberProtocolFuzzing.seeds()
        #expect(seeds.count >= 3)
        let outcomes = seeds.map { SubscriberProtocolFuzzing.run($0) }
        // The first is a whole session: handshake, frames, a drop, the end.
        #expect(outcomes[0] == .init(sessions: 1, frames: 7, drops: 1, ends: 1))
        #expect(outcomes[1].frames == 8 && outcomes[1].drops == 1)
        #expect(outcomes[2].ends == 1 && outcomes[2].sessions == 0)
    }

    /// The first finding of Fuzz/Subscriber: a closed machine answered every late malformed datagram with another
    /// end of stream, so a closed connection could grow the event queue without bound.
    @Test func aClosedMachineIgnoresLateMalformedDatagrams() {
        var machine = SubscriberStateMachine(acceptedFormats: [.yuv420BiPlanarVideoRange8], delivery: .latestOnly)
        #expect(machine.receivedMalformed("before connecting") == .none)
        _ = machine.connected()
        guard case .close = machine.receivedMalformed("garbage") else {
            Issue.record("a malformed handshake reply did not close")
            return
        }
        #expect(machine.receivedMalformed("after the close") == .none)
        #expect(machine.surfaceImportFailed(surfaceID: 1, reason: "after the close") == .none)
        #expect(machine.frameRefused("after the close") == .none)
        // The input the fuzzer found: one connection, then a stream of junk records.
        var input: [UInt8] = [0x00, 0x00]
        for _ in 0..<200 { input += [0x00, 0x02, 0x00, 0xFF, 0xFF] }
        // (The harness reconnects after each end until the consumer lags by maximumConnectionEvents.)
        #expect(SubscriberProtocolFuzzing.run(input).ends <= SubscriberEventQueue<UInt64>.maximumConnectionEvents)
    }

    @Test func mutatedSessionsNeverTrap() {
        var random = SplitMix(state: 7)
        let seeds = SubscriberProtocolFuzzing.seeds()
        var reachedFrames = 0
        for round in 0..<3000 {
            var input = seeds[round % seeds.count]
            for _ in 0..<Int.random(in: 1...8, using: &random) {
                guard !input.isEmpty else { break }
                let index = Int.random(in: 0..<input.count, using: &random)
                switch Int.random(in: 0..<4, using: &random) {
                case 0: input[index] = UInt8.random(in: 0...255, using: &random)
                case 1: input[index] ^= 1 << UInt8.random(in: 0..<8, using: &random)
                case 2: input.insert(contentsOf: input[index..<min(input.count, index + 40)], at: index)
                default: input.removeSubrange(index..<min(input.count, index + 4))
                }
            }
            if SubscriberProtocolFuzzing.run(input).frames > 0 { reachedFrames += 1 }
        }
        #expect(reachedFrames > 100)
    }
}
