import Testing
import TestSupport

@testable import FrameBus

/// The holding policy's arithmetic (docs/PROTOCOL.md §7.3): what a subscriber is granted, table-tested, and what
/// any sequence of admissions adds up to. Requested depths come from peers, so no input may trap.
@Suite(.timeLimit(.minutes(5))) struct HoldingPolicyTests {
    struct Case: CustomTestStringConvertible, Sendable {
        var name: String
        var policy = HoldingPolicy()
        var requested: Int
        var isLatestOnly = false
        var budget: Int?
        var committed = 0
        var admitted = 0
        var maximumSubscribers = 16
        /// (maximumHeldFrames, queueDepth), nil: refused.
        var expected: (Int, Int)?
        var testDescription: String { name }
    }

    static let cases: [Case] = [
        // `framebus publish`'s default pool: 2 + 3 × 16 + 16 = 66 buffers, a budget of 64; a recorder wants 16 + 2.
        Case(name: "recorder first on the default pool", requested: 16, budget: 64, expected: (18, 16)),
        Case(
            name: "recorder after 15 latest-only subscribers",
            requested: 16,
            budget: 64,
            committed: 45,
            admitted: 15,
            expected: (18, 16)
        ),
        Case(name: "latest-only first", requested: 1, isLatestOnly: true, budget: 64, expected: (3, 1)),
        Case(
            name: "latest-only after a recorder, 14 still to come",
            requested: 1,
            isLatestOnly: true,
            budget: 64,
            committed: 18,
            admitted: 1,
            expected: (3, 1)
        ),
        Case(
            name: "a second recorder gets what is left after the fair minimum",
            requested: 16,
            budget: 64,
            committed: 18,
            admitted: 1,
            expected: (4, 4)
        ),
        // The old default pool (34 buffers): a fair minimum of 32 / 16 = 2 is all that is left for a recorder.
        Case(name: "recorder on a 34-buffer pool", requested: 16, budget: 32, expected: (2, 2)),
        Case(name: "no budget: what it asks for", requested: 16, budget: nil, expected: (18, 16)),
        Case(name: "no budget, latest-only", requested: 1, isLatestOnly: true, budget: nil, expected: (3, 1)),
        Case(name: "no budget, full", requested: 1, budget: nil, admitted: 16, expected: nil),
        Case(name: "budget taken", requested: 1, budget: 64, committed: 64, admitted: 5, expected: nil),
        Case(name: "capacity reached", requested: 1, budget: 64, committed: 48, admitted: 16, expected: nil),
        // A small pool admits fewer subscribers than maximumSubscribers: 10 / 1 = 10 of 16.
        Case(name: "tiny budget, first", requested: 4, budget: 10, expected: (1, 1)),
        Case(name: "tiny budget, last slot", requested: 4, budget: 10, committed: 5, admitted: 9, expected: (5, 4)),
        Case(name: "tiny budget, beyond its capacity", requested: 4, budget: 10, committed: 9, admitted: 10),
        Case(
            name: "extra 0 still gives latest-only 3",
            policy: HoldingPolicy(extraHeldFrames: 0),
            requested: 1,
            isLatestOnly: true,
            budget: nil,
            expected: (3, 1)
        ),
        Case(
            name: "queue with extra 0 holds its depth",
            policy: HoldingPolicy(extraHeldFrames: 0),
            requested: 4,
            budget: nil,
            expected: (4, 4)
        ),
        // Hostile and absurd inputs: clamped, never a trap.
        Case(name: "depth Int.max", requested: .max, budget: nil, expected: (255, 255)),
        Case(name: "depth Int.min", requested: .min, budget: nil, expected: (3, 1)),
        Case(name: "depth 0", requested: 0, budget: 64, expected: (3, 1)),
        Case(name: "depth 65535 on a huge budget", requested: 65_535, budget: .max, expected: (255, 255)),
        Case(name: "budget Int.min", requested: 16, budget: .min, expected: (1, 1)),
        Case(name: "committed Int.max", requested: 16, budget: 64, committed: .max, admitted: 1),
        Case(name: "committed negative", requested: 16, budget: 64, committed: .min, expected: (18, 16)),
        Case(name: "admitted Int.max", requested: 16, budget: 64, admitted: .max),
        Case(name: "admitted negative", requested: 16, budget: 64, admitted: .min, expected: (18, 16)),
        Case(name: "maximumSubscribers 0", requested: 16, budget: 64, maximumSubscribers: 0, expected: (18, 16)),
        Case(name: "maximumSubscribers Int.max", requested: 16, budget: 64, maximumSubscribers: .max, expected: (1, 1)),
        Case(
            name: "extra Int.max",
            policy: HoldingPolicy(extraHeldFrames: .max),
            requested: 16,
            budget: nil,
            expected: (255, 16)
        ),
        Case(
            name: "minimum Int.max: 255, lowered to 64 / 16",
            policy: HoldingPolicy(minimumHeldFrames: .max),
            requested: 16,
            budget: 64,
            expected: (4, 4)
        ),
        Case(
            name: "minimum Int.min",
            policy: HoldingPolicy(minimumHeldFrames: .min),
            requested: 16,
            budget: 64,
            expected: (18, 16)
        ),
    ]

    @Test(arguments: cases) func grants(_ test: Case) {
        let grant = test.policy.grant(
            requestedDepth: test.requested,
            isLatestOnly: test.isLatestOnly,
            budget: test.budget,
            committed: test.committed,
            admitted: test.admitted,
            maximumSubscribers: test.maximumSubscribers
        )
        #expect(grant.map { [$0.maximumHeldFrames, $0.queueDepth] } == test.expected.map { [$0.0, $0.1] })
        if let grant {
            #expect((1...HoldingPolicy.largestGrant).contains(grant.maximumHeldFrames))
            #expect(grant.queueDepth >= 1 && grant.queueDepth <= grant.maximumHeldFrames)
        }
    }

    /// Subscribers admitted one after another, with any depths: the grants never add up to more than the budget,
    /// exactly the capacity is admitted, and each gets at least the fair minimum (or what it wants, if less).
    @Test func admissionsNeverExceedTheBudgetAndKeepTheFairMinimumForLaterOnes() {
        var random = SplitMix64(seed: 13)
        for _ in 0..<3_000 {
            let budget = Int(random.next() % 200) + 1
            let maximumSubscribers = Int(random.next() % 24) + 1
            let policy = HoldingPolicy(
                extraHeldFrames: Int(random.next() % 5),
                minimumHeldFrames: Int(random.next() % 5) + 1
            )
            let minimum = policy.fairMinimum(budget: budget, maximumSubscribers: maximumSubscribers)
            let capacity = policy.subscriberCapacity(budget: budget, maximumSubscribers: maximumSubscribers)
            var committed = 0
            var admitted = 0
            while true {
                let isLatestOnly = random.next() % 2 == 0
                let depth = Int(random.next() % 70)
                guard
                    let grant = policy.grant(
                        requestedDepth: depth,
                        isLatestOnly: isLatestOnly,
                        budget: budget,
                        committed: committed,
                        admitted: admitted,
                        maximumSubscribers: maximumSubscribers
                    )
                else { break }
                let wanted = policy.wantedFrames(requestedDepth: depth, isLatestOnly: isLatestOnly)
                #expect(grant.maximumHeldFrames >= min(wanted, minimum))
                #expect(grant.maximumHeldFrames <= wanted)
                committed += grant.maximumHeldFrames
                admitted += 1
                #expect(committed <= budget)
            }
            #expect(admitted == capacity, "budget \(budget), \(maximumSubscribers) subscribers, \(policy)")
            #expect(capacity <= maximumSubscribers)
        }
    }

    /// When the pool has 3 frames for every subscriber, every latest-only subscriber gets 3 (one in its consumer's
    /// hands, one waiting, one to replace it), whatever came before it.
    @Test func latestOnlyAlwaysHasAFrameToReplaceWhenThePoolIsSizedForIt() {
        var random = SplitMix64(seed: 5)
        let policy = HoldingPolicy()
        for _ in 0..<1_000 {
            let maximumSubscribers = Int(random.next() % 20) + 1
            let budget = 3 * maximumSubscribers + Int(random.next() % 40)
            var committed = 0
            for admitted in 0..<maximumSubscribers {
                let isLatestOnly = random.next() % 3 != 0
                let grant = policy.grant(
                    requestedDepth: Int(random.next() % 65),
                    isLatestOnly: isLatestOnly,
                    budget: budget,
                    committed: committed,
                    admitted: admitted,
                    maximumSubscribers: maximumSubscribers
                )
                guard let grant else {
                    Issue.record("subscriber \(admitted) of \(maximumSubscribers) refused on a budget of \(budget)")
                    break
                }
                if isLatestOnly { #expect(grant.maximumHeldFrames >= HoldingPolicy.latestOnlyFrames) }
                committed += grant.maximumHeldFrames
            }
        }
    }

    /// Random inputs over the whole range of Int: an answer every time, within bounds.
    @Test func anyInputGivesABoundedAnswer() {
        var random = SplitMix64(seed: 99)
        func value() -> Int {
            switch random.next() % 4 {
            case 0: Int(bitPattern: UInt(random.next()))
            case 1: [Int.min, Int.max, 0, -1, 1, 255, 256, 65_535][Int(random.next() % 8)]
            default: Int(random.next() % 300) - 20
            }
        }
        for _ in 0..<20_000 {
            let policy = HoldingPolicy(
                budget: nil,
                producerReserve: value(),
                extraHeldFrames: value(),
                minimumHeldFrames: value()
            )
            let grant = policy.grant(
                requestedDepth: value(),
                isLatestOnly: random.next() % 2 == 0,
                budget: random.next() % 3 == 0 ? nil : value(),
                committed: value(),
                admitted: value(),
                maximumSubscribers: value()
            )
            if let grant {
                #expect((1...HoldingPolicy.largestGrant).contains(grant.maximumHeldFrames))
                #expect((1...grant.maximumHeldFrames).contains(grant.queueDepth))
            }
        }
    }

    // MARK: Through the publisher's state machine

    /// The recorder case: a queue of 16 on a pool of `framebus publish`'s default size gets 16 (18 held), and a
    /// burst of 16 frames it does not release yet arrives whole.
    @Test func aRecorderOnTheDefaultPoolGetsSixteenAndABurstOfSixteenWithoutDrops() throws {
        var harness = MachineHarness()
        harness.machine.learnPoolCapacity(66)
        let recorder = harness.subscribe(mode: 1, depth: 16)
        let others = (0..<15).map { _ in harness.subscribe() }
        guard case .welcome(let welcome) = try #require(harness.messages(recorder).first) else {
            Issue.record("no WELCOME")
            return
        }
        #expect(welcome.queueDepth == 16)
        #expect(welcome.maximumHeldFrames == 18)
        for other in others {
            guard case .welcome(let welcome) = harness.messages(other).first else {
                Issue.record("no WELCOME for \(other): \(harness.messages(other))")
                continue
            }
            #expect(welcome.maximumHeldFrames == 3)
        }
        for frame in 0..<16 { harness.publish(on: UInt64(frame % 40) + 1) }
        harness.advance(milliseconds: 200)
        #expect(harness.frames(recorder).map(\.sequence) == Array(0..<16))
        #expect(harness.drops(recorder).isEmpty)
        #expect(harness.machine.heldFrameCount <= 64)
    }

    /// A capped pool of converted frames is a budget of its own: its subscribers are admitted against it too, so
    /// hoarders of that format pin at most its budget and an honest subscriber of it keeps getting frames.
    @Test func aCappedConversionPoolIsAdmittedLikeTheProducersPool() throws {
        let compressed = PixelFormat.compressedYUV420BiPlanarVideoRange8.fourCC
        var harness = MachineHarness {
            $0.formats = [MachineHarness.nv12, compressed]
            $0.heldFrameBudget = 64
            $0.conversionBufferLimit = 10  // 9 frames for subscribers, one being converted
        }
        #expect(harness.machine.conversionBudget == 9)
        #expect(harness.machine.conversionPoolCapacity == 10)
        let producersOwn = harness.subscribe()
        let hoarders = (0..<8).map { _ in harness.subscribe(formats: [compressed]) }
        let honest = harness.subscribe(formats: [compressed])
        let limits = harness.machine.subscribers.filter { $0.format == compressed }.map(\.heldLimit)
        #expect(limits.count == 9)
        #expect(limits.reduce(0, +) <= 9, "\(limits)")
        // The producer's own format pins no conversion buffer: only the held-frame budget applies to it.
        #expect(harness.machine.subscribers.first { $0.id == producersOwn }?.heldLimit == 3)
        for frame in 0..<200 {
            let sequence = harness.publish(on: UInt64(frame % 12) + 1)
            if let last = harness.frames(honest).last, last.sequence == sequence {
                let release = WireRelease(sequence: sequence, surfaceID: last.surfaceID, flags: 0)
                harness.receive(.release(release), from: honest)
            }
            #expect(harness.machine.heldFrameCount <= 9 + 3)
        }
        #expect(harness.frames(honest).count == 200)
        for hoarder in hoarders { #expect(harness.frames(hoarder).count <= 1) }
        // Uncapped (the default), a conversion pool holds the whole budget plus the frame being made.
        let uncapped = MachineHarness { $0.heldFrameBudget = 64 }
        #expect(uncapped.machine.conversionBudget == nil)
        #expect(uncapped.machine.conversionPoolCapacity == 65)
    }

    /// Subscribers welcomed before the publisher learnt its pool are admitted again against it, in arrival order.
    @Test func subscribersWelcomedBeforeThePoolWasKnownAreAdmittedAgainstIt() {
        var harness = MachineHarness()
        let recorder = harness.subscribe(mode: 1, depth: 16)
        let greedy = (0..<4).map { _ in harness.subscribe(mode: 1, depth: 64) }
        harness.machine.learnPoolCapacity(34)  // a budget of 32 over 16 possible subscribers: a fair minimum of 2
        let limits = Dictionary(uniqueKeysWithValues: harness.machine.subscribers.map { ($0.id, $0.heldLimit) })
        #expect(limits[recorder] == 2)  // 32 − 15 × 2 left for the first
        #expect(limits.values.reduce(0, +) <= 32)
        for id in greedy { #expect(limits[id] == 2) }
        for frame in 0..<10 { harness.publish(on: UInt64(frame) + 1) }
        harness.advance(milliseconds: 200)
        #expect(harness.frames(recorder).count == 2)
        #expect(harness.drops(recorder) == [WireDrop(2...9, reason: .outOfBuffers)])
    }
}
