import Logging
import Testing
import TestSupport

@testable import FrameBus

/// Drives a ``PublisherStateMachine`` without sockets: what would be sent is collected per connection, as the IO
/// layer would send it, and checked like a strict subscriber would (docs/PROTOCOL.md §4.2).
struct MachineHarness {
    typealias Machine = PublisherStateMachine<Int>
    typealias ID = Machine.ConnectionID

    static let nv12: UInt32 = 0x3432_3076
    static let bgra: UInt32 = 0x4247_5241
    static let ownUID: UInt32 = 1000

    var machine: Machine
    var now: UInt64 = 1_000_000_000
    /// Everything "sent" on each connection, in order.
    var sent: [ID: [WireMessage]] = [:]
    var closed: Set<ID> = []
    var logs: [String] = []
    /// Whether the IO layer can write (false: a subscriber that stopped reading).
    var writable: Set<ID>? = nil

    init(_ configure: (inout Machine.Limits) -> Void = { _ in }) {
        var limits = Machine.Limits(formats: [Self.nv12], allowedUserIDs: [Self.ownUID])
        configure(&limits)
        machine = Machine(limits: limits, streamID: 42)
    }

    mutating func perform(_ actions: [Machine.Action]) {
        for action in actions {
            switch action {
            case .flush(let id):
                guard writable.map({ $0.contains(id) }) ?? true else { continue }
                let items = machine.outbound(of: id)
                sent[id, default: []] += items.map(\.message)
                perform(machine.sent(items.count, on: id, now: now))
            case .close(let id):
                closed.insert(id)
                machine.closedAfterStop(id)
            case .log(_, let line):
                logs.append(line)
            case .deadlineChanged:
                break
            }
        }
    }

    mutating func connect(uid: UInt32 = ownUID) -> ID {
        machine.connectionAccepted(.init(processID: 7, userID: uid), now: now)
    }

    mutating func receive(_ message: WireMessage, from id: ID, descriptors: Int = 0) {
        perform(
            machine.received(message.encoded(), descriptorCount: descriptors, isTruncated: false, from: id, now: now)
        )
    }

    mutating func receive(bytes: [UInt8], from id: ID) {
        perform(machine.received(bytes, descriptorCount: 0, isTruncated: false, from: id, now: now))
    }

    mutating func subscribe(
        version: UInt16 = 2,
        mode: UInt16 = 0,
        depth: UInt16 = 1,
        flags: UInt16 = 0,
        formats: [UInt32] = [nv12]
    ) -> ID {
        let id = connect()
        receive(
            .hello(WireHello(version: version, deliveryMode: mode, queueDepth: depth, flags: flags, formats: formats)),
            from: id
        )
        return id
    }

    mutating func advance(milliseconds: UInt64) {
        now += milliseconds * 1_000_000
        perform(machine.tick(now: now))
    }

    static func surface(_ id: UInt64, backing: WireBacking = .memfd) -> WireSurface {
        WireSurface(
            surfaceID: id,
            pixelFormat: nv12,
            width: 4,
            height: 2,
            backing: backing,
            descriptorByteCounts: [12],
            planes: [
                WireSurfacePlane(offset: 0, bytesPerRow: 4, width: 4, height: 2, bytesPerElement: 1),
                WireSurfacePlane(offset: 8, bytesPerRow: 4, width: 2, height: 1, bytesPerElement: 2),
            ]
        )
    }

    static func representation(_ surfaceID: UInt64, backing: WireBacking = .memfd) -> Machine.Representation {
        let surface = surface(surfaceID, backing: backing)
        let v1 =
            backing == .memfd
            ? WireSurfaceV1(
                surfaceID: surfaceID,
                allocationSize: 12,
                pixelFormat: nv12,
                width: 4,
                height: 2,
                planes: [
                    WirePlane(offset: 0, bytesPerRow: 4, width: 4, height: 2, bytesPerElement: 1),
                    WirePlane(offset: 8, bytesPerRow: 4, width: 2, height: 1, bytesPerElement: 2),
                ]
            ) : nil
        return .init(surfaceID: surfaceID, surface: surface, surfaceV1: v1, bytesUsed: 12, resource: Int(surfaceID))
    }

