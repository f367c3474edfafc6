// libFuzzer entry point for the wire protocol and the protocol state machines (built by Fuzz/Protocol/run.sh).
//
// Byte 0 selects the target:
//   0  the wire decoder alone: the rest is one datagram (byte 1: descriptor count 0…4);
//   1  the publisher's state machine, driven by a script of events (below), with its invariants checked;
//   2  the subscriber's state machine (FuzzSubscriberHook.swift).
// Any trap, sanitizer report or hang is a bug. A thrown WireError is the expected outcome for a bad datagram.
//
// Publisher script: a sequence of operations, each an opcode byte and its operands (missing operand bytes read 0):
//   0 accept(uid: own if operand even)                 1 datagram(connection, descriptors, truncated, u16 n, n bytes)
//   2 closed(connection)                                3 tick(+operand × 7 ms)
//   4 publish(surface, backing, width)                  5 dropped(reason, u64 count)
//   6 surfaceFreed(surface)                             7 flush(connection, count) — the socket took `count` items
//   8 stop                                              9 poolCapacity(operand)
//  10 hello(connection, version, kind, mode, depth, flags) — a well-formed HELLO, to get past the handshake quickly
//  11 release(connection, index of a frame it was sent, notDelivered)

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzProtocol(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    guard size > 0 else { return 0 }
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    switch bytes[0] % 3 {
    case 0:
        let descriptors = size > 1 ? Int(bytes[1] % 5) : 0
        if let message = try? WireMessage.decode(Array(bytes.dropFirst(2)), descriptorCount: descriptors) {
            // Whatever decodes re-encodes to the same bytes (ERROR reasons may be repaired UTF-8).
            let again = message.encoded()
            if message.type != .error { precondition(again == Array(bytes.dropFirst(2)), "decode/encode mismatch") }
            precondition((try? WireMessage.decode(again, descriptorCount: descriptors)) != nil, "re-encoding fails")
        }
    case 1:
        var driver = PublisherDriver()
        driver.run(bytes[1...])
    default:
        fuzzSubscriberStateMachine(bytes[1...])
    }
    return 0
}

/// Feeds a script to a publisher state machine, plays a strict subscriber on every connection, and traps on any
/// broken invariant.
struct PublisherDriver {
    typealias Machine = PublisherStateMachine<UInt64>
    static let nv12: UInt32 = 0x3432_3076
    static let ownUID: UInt32 = 1000

    var machine: Machine
    var now: UInt64 = 1_000_000_000
    var ids: [Machine.ConnectionID] = []
    /// Per connection: what a strict subscriber saw.
    var checkers: [Machine.ConnectionID: Checker] = [:]
    var reader = ByteReader([])

    init() {
        var limits = Machine.Limits(formats: [Self.nv12, 0x2638_7630], allowedUserIDs: [Self.ownUID])
        limits.maximumSubscribers = 4
        limits.maximumMonitors = 2
        limits.maximumPendingHandshakes = 8
        limits.slowSubscribers.maximumQueuedMessages = 32
        limits.maximumAnnouncedSurfaces = 3
        machine = Machine(limits: limits, streamID: 7)
    }

    mutating func run(_ script: ArraySlice<UInt8>) {
        reader = ByteReader(script)
        var steps = 0
        var heldBefore: [Machine.ConnectionID: Int] = [:]
        while !reader.isAtEnd, steps < 2_000 {
            steps += 1
            step(reader.byte())
            checkInvariants(heldBefore: heldBefore)
            heldBefore = Dictionary(uniqueKeysWithValues: machine.subscribers.map { ($0.id, $0.held) })
        }
    }

    func connection(_ operand: UInt8) -> Machine.ConnectionID? {
        ids.isEmpty ? nil : ids[Int(operand) % ids.count]
    }

