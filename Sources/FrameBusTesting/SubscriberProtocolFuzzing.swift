import FrameBus
import PixelBuffers
import SampleBuffers

/// Drives the subscriber's protocol handling (wire decoder, ``SubscriberStateMachine``, ``SubscriberEventQueue``,
/// ``SubscriberOutbox``) with an arbitrary sequence of datagrams, without sockets: the body of the libFuzzer target in
/// `Fuzz/Subscriber`, and of the tests that replay its seeds.
///
/// Input layout: byte 0 chooses the delivery (bit 7: queue, low bits + 1: depth) and byte 1 the accepted formats;
/// then records of `u8 control, u16 length (LE), length bytes`. The control byte's low 3 bits are the number of
/// descriptors that "arrived" with the datagram (0…4); bit 3 makes a surface import fail as a bad fd would; bit 4
/// lets the consumer take one event; bit 5 makes the consumer release everything it holds; bit 6 makes the publisher
/// "stop reading" (RELEASEs then pile up in the outbox).
///
/// Every invariant the subscriber promises about memory a publisher can drive is checked with `precondition`, so a
/// violation is a crash the fuzzer reports.
public enum SubscriberProtocolFuzzing {
    /// What one input made the subscriber do (so tests can check that the seeds reach deep states).
    public struct Outcome: Hashable, Sendable {
        public var sessions = 0
        public var frames = 0
        public var drops = 0
        public var ends = 0

        public init(sessions: Int = 0, frames: Int = 0, drops: Int = 0, ends: Int = 0) {
            self.sessions = sessions
            self.frames = frames
            self.drops = drops
            self.ends = ends
        }
    }

    /// Runs one input; traps if an invariant breaks.
    @discardableResult
    public static func run(_ input: [UInt8]) -> Outcome {
        var outcome = Outcome()
        guard input.count >= 2 else { return outcome }
        let delivery: Subscriber.Delivery =
            input[0] & 0x80 != 0 ? .queue(depth: Int(input[0] & 0x3F) + 1) : .latestOnly
        // What the delivery lets wait: its depth, 1 for latest-only.
        let depth = input[0] & 0x80 != 0 ? Int(input[0] & 0x3F) + 1 : 1
        let formats: [PixelFormat] =
            input[1] & 1 != 0
            ? [.compressedYUV420BiPlanarVideoRange8, .yuv420BiPlanarVideoRange8] : [.yuv420BiPlanarVideoRange8, .bgra8]
        let limits = SubscriberStateMachine.Limits()
        var machine = SubscriberStateMachine(acceptedFormats: formats, delivery: delivery, limits: limits)
        var queue = SubscriberEventQueue<UInt64>(depth: depth)
        var outbox = SubscriberOutbox()
        var held: [UInt64] = []
        var publisherReads = true
        var statistics: [DroppedFrameReason: Int] = [:]

        func send(_ message: WireMessage) -> Bool {
            if publisherReads && outbox.isEmpty { return true }
            return outbox.enqueue(message.encoded())
        }
        func end(_ error: FrameBusError) {
            outcome.ends += 1
            held.removeAll()  // frames of the old connection no longer count against the next one's grant
            machine.closed()
            outbox.removeAll()
            queue.append(ended: error)
        }
        func perform(_ action: SubscriberStateMachine.Action, importFails: Bool) {
            switch action {
            case .none, .retireSurface:
                break
            case .established(let session, let isReconnect):
                precondition(formats.contains(session.format), "granted a format we did not ask for")
                queue.append(connected: session, isReconnect: isReconnect)
                outcome.sessions += 1
            case .importSurface(let surface):
                precondition(machine.session?.format.fourCC == surface.pixelFormat, "surface of another format")
                if importFails {
                    perform(
                        machine.surfaceImportFailed(surfaceID: surface.surfaceID, reason: "fuzz"),
                        importFails: false
                    )
                }
            case .deliverFrame(let frame, _):
                outcome.frames += 1
                for replaced in queue.append(frame: frame.sequence, sequence: frame.sequence) {
                    statistics[.frameWasLate] = Saturating.add(statistics[.frameWasLate, default: 0], 1)
                    let release = WireRelease(sequence: replaced, surfaceID: frame.surfaceID, flags: 1)
                    if !send(.release(release)) {
                        end(FrameBusError(.protocolViolation, "fuzz", message: "outbox full"))
                        return
                    }
                }
            case .status(let status):
                // A STATUS is only ever a state to keep; one at most waits (SubscriberEventQueue).
                queue.append(systemPressure: status.systemPressure)
            case .reportDrop(let drop):
                precondition(drop.sequences.lowerBound <= drop.sequences.upperBound)
                precondition(drop.frameCount >= 1)
                statistics[drop.reason] = Saturating.add(statistics[drop.reason, default: 0], drop.frameCount)
                queue.append(drop: drop)
                outcome.drops += 1
            case .close(let error, _):
                end(error)
            }
        }

        _ = machine.connected()
        var offset = 2
        while offset + 3 <= input.count {
            let control = input[offset]
            let length = Int(input[offset + 1]) | Int(input[offset + 2]) << 8
            offset += 3
            let bytes = Array(input[offset..<min(input.count, offset + length)])
            offset += bytes.count
            publisherReads = control & 0x40 == 0
            if publisherReads {
                outbox.removeAll()  // the publisher read what waited
            }
            if case .closed = machine.state, !queue.isHoldingConnectionEvents {
                _ = machine.connected()  // as a reconnecting subscriber does, unless the consumer lags
            }
            switch try? WireMessage.decode(bytes, descriptorCount: Int(control & 0x07)) {
            case .some(let message):
                // What we hold of this connection: frames the consumer took and has not released, and those waiting.
                let held = held.count + queue.frameCount
                perform(machine.received(message, heldFrames: held), importFails: control & 0x08 != 0)
            case .none: perform(machine.receivedMalformed("fuzz"), importFails: false)
            }
            if control & 0x10 != 0, let entry = queue.popFirst(), case .frame(let sequence, _) = entry {
                held.append(sequence)
            }
            if control & 0x20 != 0 {
                for sequence in held where !send(.release(WireRelease(sequence: sequence, surfaceID: 1, flags: 0))) {
                    end(FrameBusError(.protocolViolation, "fuzz", message: "outbox full"))
                    break
                }
                held.removeAll()
            }
            // What a publisher can make us keep is bounded, whatever it sends.
            precondition(queue.frameCount <= depth, "more frames wait than the depth")
            precondition(queue.dropReportCount <= SubscriberEventQueue<UInt64>.maximumDropReports, "drop reports")
            precondition(outbox.count <= outbox.capacity, "outbox")
            precondition(
                queue.entries.count
                    <= depth + SubscriberEventQueue<UInt64>.maximumDropReports
                    + SubscriberEventQueue<UInt64>.maximumConnectionEvents + 2,
                "event queue: \(queue.entries.count) entries, \(queue.frameCount) frames, \(queue.dropReportCount) "
                    + "drops, \(queue.connectionEventCount) connection events"
            )
        }
        return outcome
    }