    /// Publishes one frame on `surfaceID`; returns its sequence.
    @discardableResult
    mutating func publish(on surfaceID: UInt64, backing: WireBacking = .memfd, discontinuity: Bool = false) -> UInt64 {
        let plan = machine.beginFrame(format: Self.nv12, width: 4, height: 2, discontinuity: discontinuity)!
        let template = WireFrame(
            sequence: plan.sequence,
            surfaceID: 0,
            presentationTime: .invalid,
            duration: .invalid,
            publishTime: now,
            bytesUsed: 0,
            flags: plan.isDiscontinuity ? WireFrame.discontinuityFlag : 0
        )
        for format in plan.formats {
            perform(
                machine.deliver(
                    template,
                    format: format,
                    representation: Self.representation(surfaceID, backing: backing),
                    isConversion: false,
                    now: now
                )
            )
        }
        return plan.sequence
    }

    func messages(_ id: ID) -> [WireMessage] { sent[id] ?? [] }

    func frames(_ id: ID) -> [WireFrame] {
        messages(id).compactMap { if case .frame(let frame) = $0 { frame } else { nil } }
    }

    func drops(_ id: ID) -> [WireDrop] {
        messages(id).compactMap { if case .drop(let drop) = $0 { drop } else { nil } }
    }

    func errors(_ id: ID) -> [WireErrorMessage] {
        messages(id).compactMap { if case .error(let error) = $0 { error } else { nil } }
    }

    /// Checks docs/PROTOCOL.md §4.2 on what one subscriber received; returns the violations.
    func violations(_ id: ID, maximumAnnounced: Int) -> [String] {
        var announced = Set<UInt64>()
        var lastSequence: UInt64?
        var problems: [String] = []
        for message in messages(id) {
            switch message {
            case .surface(let surface):
                if announced.contains(surface.surfaceID) { problems.append("SURFACE \(surface.surfaceID) twice") }
                announced.insert(surface.surfaceID)
                if announced.count > maximumAnnounced { problems.append("\(announced.count) surfaces announced") }
            case .surfaceV1(let surface):
                if announced.contains(surface.surfaceID) { problems.append("SURFACE_V1 \(surface.surfaceID) twice") }
                announced.insert(surface.surfaceID)
            case .retireSurface(let surfaceID):
                if announced.remove(surfaceID) == nil { problems.append("RETIRE \(surfaceID) not announced") }
            case .frame(let frame):
                if !announced.contains(frame.surfaceID) { problems.append("FRAME on unannounced \(frame.surfaceID)") }
                if let lastSequence, frame.sequence <= lastSequence {
                    problems.append("FRAME \(frame.sequence) out of order")
                }
                lastSequence = frame.sequence
            case .drop(let drop):
                if let lastSequence, drop.firstSequence <= lastSequence {
                    problems.append("DROP \(drop.firstSequence) out of order")
                }
                lastSequence = drop.lastSequence
            default:
                break
            }
        }
        return problems
    }
}

