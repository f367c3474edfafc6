import Testing

@testable import FrameBus

/// Deferred start as events in, actions out (PublisherStateMachine+Deferral.swift): each row is a script of what
/// happens to the publisher and, per subscriber, the frames it must have received and the DROPs it must have seen.
@Suite struct PublisherDeferralTests {
    typealias Harness = MachineHarness

    enum Step: CustomStringConvertible {
        /// A subscriber says HELLO (version 2 unless given; `deferred` sets the HELLO flag).
        case hello(String, deferred: Bool = false, version: UInt16 = 2, format: UInt32 = MachineHarness.nv12)
        /// The IO layer's turn before a frame (deferred start if due), then the frame.
        case publish
        /// The producer loses a frame upstream (a DROP to every subscriber that is served).
        case lose
        case advance(milliseconds: UInt64)
        /// `runDeferredStartWhenNeeded()`.
        case request
        case leave(String)

        var description: String {
            switch self {
            case .hello(let name, let deferred, let version, _):
                "hello(\(name)\(deferred ? ", deferred" : ""), v\(version))"
            case .publish: "publish"
            case .lose: "lose"
            case .advance(let milliseconds): "advance(\(milliseconds) ms)"
            case .request: "request"
            case .leave(let name): "leave(\(name))"
            }
        }
    }

    struct Scenario: CustomTestStringConvertible, Sendable {
        var name: String
        var automatic = true
        var steps: [Step]
        /// Frame sequences each subscriber received.
        var frames: [String: [UInt64]]
        /// Deferred starts that ran, with how many subscribers each started.
        var starts: [Int]
        /// Subscribers that must have received no DROP.
        var noDrops: [String] = []
        var testDescription: String { name }
    }

    static let scenarios: [Scenario] = [
        Scenario(
            name: "a deferred subscriber starts with the frame after the preview's first",
            steps: [.hello("preview"), .hello("recorder", deferred: true), .publish, .publish, .publish],
            frames: ["preview": [0, 1, 2], "recorder": [1, 2]],
            starts: [1]
        ),
        Scenario(
            name: "a deferred subscriber that came first waits for a preview that comes later",
            steps: [
                .hello("recorder", deferred: true), .publish, .hello("preview"), .publish, .publish,
            ],
            frames: ["preview": [1, 2], "recorder": [2]],
            starts: [1]
        ),
        Scenario(
            name: "deferred subscribers alone start after the deferred-start timeout",
            steps: [
                .hello("a", deferred: true), .hello("b", deferred: true), .publish, .advance(milliseconds: 999),
                .publish, .advance(milliseconds: 1), .publish, .publish,
            ],
            frames: ["a": [2, 3], "b": [2, 3]],
            starts: [2]
        ),
        Scenario(
            name: "manual deferred start waits for the producer however long the preview runs",
            automatic: false,
            steps: [
                .hello("preview"), .hello("recorder", deferred: true), .publish, .publish, .advance(milliseconds: 5000),
                .publish, .request, .publish,
            ],
            frames: ["preview": [0, 1, 2, 3], "recorder": [3]],
            starts: [1]
        ),
        Scenario(
            name: "after a manual request later deferred subscribers start with the next frame",
            automatic: false,
            steps: [.request, .hello("recorder", deferred: true), .publish, .hello("late", deferred: true), .publish],
            frames: ["recorder": [0, 1], "late": [1]],
            starts: [1, 1]
        ),
        Scenario(
            name: "a version-2 subscriber that knows nothing of deferral is served from its first frame",
            steps: [.hello("old"), .hello("recorder", deferred: true), .publish, .publish],
            frames: ["old": [0, 1], "recorder": [1]],
            starts: [1]
        ),
        Scenario(
            name: "a second preview arriving holds back a deferred subscriber that arrives with it",
            steps: [
                .hello("preview"), .publish, .hello("second"), .hello("recorder", deferred: true), .publish,
                .publish,
            ],
            frames: ["preview": [0, 1, 2], "second": [1, 2], "recorder": [2]],
            starts: [1]
        ),
        Scenario(
            name: "a waiting deferred subscriber is told nothing of frames lost before its start",
            steps: [.hello("preview"), .hello("recorder", deferred: true), .lose, .publish, .publish],
            frames: ["preview": [1, 2], "recorder": [2]],
            starts: [1],
            noDrops: ["recorder"]
        ),
        Scenario(
            name: "deferred subscribers whose preview left before its first frame start after the timeout",
            steps: [
                .hello("preview"), .hello("recorder", deferred: true), .leave("preview"), .publish,
                .advance(milliseconds: 1000), .publish,
            ],
            frames: ["recorder": [1]],
            starts: [1]
        ),
    ]