    /// Inputs made of real sessions (handshake, surfaces, frames, drops, retirement, end), to seed the fuzzer.
    public static func seeds() -> [[UInt8]] {
        func record(_ message: WireMessage, control: UInt8 = 0) -> [UInt8] {
            let bytes = message.encoded()
            return [control | UInt8(message.descriptorCount), UInt8(bytes.count & 0xFF), UInt8(bytes.count >> 8)]
                + bytes
        }
        let format = PixelFormat.yuv420BiPlanarVideoRange8
        let welcome = WireMessage.welcome(
            WireWelcome(
                version: 2,
                deliveryMode: 1,
                queueDepth: 4,
                maximumHeldFrames: 8,
                format: format.fourCC,
                maximumMessageSize: 4096,
                streamID: 42,
                subscriberID: 1,
                nextSequence: 0,
                maximumAnnouncedSurfaces: 16
            )
        )
        func surface(_ id: UInt64) -> WireMessage {
            .surface(
                WireSurface(
                    surfaceID: id,
                    pixelFormat: format.fourCC,
                    width: 64,
                    height: 48,
                    descriptorByteCounts: [8192],
                    planes: [
                        WireSurfacePlane(offset: 0, bytesPerRow: 64, width: 64, height: 48, bytesPerElement: 1),
                        WireSurfacePlane(offset: 4096, bytesPerRow: 64, width: 32, height: 24, bytesPerElement: 2),
                    ]
                )
            )
        }
        func frame(_ sequence: UInt64, surface: UInt64) -> WireMessage {
            .frame(
                WireFrame(
                    sequence: sequence,
                    surfaceID: surface,
                    presentationTime: WireTime(value: Int64(sequence), timescale: 60, flags: 1),
                    duration: WireTime(value: 1, timescale: 60, flags: 1),
                    publishTime: 1000 + sequence,
                    bytesUsed: 4608,
                    flags: sequence == 0 ? WireFrame.discontinuityFlag : 0
                )
            )
        }
        var session: [UInt8] = [0x84, 0]
        session += record(welcome)
        session += record(surface(1))
        session += record(surface(2))
        for sequence in 0..<6 as Range<UInt64> {
            session += record(frame(sequence, surface: 1 + sequence % 2), control: sequence % 2 == 0 ? 0x10 : 0x30)
        }
        session += record(.drop(WireDrop(6...9, reason: .outOfBuffers)))
        session += record(frame(10, surface: 1), control: 0x10)
        session += record(.retireSurface(surfaceID: 2))
        session += record(.endOfStream(WireEndOfStream(lastSequence: 10, reason: 0)))

        var latestOnly: [UInt8] = [0x00, 0]
        latestOnly += record(welcome)
        latestOnly += record(surface(7))
        for sequence in 0..<8 as Range<UInt64> { latestOnly += record(frame(sequence, surface: 7), control: 0x40) }
        latestOnly += record(.drop(WireDrop(0...UInt64.max, reason: .discontinuity)))

        var refused: [UInt8] = [0x01, 1]
        refused += record(.error(WireErrorMessage(code: 2, reason: "no common format")))
        return [session, latestOnly, refused]
    }
}
