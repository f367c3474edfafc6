import Testing
import TestSupport

@testable import FrameBus

/// The subscriber's protocol state machine and event queue, driven directly: no sockets, no threads.
@Suite(.timeLimit(.minutes(5))) struct SubscriberStateMachineTests {
    static let format = PixelFormat.yuv420BiPlanarVideoRange8

    static func welcome(format: PixelFormat = format, stream: UInt64 = 7, version: UInt16 = 2) -> WireMessage {
        .welcome(
            WireWelcome(
                version: version,
                deliveryMode: 1,
                queueDepth: 4,
                maximumHeldFrames: 8,
                format: format.fourCC,
                maximumMessageSize: 4096,
                streamID: stream,
                subscriberID: 1,
                nextSequence: 0,
                maximumAnnouncedSurfaces: 256
            )
        )
    }

    static func surface(
        _ id: UInt64,
        format: PixelFormat = format,
        width: UInt32 = 64,
        height: UInt32 = 48,
        allocationSize: UInt64 = 64 * 48 * 3 / 2,
        backing: WireBacking = .memfd,
        modifier: UInt64 = WireSurface.linearModifier
    ) -> WireMessage {
        .surface(
            WireSurface(
                surfaceID: id,
                pixelFormat: format.fourCC,
                width: width,
                height: height,
                backing: backing,
                modifier: modifier,
                descriptorByteCounts: [allocationSize],
                planes: format.isCompressed
                    ? []
                    : [
                        WireSurfacePlane(offset: 0, bytesPerRow: 64, width: 64, height: 48, bytesPerElement: 1),
                        WireSurfacePlane(offset: 64 * 48, bytesPerRow: 64, width: 32, height: 24, bytesPerElement: 2),
                    ]
            )
        )
    }

    static func frame(
        _ sequence: UInt64,
        surface: UInt64 = 1,
        bytesUsed: UInt64 = 100,
        flags: UInt32 = 0
    )
        -> WireMessage
    {
        .frame(
            WireFrame(
                sequence: sequence,
                surfaceID: surface,
                presentationTime: .invalid,
                duration: .invalid,
                publishTime: 0,
                bytesUsed: bytesUsed,
                flags: flags
            )
        )
    }

    static func drop(_ first: UInt64, _ last: UInt64, _ reason: WireDropReason = .outOfBuffers) -> WireMessage {
        .drop(WireDrop(firstSequence: first, lastSequence: last, reason: reason.rawValue))
    }

    /// A machine past its handshake, with surface 1 announced.
    static func activeMachine(format: PixelFormat = format) -> SubscriberStateMachine {
        var machine = SubscriberStateMachine(acceptedFormats: [format], delivery: .queue(depth: 4))
        _ = machine.connected()
        _ = machine.received(welcome(format: format))
        if !format.isCompressed { _ = machine.received(surface(1)) }
        return machine
    }

    /// The ERROR code the machine replies with, if the action closes the connection with a reply.
    static func replyCode(_ action: SubscriberStateMachine.Action) -> WireErrorCode? {
        guard case .close(_, let reply?) = action else { return nil }
        return WireErrorCode(rawValue: reply.code)
    }

    // MARK: Handshake

    @Test func connectingSendsHelloWithTheFormatsAndDelivery() {
        var machine = SubscriberStateMachine(
            acceptedFormats: [.compressedYUV420BiPlanarVideoRange8, .yuv420BiPlanarVideoRange8],
            delivery: .queue(depth: 16)
        )
        let hello = machine.connected()
        #expect(
            hello
                == .hello(
                    WireHello(
                        version: 2,
                        kind: .subscriber,
                        deliveryMode: 1,
                        queueDepth: 16,
                        flags: WireHello.acceptsDMABufFlag | WireHello.wantsStatusFlag
                            | WireHello.knowsUnsupportedSurfaceFlag,
                        formats: [
                            PixelFormat.compressedYUV420BiPlanarVideoRange8.fourCC,
                            PixelFormat.yuv420BiPlanarVideoRange8.fourCC,
                        ]
                    )
                )
        )
    }

    struct HandshakeCase: Sendable, CustomTestStringConvertible {
        var name: String
        var reply: WireMessage
        var expectedCode: FrameBusError.Code?
        var testDescription: String { name }
    }

    @Test(arguments: [
        HandshakeCase(name: "welcome", reply: welcome(), expectedCode: nil),
        HandshakeCase(
            name: "not permitted",
            reply: .error(WireErrorMessage(code: WireErrorCode.notPermitted.rawValue, reason: "uid")),
            expectedCode: .permissionDenied
        ),
        HandshakeCase(
            name: "no common format",
            reply: .error(WireErrorMessage(code: WireErrorCode.noCommonFormat.rawValue, reason: "no")),
            expectedCode: .refused
        ),
        HandshakeCase(
            name: "welcome with a format we did not ask for",
            reply: welcome(format: .bgra8),
            expectedCode: .protocolViolation
        ),
        HandshakeCase(name: "frame before welcome", reply: frame(0), expectedCode: .protocolViolation),
        HandshakeCase(
            name: "a version-1 WELCOME to our version-2 HELLO",
            reply: welcome(version: 1),
            expectedCode: .protocolViolation
        ),
    ])
    func handshakeRepliesAreCheckedInEveryState(_ testCase: HandshakeCase) {
        var machine = SubscriberStateMachine(acceptedFormats: [Self.format], delivery: .latestOnly)
        _ = machine.connected()
        let action = machine.received(testCase.reply)
        switch (action, testCase.expectedCode) {
        case (.established(let session, let isReconnect), nil):
            #expect(session.format == Self.format)
            #expect(!isReconnect)
        case (.close(let error, _), let code?):
            #expect(error.code == code)
            #expect(machine.session == nil)
        default:
            Issue.record("\(testCase.name): \(action)")
        }
    }

    @Test func aPublishersErrorReasonHasItsControlCharactersEscaped() {
        var machine = SubscriberStateMachine(acceptedFormats: [Self.format], delivery: .latestOnly)
        _ = machine.connected()
        let action = machine.received(
            .error(WireErrorMessage(code: 3, reason: "busy\u{1B}[2J\u{1B}]0;pwned\u{07}\nnext"))
        )
        guard case .close(let error, _) = action else {
            Issue.record("\(action)")
            return
        }
        let message = error.message ?? ""
        #expect(!message.unicodeScalars.contains { $0.value < 0x20 || $0.value == 0x7F })
        #expect(message.contains("busy\\u{1B}[2J"))
    }

    // MARK: Hostile values (item 2)

    @Test func aDropOfEverySequenceNumberIsReportedWithoutTrapping() {
        var machine = Self.activeMachine()
        let action = machine.received(Self.drop(0, .max))
        #expect(
            action
                == .reportDrop(SubscriberDrop(reason: .outOfBuffers, sequences: 0...UInt64.max, frameCount: .max))
        )
    }

    /// DROP reason 5 (`unsupportedSurface`, PROTOCOL.md §5.8), which our HELLO asks for: reported as `outOfBuffers`,
    /// with a notice for the IO layer to say why; reason 4 from a publisher we did not ask for STATUS, and reason 6, are
    /// malformed.
    @Test func aDropOfSurfacesWeCannotTakeIsOutOfBuffersWithANotice() {
        var machine = Self.activeMachine()
        #expect(!machine.unsupportedSurfaceNoticePending)
        let action = machine.received(.drop(WireDrop(firstSequence: 3, lastSequence: 5, reason: 5)))
        #expect(action == .reportDrop(SubscriberDrop(reason: .outOfBuffers, sequences: 3...5)))
        #expect(machine.unsupportedSurfaceNoticePending)
        var withoutStatus = Self.activeMachine()
        withoutStatus.receivesStatus = false
        let reason4 = WireDrop(firstSequence: 3, lastSequence: 5, reason: 4)
        #expect(Self.replyCode(withoutStatus.received(.drop(reason4))) != nil)
        var other = Self.activeMachine()
        #expect(Self.replyCode(other.received(.drop(WireDrop(firstSequence: 3, lastSequence: 5, reason: 6)))) != nil)
    }

    @Test func dropCountsFromAPublisherSaturate() {
        var queue = SubscriberEventQueue<Int>(depth: 1)
        let huge = UInt64(Int64.max)
        var machine = Self.activeMachine()
        for range in [0...(huge - 1), huge...(2 * huge - 1)] {
            guard case .reportDrop(let drop) = machine.received(Self.drop(range.lowerBound, range.upperBound)) else {
                Issue.record("no drop")
                return
            }
            queue.append(drop: drop)
        }
        // Contiguous and of one reason: one report, whose count is exact (2^64 - 2 fits in UInt64).
        guard case .dropped(let merged)? = queue.popFirst() else {
            Issue.record("no merged drop")
            return
        }
        #expect(merged.sequences == 0...(2 * huge - 1))
        #expect(merged.frameCount == 2 * huge)
        #expect(Saturating.add(Int.max - 1, huge) == Int.max)
        #expect(Saturating.add(UInt64.max, 1) == .max)
    }

    @Test func theDropMarkerOfAnUnboundedRangeIsTotal() {
        let marker = SubscriberCore.marker(for: SubscriberDrop(reason: .outOfBuffers, sequences: 0...UInt64.max))
        #expect(marker.busSequenceRange == 0...UInt64.max)
        #expect(marker.busDroppedFrameCount == UInt64(Int64.max))
        // Hostile attachments (a count that runs past UInt64.max, a last number before the first) do not trap.
        var attachments = SampleAttachments()
        attachments[.busSequenceNumber] = .integer(-1)
        attachments[.busDroppedFrameCount] = .integer(.max)
        let overflowing = SampleBuffer(droppedFrameReason: .outOfBuffers, timing: .invalid, attachments: attachments)
        #expect(overflowing.busSequenceRange == UInt64.max...UInt64.max)
        attachments[.busLastSequenceNumber] = .integer(5)
        let backwards = SampleBuffer(droppedFrameReason: .outOfBuffers, timing: .invalid, attachments: attachments)
        #expect(backwards.busSequenceRange == UInt64.max...UInt64.max)
    }

    struct ViolationCase: Sendable, CustomTestStringConvertible {
        var name: String
        var messages: [WireMessage]
        var reply: WireErrorCode
        var testDescription: String { name }
    }

    @Test(arguments: [
        ViolationCase(name: "frame on an unknown surface", messages: [frame(0, surface: 9)], reply: .malformedMessage),
        ViolationCase(name: "sequence goes back", messages: [frame(5), frame(5)], reply: .malformedMessage),
        ViolationCase(
            name: "bytesUsed beyond the surface",
            messages: [frame(0, bytesUsed: .max)],
            reply: .malformedMessage
        ),
        ViolationCase(name: "surface re-announced while live", messages: [surface(1)], reply: .malformedMessage),
        ViolationCase(name: "surface id 0", messages: [surface(0)], reply: .malformedMessage),
        ViolationCase(
            name: "surface of another format",
            messages: [surface(2, format: .bgra8)],
            reply: .invalidSurface
        ),
        ViolationCase(name: "surface of 0 bytes", messages: [surface(2, allocationSize: 0)], reply: .invalidSurface),
        ViolationCase(
            name: "surface beyond 4 GiB",
            messages: [surface(2, allocationSize: .max)],
            reply: .invalidSurface
        ),
        ViolationCase(
            name: "retire of an unknown surface",
            messages: [.retireSurface(surfaceID: 9)],
            reply: .malformedMessage
        ),
        ViolationCase(name: "a second WELCOME", messages: [welcome()], reply: .malformedMessage),
        ViolationCase(
            name: "a RELEASE from the publisher",
            messages: [.release(WireRelease(sequence: 0, surfaceID: 1, flags: 0))],
            reply: .malformedMessage
        ),
    ])
    func aPublisherThatBreaksTheProtocolGetsAnErrorAndIsClosed(_ testCase: ViolationCase) {
        var machine = Self.activeMachine()
        var last = SubscriberStateMachine.Action.none
        for message in testCase.messages { last = machine.received(message) }
        #expect(Self.replyCode(last) == testCase.reply, "\(last)")
        #expect(machine.session == nil)
        // A closed machine ignores whatever still arrives.
        #expect(machine.received(Self.frame(100)) == .none)
    }

    @Test func aFrameBeyondTheGrantedHoldingIsMalformed() {
        var machine = Self.activeMachine()  // maximumHeldFrames 8
        guard case .deliverFrame = machine.received(Self.frame(0), heldFrames: 7) else {
            Issue.record("the eighth held frame was refused")
            return
        }
        #expect(Self.replyCode(machine.received(Self.frame(1), heldFrames: 8)) == .malformedMessage)
    }

    @Test func aRetiredSurfaceIdMayBeAnnouncedAgain() {
        var machine = Self.activeMachine()
        #expect(machine.received(.retireSurface(surfaceID: 1)) == .retireSurface(surfaceID: 1))
        guard case .importSurface = machine.received(Self.surface(1)) else {
            Issue.record("re-announce after retire refused")
            return
        }
    }

    @Test func aFloodOfSurfacesIsCutOffAtTheLimit() {
        var machine = SubscriberStateMachine(
            acceptedFormats: [Self.format],
            delivery: .latestOnly,
            limits: .init(maximumSurfaces: 8)
        )
        _ = machine.connected()
        _ = machine.received(Self.welcome())
        for id in 1...8 {
            guard case .importSurface = machine.received(Self.surface(UInt64(id))) else {
                Issue.record("surface \(id) refused")
                return
            }
        }
        #expect(Self.replyCode(machine.received(Self.surface(9))) == .invalidSurface)
    }

    @Test func aTinyCompressedSurfaceClaimingAHugeImageIsRefused() {
        var machine = Self.activeMachine(format: .compressedYUV420BiPlanarVideoRange8)
        let tiny = Self.surface(
            1,
            format: .compressedYUV420BiPlanarVideoRange8,
            width: 16384,
            height: 16384,
            allocationSize: 4096
        )
        #expect(Self.replyCode(machine.received(tiny)) == .invalidSurface)

        var honest = Self.activeMachine(format: .compressedYUV420BiPlanarVideoRange8)
        let needed = try? SurfaceCodec.maximumCompressedByteCount(
            width: 64,
            height: 48,
            format: .compressedYUV420BiPlanarVideoRange8
        )
        let sized = Self.surface(
            1,
            format: .compressedYUV420BiPlanarVideoRange8,
            allocationSize: UInt64(needed ?? 0)
        )
        guard case .importSurface = honest.received(sized) else {
            Issue.record("an honestly sized compressed surface was refused")
            return
        }
    }

    // MARK: Discontinuities

    @Test func discontinuitiesAreFlaggedOnTheNextFrame() {
        var machine = Self.activeMachine()
        #expect(machine.received(Self.frame(0)) == .deliverFrame(Self.frameValue(0), discontinuity: []))
        _ = machine.received(Self.drop(1, 3, .discontinuity))
        #expect(machine.received(Self.frame(4)) == .deliverFrame(Self.frameValue(4), discontinuity: .samplesDropped))
        #expect(
            machine.received(Self.frame(5, flags: WireFrame.discontinuityFlag))
                == .deliverFrame(Self.frameValue(5, flags: WireFrame.discontinuityFlag), discontinuity: .unknown)
        )
        // A new geometry is a format change.
        _ = machine.received(Self.surface(2, width: 32, height: 24, allocationSize: 64 * 48 * 3 / 2))
        #expect(
            machine.received(Self.frame(6, surface: 2))
                == .deliverFrame(Self.frameValue(6, surface: 2), discontinuity: .formatChange)
        )
        // Reconnecting: the same stream is an unknown discontinuity, a new one a stream discontinuity.
        machine.closed()
        _ = machine.connected()
        let reconnected = machine.received(Self.welcome(stream: 7))
        guard case .established(_, isReconnect: true) = reconnected else {
            Issue.record("\(reconnected)")
            return
        }
        _ = machine.received(Self.surface(1))
        #expect(machine.received(Self.frame(9)) == .deliverFrame(Self.frameValue(9), discontinuity: .unknown))
        machine.closed()
        _ = machine.connected()
        _ = machine.received(Self.welcome(stream: 8))
        _ = machine.received(Self.surface(1))
        #expect(
            machine.received(Self.frame(0)) == .deliverFrame(Self.frameValue(0), discontinuity: .streamDiscontinuity)
        )
    }

    static func frameValue(_ sequence: UInt64, surface: UInt64 = 1, flags: UInt32 = 0) -> WireFrame {
        guard case .frame(let value) = frame(sequence, surface: surface, flags: flags) else { fatalError() }
        return value
    }
}