@Suite(.timeLimit(.minutes(5))) struct PublisherStateMachineTests {
    typealias Harness = MachineHarness

    // MARK: Handshake

    @Test func versionTwoHelloIsWelcomedWithVersionTwoAndItsShare() throws {
        var harness = Harness {
            $0.heldFrameBudget = 10
            $0.maximumSubscribers = 5
        }
        let id = harness.subscribe(mode: 1, depth: 8)
        guard case .welcome(let welcome) = try #require(harness.messages(id).first) else {
            Issue.record("no WELCOME")
            return
        }
        #expect(welcome.version == 2)
        #expect(welcome.maximumHeldFrames == 2)  // share = 10 / 5
        #expect(welcome.queueDepth == 2)  // at most what it may hold
        #expect(welcome.maximumAnnouncedSurfaces == 64)
        #expect(welcome.streamID == 42)
    }

    @Test func grantsStayWithinWhatASubscriberKeepsWhateverTheConfiguration() throws {
        var harness = Harness {
            $0.extraHeldFramesPerSubscriber = 65_535
            $0.maximumAnnouncedSurfaces = 65_535
        }
        let id = harness.subscribe(mode: 1, depth: 64)
        guard case .welcome(let welcome) = try #require(harness.messages(id).first) else {
            Issue.record("no WELCOME")
            return
        }
        #expect(welcome.maximumHeldFrames == 255)
        #expect(welcome.maximumAnnouncedSurfaces == 256)
        #expect(welcome.queueDepth == 64)
    }

    @Test func versionOneHelloGetsVersionOneWelcomeAndSurfaces() throws {
        var harness = Harness()
        let id = harness.subscribe(version: 1)
        harness.publish(on: 5)
        let messages = harness.messages(id)
        guard case .welcome(let welcome) = messages[0], case .surfaceV1(let surface) = messages[1],
            case .frame(let frame) = messages[2]
        else {
            Issue.record("unexpected \(messages.map(\.type))")
            return
        }
        #expect(welcome.version == 1)
        #expect(welcome.encodedSize == 48)
        #expect(surface.surfaceID == 5 && surface.allocationSize == 12)
        #expect(frame.surfaceID == 5)
    }

    @Test func versionOneAndNonDMABufSubscribersGetDropsForDMABufFrames() {
        var harness = Harness()
        let v1 = harness.subscribe(version: 1)
        let plain = harness.subscribe()
        let capable = harness.subscribe(flags: WireHello.acceptsDMABufFlag)
        harness.publish(on: 9, backing: .dmaBuf)
        harness.advance(milliseconds: 200)
        #expect(harness.frames(v1).isEmpty && harness.drops(v1) == [WireDrop(0...0, reason: .outOfBuffers)])
        #expect(harness.frames(plain).isEmpty && harness.drops(plain) == [WireDrop(0...0, reason: .outOfBuffers)])
        #expect(harness.frames(capable).map(\.sequence) == [0])
    }

    /// §5.8: a subscriber that said it understands DROP reason 5 is told why it gets no DMA-BUF frame; one that did
    /// not still gets reason 2 (its decoder would refuse 5). A monitor that asked sees the count per subscriber,
    /// and the publisher's own format in its WELCOME; one that did not sees 0 in both places.
    @Test func aSubscriberThatCannotTakeTheSurfaceIsToldWhyWhenItAsked() throws {
        var harness = Harness()
        let plain = harness.subscribe()
        let knowing = harness.subscribe(flags: WireHello.knowsUnsupportedSurfaceFlag)
        let monitor = harness.connect()
        harness.receive(.hello(.knowingMonitor), from: monitor)
        let oldMonitor = harness.connect()
        harness.receive(.hello(.monitor), from: oldMonitor)
        harness.publish(on: 9, backing: .dmaBuf)
        harness.publish(on: 10, backing: .dmaBuf)
        harness.advance(milliseconds: 1_000)
        #expect(harness.drops(plain) == [WireDrop(0...1, reason: .outOfBuffers)])
        #expect(
            harness.drops(knowing)
                == [WireDrop(firstSequence: 0, lastSequence: 1, reason: WireDropReason.unsupportedSurfaceRawValue)]
        )
        func lastReport(_ id: Harness.ID) -> WireMonitorReport? {
            harness.messages(id).compactMap { message -> WireMonitorReport? in
                if case .monitorReport(let report) = message { report } else { nil }
            }.last
        }
        let records = try #require(lastReport(monitor)?.records)
        #expect(records.map(\.droppedUnsupportedSurface) == [2, 2])
        #expect(records.map(\.droppedOutOfBuffers) == [2, 2])
        #expect(try #require(lastReport(oldMonitor)?.records).map(\.droppedUnsupportedSurface) == [0, 0])
        func welcomeFormat(_ id: Harness.ID) -> UInt32? {
            harness.messages(id).compactMap { message -> UInt32? in
                if case .welcome(let welcome) = message { welcome.format } else { nil }
            }.first
        }
        #expect(welcomeFormat(monitor) == Harness.nv12)
        #expect(welcomeFormat(oldMonitor) == 0)
        // The bytes of reason 5 decode (this library's subscribers ask for it).
        let bytes = WireMessage.drop(WireDrop(firstSequence: 0, lastSequence: 1, reason: 5)).encoded()
        #expect(throws: Never.self) { try WireMessage.decode(bytes, descriptorCount: 0) }
    }

    struct RefusalCase: Sendable, CustomTestStringConvertible {
        let name: String
        let uid: UInt32
        let hello: [UInt8]
        let expected: WireErrorCode
        var testDescription: String { name }
    }

    static let refusals: [RefusalCase] = [
        RefusalCase(
            name: "uid not allowed",
            uid: 4242,
            hello: WireMessage.hello(WireHello(deliveryMode: 0, queueDepth: 1, formats: [Harness.nv12])).encoded(),
            expected: .notPermitted
        ),
        RefusalCase(
            name: "short HELLO of version 7",
            uid: Harness.ownUID,
            hello: hexBytes("01 00 00 00 0e 00 00 00  53 55 42 46 07 00"),
            expected: .unsupportedVersion
        ),
        RefusalCase(
            name: "bad magic",
            uid: Harness.ownUID,
            hello: hexBytes("01 00 00 00 18 00 00 00  58 58 58 58 02 00 00 00  01 00 00 00 00 00 00 00"),
            expected: .unsupportedVersion
        ),
        RefusalCase(
            name: "no common format",
            uid: Harness.ownUID,
            hello: WireMessage.hello(WireHello(deliveryMode: 0, queueDepth: 1, formats: [Harness.bgra])).encoded(),
            expected: .noCommonFormat
        ),
        RefusalCase(
            name: "RELEASE before HELLO",
            uid: Harness.ownUID,
            hello: WireMessage.release(WireRelease(sequence: 0, surfaceID: 1, flags: 0)).encoded(),
            expected: .malformedMessage
        ),
        RefusalCase(
            name: "HELLO with a bad queue depth",
            uid: Harness.ownUID,
            hello: WireMessage.hello(WireHello(deliveryMode: 1, queueDepth: 65, formats: [Harness.nv12])).encoded(),
            expected: .malformedMessage
        ),
    ]

    @Test(arguments: refusals) func refusalsAreSentOnlyAfterHelloIsRead(_ refusal: RefusalCase) {
        var harness = Harness()
        let id = harness.connect(uid: refusal.uid)
        #expect(!harness.machine.hasOutbound(id), "nothing may be sent before the HELLO is read")
        harness.receive(bytes: refusal.hello, from: id)
        #expect(harness.errors(id).map(\.code) == [refusal.expected.rawValue])
        #expect(harness.closed.contains(id))
        #expect(harness.machine.pendingCount == 0 && harness.machine.subscriberCount == 0)
    }

    @Test func subscriberAndMonitorLimitsAreEnforced() {
        var harness = Harness {
            $0.maximumSubscribers = 2
            $0.maximumMonitors = 1
        }
        _ = harness.subscribe()
        _ = harness.subscribe()
        let third = harness.subscribe()
        #expect(harness.errors(third).map(\.code) == [WireErrorCode.tooManySubscribers.rawValue])
        let monitor = harness.connect()
        harness.receive(.hello(.monitor), from: monitor)
        let second = harness.connect()
        harness.receive(.hello(.monitor), from: second)
        #expect(harness.errors(monitor).isEmpty)
        #expect(harness.errors(second).map(\.code) == [WireErrorCode.tooManySubscribers.rawValue])
    }

    @Test func silentConnectionsTimeOutWithAnErrorAndPendingHandshakesAreCapped() {
        var harness = Harness { $0.maximumPendingHandshakes = 3 }
        let ids = (0..<3).map { _ in harness.connect() }
        #expect(!harness.machine.canAcceptConnection)
        harness.advance(milliseconds: 4_999)
        #expect(harness.closed.isEmpty)
        harness.advance(milliseconds: 1)
        for id in ids {
            #expect(harness.errors(id).map(\.code) == [WireErrorCode.handshakeTimeout.rawValue])
            #expect(harness.closed.contains(id))
        }
        #expect(harness.machine.canAcceptConnection)
    }

    @Test func aFloodOfBadPeersWritesFewLogLines() {
        var harness = Harness { $0.maximumPendingHandshakes = 100_000 }
        for _ in 0..<5_000 { _ = harness.connect() }
        harness.advance(milliseconds: 5_000)
        #expect(harness.closed.count == 5_000)
        #expect(harness.logs.count == 1)
        for _ in 0..<5_000 { _ = harness.connect() }
        harness.advance(milliseconds: 11_000)
        #expect(harness.logs.count == 2)
        #expect(harness.logs[1].contains("and 4999 similar") || harness.logs[1].contains("4999"))
    }

    // MARK: Streaming

    @Test func releasesAreCheckedAndNotDeliveredCountsAsLate() {
        var harness = Harness()
        let id = harness.subscribe(mode: 1, depth: 4)
        harness.publish(on: 1)
        harness.publish(on: 2)
        #expect(harness.machine.heldFrameCount == 2)
        harness.receive(.release(WireRelease(sequence: 0, surfaceID: 1, flags: WireRelease.notDeliveredFlag)), from: id)
        #expect(harness.machine.heldFrameCount == 1)
        let snapshot = harness.machine.subscribers[0]
        #expect(snapshot.droppedLate == 1 && snapshot.delivered == 1)
        // Wrong surface for a held frame: invalidRequest, and everything it held is released.
        harness.receive(.release(WireRelease(sequence: 1, surfaceID: 1, flags: 0)), from: id)
        #expect(harness.errors(id).map(\.code) == [WireErrorCode.invalidRequest.rawValue])
        #expect(harness.machine.heldFrameCount == 0)
    }

    /// The machine drops no resource itself: a released frame's, a sent SURFACE's and a forgotten connection's
    /// (held frames, SURFACEs still queued) are handed to the IO layer through `takeReleased()`, once each, so that
    /// the publisher drops its buffers after unlocking (a buffer's last reference runs application code).
    @Test func everyResourceTheMachineLetsGoOfIsHandedOverOnce() {
        var harness = Harness()
        let id = harness.subscribe(mode: 1, depth: 4)
        harness.writable = []
        harness.publish(on: 1)  // a SURFACE and a held frame keep resource 1
        #expect(harness.machine.takeReleased().isEmpty)
        harness.writable = nil
        harness.perform([.flush(id)])
        #expect(harness.machine.takeReleased() == [1], "the SURFACE sent lets go of its resource")
        harness.receive(.release(WireRelease(sequence: 0, surfaceID: 1, flags: 0)), from: id)
        #expect(harness.machine.takeReleased() == [1], "the released frame lets go of its resource")
        #expect(harness.machine.takeReleased().isEmpty, "handed over twice")
        // Held and queued when the connection goes: both are handed over.
        harness.writable = []
        harness.publish(on: 2)
        harness.perform(harness.machine.connectionClosed(id, reason: "end of file", now: harness.now))
        #expect(harness.machine.takeReleased() == [2, 2])
        // At stop, likewise (a subscriber that read, one that did not).
        let reader = harness.subscribe(mode: 1, depth: 4)
        let stuck = harness.subscribe(mode: 1, depth: 4)
        harness.writable = [reader]
        harness.publish(on: 3)
        #expect(harness.machine.takeReleased() == [3], "the reader's SURFACE sent")
        harness.writable = nil
        harness.perform(harness.machine.stop(now: harness.now))
        #expect(harness.machine.takeReleased() == [3, 3, 3], "held by both, and the SURFACE queued for \(stuck)")
        #expect(harness.machine.heldFrameCount == 0)
    }

    @Test func anErrorFromASubscriberIsNeverAnswered() {
        var harness = Harness()
        let id = harness.subscribe()
        harness.receive(.error(WireErrorMessage(.invalidSurface, "bad \u{1B}[31m surface")), from: id)
        #expect(harness.errors(id).isEmpty)
        #expect(harness.closed.contains(id))
        #expect(harness.logs.contains { $0.contains("\\u{1B}[31m") })
    }

    @Test func dropsAreCoalescedIntoRangesInSequenceOrder() throws {
        var harness = Harness()
        let id = harness.subscribe()
        for _ in 0..<3 { _ = harness.machine.reportDropped(reason: .discontinuity, count: 1, now: harness.now) }
        _ = harness.machine.reportDropped(reason: .outOfBuffers, count: 2, now: harness.now)
        harness.publish(on: 1)
        #expect(harness.drops(id) == [WireDrop(0...2, reason: .discontinuity), WireDrop(3...4, reason: .outOfBuffers)])
        #expect(harness.frames(id).map(\.sequence) == [5])
        #expect(harness.frames(id)[0].flags & WireFrame.discontinuityFlag != 0)
        #expect(harness.violations(id, maximumAnnounced: 64).isEmpty)
    }

    @Test func aPendingDropIsSentWithinTheFlushInterval() {
        var harness = Harness()
        let id = harness.subscribe()
        _ = harness.machine.reportDropped(reason: .outOfBuffers, count: 1, now: harness.now)
        #expect(harness.drops(id).isEmpty)
        harness.advance(milliseconds: 100)
        #expect(harness.drops(id) == [WireDrop(0...0, reason: .outOfBuffers)])
    }

    @Test func aNewDropRangeAsksTheIOLayerToWakeForItsFlush() {
        var harness = Harness()
        _ = harness.subscribe()
        func wakes(_ actions: [Harness.Machine.Action]) -> Bool {
            actions.contains { if case .deadlineChanged = $0 { true } else { false } }
        }
        let first = harness.machine.reportDropped(reason: .outOfBuffers, count: 1, now: harness.now)
        let second = harness.machine.reportDropped(reason: .outOfBuffers, count: 1, now: harness.now)
        let third = harness.machine.reportDropped(reason: .discontinuity, count: 1, now: harness.now)
        #expect(wakes(first?.1 ?? []))
        #expect(!wakes(second?.1 ?? []))  // it only extends the pending range
        #expect(wakes(third?.1 ?? []))  // another reason: a new range
        #expect(harness.machine.nextDeadline() == harness.now + 100_000_000)
    }

    @Test func hugeDropCountsSaturateInsteadOfTrapping() throws {
        var harness = Harness()
        let id = harness.subscribe()
        let firstResult = harness.machine.reportDropped(reason: .discontinuity, count: .max / 2, now: harness.now)
        let secondResult = harness.machine.reportDropped(reason: .discontinuity, count: .max, now: harness.now)
        let first = try #require(firstResult)
        let second = try #require(secondResult)
        #expect(first.0 == 0...(UInt64.max / 2 - 1))
        #expect(second.0 == (UInt64.max / 2)...(UInt64.max - 1))
        harness.advance(milliseconds: 100)
        #expect(harness.machine.subscribers[0].droppedDiscontinuity == .max)
        #expect(harness.machine.published == .max)
        #expect(harness.drops(id) == [WireDrop(0...(UInt64.max - 1), reason: .discontinuity)])
        // The sequence space is used up: nothing more can be published, and nothing traps or repeats a number.
        #expect(harness.machine.isSequenceSpaceExhausted)
        #expect(harness.machine.reportDropped(reason: .discontinuity, count: 1, now: harness.now) == nil)
        #expect(harness.machine.beginFrame(format: Harness.nv12, width: 4, height: 2, discontinuity: false) == nil)
    }

    @Test func discontinuityMarksGeometryChangesButNotTheFirstFrame() {
        var harness = Harness()
        let id = harness.subscribe()
        harness.publish(on: 1)
        harness.publish(on: 1, discontinuity: true)
        harness.publish(on: 1)
        _ = harness.machine.beginFrame(format: Harness.nv12, width: 8, height: 2, discontinuity: false)
        let flags = harness.frames(id).map { $0.flags & WireFrame.discontinuityFlag != 0 }
        #expect(flags == [false, true, false])
        let plan = harness.machine.beginFrame(format: Harness.nv12, width: 4, height: 2, discontinuity: false)
        #expect(plan?.isDiscontinuity == true)
    }

    // MARK: Surfaces (item 9)

    @Test func theSurfaceAFrameIsAboutToUseIsNeverRetired() {
        // Queue 4 + extra 0: holds 4; the announced limit is then max(2, 4 + 1) = 5.
        var harness = Harness {
            $0.maximumAnnouncedSurfaces = 2
            $0.extraHeldFramesPerSubscriber = 0
        }
        let id = harness.subscribe(mode: 1, depth: 4)
        var generator = SplitMix64(seed: 9)
        var held: [(UInt64, UInt64)] = []
        for _ in 0..<2_000 {
            let surface = 1 + generator.next() % 9
            let sequence = harness.publish(on: surface)
            if harness.frames(id).last?.sequence == sequence { held.append((sequence, surface)) }
            if generator.next() % 3 == 0, !held.isEmpty {
                let (sequence, surface) = held.remove(at: Int(generator.next() % UInt64(held.count)))
                harness.receive(.release(WireRelease(sequence: sequence, surfaceID: surface, flags: 0)), from: id)
            }
        }
        harness.advance(milliseconds: 100)
        #expect(harness.errors(id).isEmpty)
        #expect(harness.frames(id).count > 500)
        #expect(harness.violations(id, maximumAnnounced: 5) == [])
    }

    @Test func aSurfaceThePoolFreesIsRetiredEverywhere() {
        var harness = Harness()
        let a = harness.subscribe()
        let b = harness.subscribe()
        harness.publish(on: 3)
        for id in [a, b] {
            harness.receive(.release(WireRelease(sequence: 0, surfaceID: 3, flags: 0)), from: id)
        }
        harness.perform(harness.machine.surfaceFreed(3))
        for id in [a, b] {
            #expect(harness.messages(id).last == .retireSurface(surfaceID: 3))
            #expect(harness.machine.subscribers.allSatisfy { $0.announcedSurfaces.isEmpty })
        }
        // Announced again if ever used again (a new SURFACE), never a FRAME on a retired id.
        harness.publish(on: 3)
        #expect(harness.violations(a, maximumAnnounced: 64) == [])
    }

    // MARK: Hoarders (item 5)

    @Test func hoardersCostOnlyThemselves() {
        // A 12-buffer pool, reserve 2: budget 10 over 5 subscribers, a share of 2 each.
        var harness = Harness { $0.maximumSubscribers = 5 }
        harness.machine.learnPoolCapacity(12)
        let queueHoarder = harness.subscribe(mode: 1, depth: 64)
        let latestHoarders = (0..<3).map { _ in harness.subscribe() }
        let honest = harness.subscribe()
        for frame in 0..<600 {
            let surface = UInt64(frame % 12) + 1
            let sequence = harness.publish(on: surface)
            if harness.frames(honest).last?.sequence == sequence {
                harness.receive(.release(WireRelease(sequence: sequence, surfaceID: surface, flags: 0)), from: honest)
            }
            #expect(harness.machine.heldFrameCount <= 10)
        }
        harness.advance(milliseconds: 100)
        #expect(harness.frames(honest).count == 600)
        for hoarder in [queueHoarder] + latestHoarders {
            #expect(harness.frames(hoarder).count == 2)
            #expect(harness.drops(hoarder) == [WireDrop(2...599, reason: .outOfBuffers)])
        }
    }

    // MARK: Slow readers, monitors, stop

    @Test func aSubscriberThatStopsReadingGetsTooSlowAndLosesItsFrames() {
        var harness = Harness { $0.slowSubscribers.maximumQueuedMessages = 8 }
        let slow = harness.subscribe(mode: 1, depth: 64)
        let fine = harness.subscribe()
        harness.writable = [fine]
        for sequence in 0..<20 {
            harness.publish(on: 1)
            harness.receive(.release(WireRelease(sequence: UInt64(sequence), surfaceID: 1, flags: 0)), from: fine)
        }
        #expect(harness.machine.subscriberCount == 1)
        #expect(harness.machine.heldFrameCount == 0)
        #expect(harness.machine.outbound(of: slow).map(\.message.type) == [.error])
        if case .error(let error) = harness.machine.outbound(of: slow).first?.message {
            #expect(error.code == WireErrorCode.tooSlow.rawValue)
        }
        // It never reads: the grace period ends the connection without the ERROR.
        harness.advance(milliseconds: 1_000)
        #expect(harness.closed.contains(slow))
        #expect(harness.frames(fine).count == 20)
    }

    @Test func monitorsGetAReportAtOnceAndEverySecond() throws {
        var harness = Harness()
        let subscriber = harness.subscribe()
        harness.publish(on: 1)
        let monitor = harness.connect()
        harness.receive(.hello(.monitor), from: monitor)
        harness.advance(milliseconds: 1_000)
        let reports = harness.messages(monitor).compactMap { message -> WireMonitorReport? in
            if case .monitorReport(let report) = message { report } else { nil }
        }
        #expect(reports.count == 2)
        let record = try #require(reports.last?.records.first)
        #expect(record.subscriberID == subscriber.rawValue && record.delivered == 1 && record.held == 1)
        // A monitor may only say goodbye.
        harness.receive(.release(WireRelease(sequence: 0, surfaceID: 1, flags: 0)), from: monitor)
        #expect(harness.errors(monitor).map(\.code) == [WireErrorCode.malformedMessage.rawValue])
    }

    @Test func stopSendsEndOfStreamOnceAndReleasesEverything() {
        var harness = Harness()
        let subscriber = harness.subscribe()
        let pending = harness.connect()
        harness.publish(on: 1)
        harness.perform(harness.machine.stop(now: harness.now))
        #expect(harness.messages(subscriber).last == .endOfStream(WireEndOfStream(lastSequence: 0, reason: 0)))
        #expect(harness.errors(pending).map(\.code) == [WireErrorCode.shuttingDown.rawValue])
        #expect(harness.machine.heldFrameCount == 0)
        #expect(harness.machine.stop(now: harness.now).isEmpty)
        #expect(harness.machine.beginFrame(format: Harness.nv12, width: 4, height: 2, discontinuity: false) == nil)
    }
}