    @Test(arguments: scenarios)
    func deferredStartFollowsItsScript(_ scenario: Scenario) throws {
        var harness = Harness { limits in
            limits.automaticallyRunsDeferredStart = scenario.automatic
            limits.heldFrameBudget = 64
        }
        var ids: [String: Harness.ID] = [:]
        var starts: [Int] = []
        var surface: UInt64 = 1
        for step in scenario.steps {
            switch step {
            case .hello(let name, let deferred, let version, let format):
                ids[name] = harness.subscribe(
                    version: version,
                    flags: deferred ? WireHello.deferredFlag : 0,
                    formats: [format]
                )
            case .publish:
                let due = harness.machine.deferredStartDue(now: harness.now)
                if due > 0 {
                    let (started, actions) = harness.machine.runDeferredStart(now: harness.now)
                    #expect(started == due, "\(step)")
                    harness.perform(actions)
                    starts.append(started)
                }
                let sequence = harness.publish(on: surface)
                // Every frame is released at once: holding is not what these rows are about.
                for (_, id) in ids {
                    guard let frame = harness.frames(id).last, frame.sequence == sequence else { continue }
                    harness.receive(
                        .release(WireRelease(sequence: frame.sequence, surfaceID: frame.surfaceID, flags: 0)),
                        from: id
                    )
                }
                surface = surface % 4 + 1
            case .lose:
                if let (_, actions) = harness.machine.reportDropped(reason: .frameWasLate, count: 1, now: harness.now) {
                    harness.perform(actions)
                    harness.perform(harness.machine.tick(now: harness.now &+ 1_000_000_000))
                }
            case .advance(let milliseconds):
                harness.now += milliseconds * 1_000_000
            case .request:
                harness.machine.requestDeferredStart()
            case .leave(let name):
                if let id = ids.removeValue(forKey: name) {
                    harness.perform(harness.machine.connectionClosed(id, reason: "test", now: harness.now))
                }
            }
        }
        for (name, expected) in scenario.frames {
            let id = try #require(ids[name], "\(name)")
            #expect(harness.frames(id).map(\.sequence) == expected, "\(name)")
            #expect(harness.violations(id, maximumAnnounced: 64).isEmpty, "\(name)")
        }
        for name in scenario.noDrops {
            #expect(harness.drops(try #require(ids[name])).isEmpty, "\(name)")
        }
        #expect(starts == scenario.starts)
    }

    @Test func noRepresentationIsPlannedForADeferredSubscriberBeforeItsStart() {
        let compressed: UInt32 = 0x2638_7630  // "&8v0"
        var harness = Harness { limits in limits.formats = [Harness.nv12, compressed] }
        let preview = harness.subscribe()
        _ = harness.subscribe(flags: WireHello.deferredFlag, formats: [compressed])
        let first = harness.machine.beginFrame(format: Harness.nv12, width: 4, height: 2, discontinuity: false)
        #expect(first?.formats == [Harness.nv12])
        _ = preview
        #expect(harness.machine.deferredStartDue(now: harness.now) == 0)
    }

    @Test func aVersionOneHelloCannotAskForDeferral() throws {
        var harness = Harness()
        let id = harness.subscribe(version: 1)
        harness.publish(on: 1)
        #expect(harness.frames(id).map(\.sequence) == [0])
        #expect(harness.machine.awaitingDeferredStartCount == 0)
    }

    @Test func theDeferredFlagSurvivesEncodingAndUnknownFlagsStillFail() throws {
        let hello = WireHello(
            version: 2,
            deliveryMode: 0,
            queueDepth: 1,
            flags: WireHello.acceptsDMABufFlag | WireHello.deferredFlag,
            formats: [Harness.nv12]
        )
        guard case .hello(let decoded) = try WireMessage.decode(WireMessage.hello(hello).encoded(), descriptorCount: 0)
        else {
            Issue.record("not a HELLO")
            return
        }
        #expect(decoded.flags == WireHello.acceptsDMABufFlag | WireHello.deferredFlag)
        var bytes = WireMessage.hello(hello).encoded()
        bytes[23] = 0x80  // bit 15 of flags (little-endian u16 at offset 22)
        #expect(throws: (any Error).self) { try WireMessage.decode(bytes, descriptorCount: 0) }
    }
}