/// The bounded, ordered queue between a subscriber's connection thread and its consumer (item 7).
@Suite(.timeLimit(.minutes(5))) struct SubscriberEventQueueTests {
    typealias Queue = SubscriberEventQueue<Int>

    static func drops(_ queue: Queue) -> [SubscriberDrop] {
        queue.entries.compactMap { if case .dropped(let drop) = $0 { drop } else { nil } }
    }

    static func frames(_ queue: Queue) -> [Int] {
        queue.entries.compactMap { if case .frame(let frame, _) = $0 { frame } else { nil } }
    }

    @Test func latestOnlyKeepsTheNewestFrameAndReportsTheReplacedOnesAsOneRange() {
        var queue = Queue(depth: 1)
        let first = queue.append(frame: 10, sequence: 10)
        let second = queue.append(frame: 11, sequence: 11)
        let third = queue.append(frame: 12, sequence: 12)
        #expect(first.isEmpty)
        #expect(second == [10])
        #expect(third == [11])
        #expect(Self.frames(queue) == [12])
        #expect(Self.drops(queue) == [SubscriberDrop(reason: .frameWasLate, sequences: 10...11)])
    }

    /// A latest-only consumer slower than the stream that takes a drop report gets the frame behind it next: the
    /// frame is promised, and frames arriving meanwhile are late on arrival, reported after it.
    @Test func aConsumerThatTakesADropReportGetsTheFrameBehindItNext() {
        var queue = Queue(depth: 1)
        #expect(queue.append(frame: 10, sequence: 10).isEmpty)
        #expect(queue.append(frame: 11, sequence: 11) == [10])
        guard case .dropped(let first)? = queue.popFirst() else {
            Issue.record("no drop report first")
            return
        }
        #expect(first.sequences == 10...10)
        #expect(queue.promisedSequence == 11)
        // While the consumer handles the report, two frames arrive: each is late at once, 11 stays.
        #expect(queue.append(frame: 12, sequence: 12) == [12])
        #expect(queue.append(frame: 13, sequence: 13) == [13])
        #expect(Self.frames(queue) == [11])
        #expect(Self.drops(queue) == [SubscriberDrop(reason: .frameWasLate, sequences: 12...13)])
        #expect(queue.frameCount == 1)
        guard case .frame(11, 11)? = queue.popFirst() else {
            Issue.record("the promised frame was not next")
            return
        }
        #expect(queue.promisedSequence == nil)
        guard case .dropped(let second)? = queue.popFirst() else {
            Issue.record("no report of the late arrivals")
            return
        }
        #expect(second.sequences == 12...13)
        // Nothing waits behind that report: no promise, and latest-only replacement resumes.
        #expect(queue.promisedSequence == nil)
        #expect(queue.append(frame: 14, sequence: 14).isEmpty)
        #expect(queue.append(frame: 15, sequence: 15) == [14])
        #expect(Self.frames(queue) == [15])
    }

    /// The same with a queue: the promised frame stays, the oldest of the others is replaced, order is kept.
    @Test func aQueueReplacesTheOldestFrameThatIsNotPromised() {
        var queue = Queue(depth: 2)
        queue.append(drop: SubscriberDrop(reason: .outOfBuffers, sequences: 0...1))
        #expect(queue.append(frame: 2, sequence: 2).isEmpty)
        #expect(queue.append(frame: 3, sequence: 3).isEmpty)
        guard case .dropped? = queue.popFirst() else {
            Issue.record("no drop report first")
            return
        }
        #expect(queue.promisedSequence == 2)
        #expect(queue.append(frame: 4, sequence: 4) == [3])
        #expect(Self.frames(queue) == [2, 4])
        #expect(queue.entries.count == 3)
        guard case .frame(2, 2)? = queue.popFirst(), case .dropped(let late)? = queue.popFirst(),
            case .frame(4, 4)? = queue.popFirst()
        else {
            Issue.record("not in order: promised frame, the replaced one's report, the newest")
            return
        }
        #expect(late == SubscriberDrop(reason: .frameWasLate, sequences: 3...3))
        #expect(queue.isEmpty)
        // Removing every frame (cancellation) ends a promise too.
        queue.append(drop: SubscriberDrop(reason: .outOfBuffers, sequences: 5...5))
        _ = queue.append(frame: 6, sequence: 6)
        _ = queue.popFirst()
        #expect(queue.promisedSequence == 6)
        #expect(queue.removeAllFrames() == [6])
        #expect(queue.promisedSequence == nil)
    }

    @Test func aQueueKeepsDepthFramesInOrder() {
        var queue = Queue(depth: 3)
        for sequence in 0..<3 {
            let replaced = queue.append(frame: sequence, sequence: UInt64(sequence))
            #expect(replaced.isEmpty)
        }
        let replaced = queue.append(frame: 3, sequence: 3)
        #expect(replaced == [0])
        #expect(Self.frames(queue) == [1, 2, 3])
        guard case .dropped(let drop)? = queue.popFirst() else {
            Issue.record("the late drop is not first")
            return
        }
        #expect(drop.sequences == 0...0)
    }

    struct DropCase: Sendable, CustomTestStringConvertible {
        var name: String
        var drops: [SubscriberDrop]
        var expected: [SubscriberDrop]
        var testDescription: String { name }
    }

    @Test(arguments: [
        DropCase(
            name: "contiguous, same reason",
            drops: [.init(reason: .outOfBuffers, sequences: 1...2), .init(reason: .outOfBuffers, sequences: 3...3)],
            expected: [.init(reason: .outOfBuffers, sequences: 1...3)]
        ),
        DropCase(
            name: "gap",
            drops: [.init(reason: .outOfBuffers, sequences: 1...2), .init(reason: .outOfBuffers, sequences: 4...4)],
            expected: [.init(reason: .outOfBuffers, sequences: 1...2), .init(reason: .outOfBuffers, sequences: 4...4)]
        ),
        DropCase(
            name: "other reason",
            drops: [.init(reason: .outOfBuffers, sequences: 1...2), .init(reason: .discontinuity, sequences: 3...3)],
            expected: [.init(reason: .outOfBuffers, sequences: 1...2), .init(reason: .discontinuity, sequences: 3...3)]
        ),
        DropCase(
            name: "up to UInt64.max, then more",
            drops: [
                .init(reason: .outOfBuffers, sequences: 0...UInt64.max), .init(reason: .outOfBuffers, sequences: 0...0),
            ],
            expected: [
                .init(reason: .outOfBuffers, sequences: 0...UInt64.max), .init(reason: .outOfBuffers, sequences: 0...0),
            ]
        ),
    ])
    func dropsCoalesceIntoRanges(_ testCase: DropCase) {
        var queue = Queue(depth: 1)
        for drop in testCase.drops { queue.append(drop: drop) }
        #expect(Self.drops(queue) == testCase.expected)
    }

    @Test func aFloodOfScatteredDropsIsBoundedAndLosesNoFrameCount() {
        var queue = Queue(depth: 1)
        let reasons: [DroppedFrameReason] = [.outOfBuffers, .discontinuity, .frameWasLate]
        var total: UInt64 = 0
        for index in 0..<10_000 {
            let first = UInt64(index) * 3
            queue.append(drop: SubscriberDrop(reason: reasons[index % 3], sequences: first...(first + 1)))
            total += 2
        }
        #expect(queue.dropReportCount <= Queue.maximumDropReports)
        #expect(queue.entries.count <= Queue.maximumDropReports)
        #expect(Self.drops(queue).reduce(0) { $0 + $1.frameCount } == total)
        // Every reason is still reported.
        #expect(Set(Self.drops(queue).map(\.reason)) == Set(reasons))
    }

    @Test func connectionEventsHoldReconnectsUntilTheConsumerCatchesUp() {
        var queue = Queue(depth: 1)
        let session = Subscriber.Session(format: .bgra8, streamID: 1, subscriberID: 1, maximumHeldFrames: 4)
        for _ in 0..<(Queue.maximumConnectionEvents / 2) {
            queue.append(connected: session, isReconnect: true)
            queue.append(ended: FrameBusError(code: .endOfStream, operation: "test"))
        }
        #expect(queue.isHoldingConnectionEvents)
        _ = queue.popFirst()
        #expect(!queue.isHoldingConnectionEvents)
    }

    @Test func theOutboxIsBounded() {
        var outbox = SubscriberOutbox(capacity: 4)
        for index in 0..<4 {
            let queued = outbox.enqueue([UInt8(index)])
            #expect(queued)
        }
        let overflowing = outbox.enqueue([9])
        #expect(!overflowing)
        #expect(outbox.first == [0])
        outbox.removeFirst()
        let afterRoom = outbox.enqueue([9])
        #expect(afterRoom)
        #expect(outbox.count == 4)
    }
}