    mutating func step(_ opcode: UInt8) {
        switch opcode % 12 {
        case 0:
            let uid = reader.byte() % 2 == 0 ? Self.ownUID : 4242
            guard machine.canAcceptConnection else { return }
            let id = machine.connectionAccepted(.init(processID: 1, userID: uid), now: now)
            ids.append(id)
            checkers[id] = Checker()
        case 1:
            let target = connection(reader.byte())
            let descriptors = Int(reader.byte() % 5)
            let truncated = reader.byte() % 8 == 0
            let count = Int(reader.u16() % 4200)
            let datagram = reader.bytes(count)
            guard let target else { return }
            perform(
                machine.received(datagram, descriptorCount: descriptors, isTruncated: truncated, from: target, now: now)
            )
        case 2:
            guard let target = connection(reader.byte()) else { return }
            perform(machine.connectionClosed(target, reason: "fuzz", now: now))
        case 3:
            now &+= UInt64(reader.byte()) * 7_000_000
            perform(machine.tick(now: now))
        case 4:
            let surface = UInt64(reader.byte() % 9) + 1
            let backing: WireBacking = reader.byte() % 4 == 0 ? .dmaBuf : .memfd
            let width = UInt32(reader.byte() % 3) * 2 + 4
            publish(surface: surface, backing: backing, width: width)
        case 5:
            let reason = WireDropReason.allCases[Int(reader.byte()) % 3]
            let count = reader.u64()
            if let (_, actions) = machine.reportDropped(reason: reason, count: count, now: now) { perform(actions) }
        case 6:
            perform(machine.surfaceFreed(UInt64(reader.byte() % 9) + 1))
        case 7:
            guard let target = connection(reader.byte()) else { return }
            flush(target, limit: Int(reader.byte()))
        case 8:
            perform(machine.stop(now: now))
        case 9:
            machine.learnPoolCapacity(Int(reader.byte()))
        case 10:
            let target = connection(reader.byte())
            let version = UInt16(reader.byte() % 3)
            let kind: WireConnectionKind = reader.byte() % 4 == 0 ? .monitor : .subscriber
            let mode = UInt16(reader.byte() % 2)
            let depth = UInt16(reader.byte() % 66)
            let flags = UInt16(reader.byte() % 2)
            guard let target else { return }
            let hello = WireHello(
                version: version,
                kind: kind,
                deliveryMode: kind == .monitor ? 0 : mode,
                queueDepth: kind == .monitor ? 0 : (mode == 0 ? 1 : depth),
                flags: flags,
                formats: kind == .monitor ? [] : [Self.nv12]
            )
            perform(
                machine.received(
                    WireMessage.hello(hello).encoded(),
                    descriptorCount: 0,
                    isTruncated: false,
                    from: target,
                    now: now
                )
            )
        default:
            guard let target = connection(reader.byte()), let checker = checkers[target] else { return }
            let index = Int(reader.byte())
            let flags: UInt32 = reader.byte() % 4 == 0 ? WireRelease.notDeliveredFlag : 0
            guard !checker.frames.isEmpty else { return }
            let frame = checker.frames[index % checker.frames.count]
            let release = WireMessage.release(
                WireRelease(sequence: frame.sequence, surfaceID: frame.surfaceID, flags: flags)
            )
            perform(machine.received(release.encoded(), descriptorCount: 0, isTruncated: false, from: target, now: now))
        }
    }

