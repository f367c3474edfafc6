import Foundation
import TestSupport
import Testing

/// The test harness's heavy-work executor: CPU-bound tests marked `.heavyWork` run on its two threads, never on Swift's
/// cooperative pool (where, two at a time beside CPU hogs, they once stalled every other test of the process for a
/// minute). The time limit is long: these tests queue there behind the codec suites' tests.
@Suite(.heavyWork, .timeLimit(.minutes(10))) struct HeavyWorkTraitTests {
    @Test func aSynchronousTestRunsOnAHeavyWorkThread() {
        #expect(HeavyWorkExecutor.isCurrent)
    }

    @Test(arguments: [1, 2])
    func everyCaseOfAParameterizedTestRunsThere(_ argument: Int) {
        #expect(HeavyWorkExecutor.isCurrent, "case \(argument)")
    }

    @Test func anAsyncTestResumesThereAfterItsAwaits() async throws {
        await Task.yield()  // a suspension and a resumption, with no duration
        #expect(HeavyWorkExecutor.isCurrent)
        let elsewhere = try await onDedicatedThread { HeavyWorkExecutor.isCurrent }
        #expect(!elsewhere)
        #expect(HeavyWorkExecutor.isCurrent)
    }
}

@Suite(.timeLimit(.minutes(2))) struct HeavyWorkTraitAbsentTests {
    @Test func withoutTheTraitATestRunsElsewhere() {
        #expect(!HeavyWorkExecutor.isCurrent)
    }
}