extension WireWelcome {
    var encodedSize: Int { WireMessage.welcome(self).encoded().count }
}

/// The publisher reaps the subscribers' release rings after a frame's wake-ups when the machine says the releases
/// waiting there cannot change what it admits (docs/PROTOCOL.md §9.5). Checked against the order it replaces:
/// two machines get the same publishes and releases, one handling the releases first always, the other after the
/// frame whenever ``PublisherStateMachine/admitsRegardlessOfReleases(sequence:format:surfaceID:isConversion:)``
/// says so; every subscriber must receive the same messages from both.
@Suite(.heavyWork, .timeLimit(.minutes(5))) struct ReapAfterWakingTests {
    typealias Harness = MachineHarness

    /// One frame on `surface`: `releases` handled before it (`first`), or after it when the machine allows.
    /// Returns whether the releases were handled after the frame.
    @discardableResult
    static func publish(
        _ harness: inout Harness,
        on surface: UInt64,
        releasing releases: [(Harness.ID, WireRelease)],
        reapAfterWhenAllowed: Bool
    ) -> Bool {
        let plan = harness.machine.beginFrame(format: Harness.nv12, width: 4, height: 2, discontinuity: false)!
        let template = WireFrame(
            sequence: plan.sequence,
            surfaceID: 0,
            presentationTime: .invalid,
            duration: .invalid,
            publishTime: harness.now,
            bytesUsed: 0,
            flags: plan.isDiscontinuity ? WireFrame.discontinuityFlag : 0
        )
        let after =
            reapAfterWhenAllowed
            && harness.machine.admitsRegardlessOfReleases(
                sequence: plan.sequence,
                format: Harness.nv12,
                surfaceID: surface,
                isConversion: false
            )
        if !after { for (id, release) in releases { harness.receive(.release(release), from: id) } }
        harness.perform(
            harness.machine.deliver(
                template,
                format: Harness.nv12,
                representation: Harness.representation(surface),
                isConversion: false,
                now: harness.now
            )
        )
        if after { for (id, release) in releases { harness.receive(.release(release), from: id) } }
        return after
    }

    @Test(arguments: [(1 as UInt16, 2 as UInt16), (1, 4), (0, 1)])
    func reapingAfterTheFrameChangesNothingASubscriberSees(mode: UInt16, depth: UInt16) {
        func make() -> Harness {
            Harness {
                $0.maximumAnnouncedSurfaces = 3
                $0.extraHeldFramesPerSubscriber = 0
            }
        }
        var first = make()
        var later = make()
        let ids = (0..<3).map { _ in first.subscribe(mode: mode, depth: depth) }
        #expect((0..<3).map { _ in later.subscribe(mode: mode, depth: depth) } == ids)
        var generator = SplitMix64(seed: 13 &+ UInt64(depth))
        // What each subscriber holds (sequence, surface), the same in both machines.
        var held: [Harness.ID: [(UInt64, UInt64)]] = [:]
        var pending: [(Harness.ID, WireRelease)] = []
        var reapedAfter = 0
        var reapedFirst = 0
        for _ in 0..<3_000 {
            let surface = 1 + generator.next() % 7
            let releases = pending
            pending = []
            Self.publish(&first, on: surface, releasing: releases, reapAfterWhenAllowed: false)
            if Self.publish(&later, on: surface, releasing: releases, reapAfterWhenAllowed: true) {
                if !releases.isEmpty { reapedAfter += 1 }
            } else if !releases.isEmpty {
                reapedFirst += 1
            }
            for id in ids {
                if let frame = first.frames(id).last, frame.sequence == later.frames(id).last?.sequence,
                    !(held[id] ?? []).contains(where: { $0.0 == frame.sequence })
                {
                    held[id, default: []].append((frame.sequence, frame.surfaceID))
                }
                // Each subscriber releases a random share of what it holds; the releases wait for the next frame.
                while let list = held[id], !list.isEmpty, generator.next() % 3 != 0 {
                    let (sequence, surfaceID) = held[id]!.remove(at: Int(generator.next() % UInt64(list.count)))
                    pending.append((id, WireRelease(sequence: sequence, surfaceID: surfaceID, flags: 0)))
                }
            }
            first.advance(milliseconds: 1)
            later.advance(milliseconds: 1)
        }
        for id in ids {
            #expect(first.messages(id) == later.messages(id))
            #expect(first.errors(id).isEmpty)
        }
        // Both orders occurred: the predicate let most frames reap afterwards and refused where it mattered.
        #expect(reapedAfter > 100)
        #expect(reapedFirst > 10)
    }
}