    mutating func publish(surface: UInt64, backing: WireBacking, width: UInt32) {
        guard let plan = machine.beginFrame(format: Self.nv12, width: width, height: 2, discontinuity: false) else {
            return
        }
        let description = WireSurface(
            surfaceID: surface,
            pixelFormat: Self.nv12,
            width: width,
            height: 2,
            backing: backing,
            descriptorByteCounts: [UInt64(width) * 3],
            planes: [
                WireSurfacePlane(offset: 0, bytesPerRow: width, width: width, height: 2, bytesPerElement: 1),
                WireSurfacePlane(
                    offset: UInt64(width) * 2,
                    bytesPerRow: width,
                    width: width / 2,
                    height: 1,
                    bytesPerElement: 2
                ),
            ]
        )
        let v1 = WireSurfaceV1(
            surfaceID: surface,
            allocationSize: UInt64(width) * 3,
            pixelFormat: Self.nv12,
            width: width,
            height: 2,
            planes: description.planes.map {
                WirePlane(
                    offset: $0.offset,
                    bytesPerRow: $0.bytesPerRow,
                    width: $0.width,
                    height: $0.height,
                    bytesPerElement: $0.bytesPerElement
                )
            }
        )
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
            let representation = Machine.Representation(
                surfaceID: surface,
                surface: description,
                surfaceV1: backing == .memfd ? v1 : nil,
                bytesUsed: UInt64(width) * 3,
                resource: surface
            )
            // The compressed format's conversion "fails" every time: those subscribers get drops.
            perform(
                machine.deliver(
                    template,
                    format: format,
                    representation: format == Self.nv12 ? representation : nil,
                    isConversion: format != Self.nv12,
                    now: now
                )
            )
        }
    }

    mutating func perform(_ actions: [Machine.Action]) {
        for action in actions {
            switch action {
            case .flush(let id): flush(id, limit: Int.max)
            case .close(let id):
                machine.closedAfterStop(id)
                checkers[id]?.closed = true
            case .log, .deadlineChanged: break
            }
        }
    }

    mutating func flush(_ id: Machine.ConnectionID, limit: Int) {
        let items = machine.outbound(of: id).prefix(limit)
        for item in items {
            let message = item.message
            // Everything the publisher sends is a valid datagram.
            let encoded = message.encoded()
            guard let decoded = try? WireMessage.decode(encoded, descriptorCount: message.descriptorCount) else {
                preconditionFailure("the publisher queued an invalid \(message.type.name)")
            }
            checkers[id, default: Checker()].see(decoded)
        }
        perform(machine.sent(items.count, on: id, now: now))
    }

    /// `heldBefore`: what each subscriber held before this step. A limit lowered by readmission (the budget learnt
    /// after the subscriber was welcomed) cannot take back frames already held, so a subscriber may stay above its
    /// `heldLimit`; what must never happen is a frame sent to it while it is at or above that limit.
    func checkInvariants(heldBefore: [Machine.ConnectionID: Int]) {
        precondition(machine.pendingCount <= machine.limits.maximumPendingHandshakes)
        precondition(machine.subscriberCount <= machine.limits.maximumSubscribers)
        precondition(machine.monitorCount <= machine.limits.maximumMonitors)
        for subscriber in machine.subscribers {
            if subscriber.held > (heldBefore[subscriber.id] ?? 0) {
                precondition(subscriber.held <= subscriber.heldLimit, "sent a frame beyond the budget's limit")
            }
            precondition(subscriber.heldLimit <= subscriber.maximumHeldFrames, "a limit above its grant")
            precondition(subscriber.held <= subscriber.maximumHeldFrames, "holds more than its limit")
            precondition(subscriber.queued <= machine.limits.slowSubscribers.maximumQueuedMessages + 4, "queue unbounded")
        }
    }
}

/// What a strict subscriber checks on the messages it receives (docs/PROTOCOL.md §4.2).
struct Checker {
    var announced = Set<UInt64>()
    var lastSequence: UInt64?
    var frames: [WireFrame] = []
    var closed = false
    var maximumAnnounced = 0
    var version: UInt16 = 0

    mutating func see(_ message: WireMessage) {
        precondition(!closed, "a message after close")
        switch message {
        case .welcome(let welcome):
            version = welcome.version
            maximumAnnounced = Int(welcome.maximumAnnouncedSurfaces)
        case .surface(let surface):
            precondition(version == 2, "SURFACE in a version-\(version) session")
            precondition(announced.insert(surface.surfaceID).inserted, "SURFACE announced twice")
            precondition(announced.count <= maximumAnnounced, "too many surfaces announced")
        case .surfaceV1(let surface):
            precondition(version == 1, "SURFACE_V1 in a version-\(version) session")
            precondition(announced.insert(surface.surfaceID).inserted, "SURFACE_V1 announced twice")
        case .retireSurface(let id):
            precondition(announced.remove(id) != nil, "RETIRE of a surface not announced")
        case .frame(let frame):
            precondition(announced.contains(frame.surfaceID), "FRAME on a surface not announced")
            if let lastSequence { precondition(frame.sequence > lastSequence, "FRAME out of order") }
            lastSequence = frame.sequence
            if frames.count < 256 { frames.append(frame) }
        case .drop(let drop):
            if let lastSequence { precondition(drop.firstSequence > lastSequence, "DROP out of order") }
            lastSequence = drop.lastSequence
        default:
            break
        }
    }
}

/// Reads operands from a script; past the end it yields zeros.
struct ByteReader {
    private let bytes: ArraySlice<UInt8>
    private var index: Int

    init(_ bytes: ArraySlice<UInt8>) {
        self.bytes = bytes
        index = bytes.startIndex
    }

    var isAtEnd: Bool { index >= bytes.endIndex }

    mutating func byte() -> UInt8 {
        guard index < bytes.endIndex else { return 0 }
        defer { index += 1 }
        return bytes[index]
    }

    mutating func u16() -> UInt16 { UInt16(byte()) | UInt16(byte()) << 8 }

    mutating func u64() -> UInt64 { (0..<8).reduce(0) { $0 | UInt64(byte()) << (8 * $1) } }

    mutating func bytes(_ count: Int) -> [UInt8] {
        let end = min(bytes.endIndex, index + count)
        defer { index = end }
        return Array(bytes[index..<end])
    }
}
