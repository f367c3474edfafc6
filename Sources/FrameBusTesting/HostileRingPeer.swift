import FrameBus
import Surfaces
import SystemPackage

/// A hand-driven version-3 peer for hostile tests and fuzzers: it speaks the handshake, then writes whatever it is
/// told into its own ring file (including garbage), so the other side's checks can be exercised across processes.
/// Not for applications.
package final class HostileRingPeer: @unchecked Sendable {
    // @unchecked: used from one thread by the test peer.
    private let socket: Socket
    private let channel: RingChannel
    private var written: UInt64 = 0
    private var listener: Socket?
    /// What the other side granted or asked for (WELCOME for a subscriber peer, HELLO for a publisher peer).
    package let handshake: WireMessage

    private init(socket: Socket, channel: RingChannel, handshake: WireMessage, listener: Socket? = nil) {
        self.socket = socket
        self.channel = channel
        self.handshake = handshake
        self.listener = listener
    }

    private static func receive(on socket: Socket, timeoutMilliseconds: Int32) throws(FrameBusError) -> ReceivedDatagram {
        let deadline = ProcessInfoShim.monotonicNanoseconds() &+ UInt64(timeoutMilliseconds) * 1_000_000
        while true {
            switch socket.receive(maximumSize: WireProtocol.maximumMessageSize, maximumDescriptors: 4) {
            case .success(.datagram(let datagram)): return datagram
            case .success(.endOfFile): throw FrameBusError(.endOfStream, "HostileRingPeer", message: "closed")
            case .failure(let errno): throw .systemCall("recvmsg", errno)
            case .success(.wouldBlock):
                let now = ProcessInfoShim.monotonicNanoseconds()
                guard now < deadline else { throw FrameBusError(.timedOut, "HostileRingPeer", message: "no datagram") }
                _ = socket.waitReadable(timeoutMilliseconds: Int32(clamping: (deadline - now) / 1_000_000 + 1))
            }
        }
    }

    /// Connects to a publisher as a version-3 subscriber (latest-only, `format`) and completes the handshake.
    package static func subscribe(path: String, format: UInt32) throws(FrameBusError) -> HostileRingPeer {
        let socket = try Socket.connect(path: path, timeoutNanoseconds: 2_000_000_000).get()
        let half = try RingChannel.Half(role: .release)
        let hello = WireMessage.hello(
            WireHello(version: WireProtocol.ringVersion, deliveryMode: 0, queueDepth: 1, formats: [format])
        )
        _ = socket.send(hello.encoded(), descriptors: half.descriptors)
        let datagram = try receive(on: socket, timeoutMilliseconds: 5000)
        let message: WireMessage
        do { message = try WireMessage.decode(datagram.bytes, descriptorCount: datagram.descriptors.count) } catch {
            throw FrameBusError(.protocolViolation, "HostileRingPeer", message: "\(error)")
        }
        guard case .welcome(let welcome) = message, welcome.version == WireProtocol.ringVersion,
            let ring = datagram.descriptors[0].take(), let wake = datagram.descriptors[1].take()
        else { throw FrameBusError(.protocolViolation, "HostileRingPeer", message: "no version-3 WELCOME: \(message)") }
        let channel = try half.joining(peerRing: ring, peerWake: wake, peerRole: .announce)
        return HostileRingPeer(socket: socket, channel: channel, handshake: message)
    }

    /// Listens at `path`, accepts one version-3 subscriber and welcomes it (granting `format`, holding up to 4).
    package static func publish(path: String, format: UInt32) throws(FrameBusError) -> HostileRingPeer {
        let listener = try Socket.listen(path: path, mode: 0o600, backlog: 4).get()
        // Ten minutes: on a loaded machine a subscriber may take long to come; a test peer ends sooner through its
        // lifeline when its test is done.
        let deadline = ProcessInfoShim.monotonicNanoseconds() &+ 600_000_000_000
        var accepted: Socket?
        while accepted == nil {
            if case .success(let socket?) = listener.accept() { accepted = socket; break }
            guard ProcessInfoShim.monotonicNanoseconds() < deadline else {
                throw FrameBusError(.timedOut, "HostileRingPeer", message: "nobody connected")
            }
            _ = listener.waitReadable(timeoutMilliseconds: 100)
        }
        let socket = accepted!
        let datagram = try receive(on: socket, timeoutMilliseconds: 5000)
        let message: WireMessage
        do { message = try WireMessage.decode(datagram.bytes, descriptorCount: datagram.descriptors.count) } catch {
            throw FrameBusError(.protocolViolation, "HostileRingPeer", message: "\(error)")
        }
        guard case .hello(let hello) = message, hello.version == WireProtocol.ringVersion,
            let ring = datagram.descriptors[0].take(), let wake = datagram.descriptors[1].take()
        else { throw FrameBusError(.protocolViolation, "HostileRingPeer", message: "no version-3 HELLO: \(message)") }
        let half = try RingChannel.Half(role: .announce)
        let channel = try half.joining(peerRing: ring, peerWake: wake, peerRole: .release)
        let welcome = WireMessage.welcome(
            WireWelcome(
                version: WireProtocol.ringVersion,
                deliveryMode: 0,
                queueDepth: 1,
                maximumHeldFrames: 4,
                format: format,
                maximumMessageSize: UInt32(WireProtocol.maximumMessageSize),
                streamID: 99,
                subscriberID: 1,
                nextSequence: 0,
                maximumAnnouncedSurfaces: 8
            )
        )
        _ = socket.send(welcome.encoded(), descriptors: half.descriptors)
        return HostileRingPeer(socket: socket, channel: channel, handshake: message, listener: listener)
    }

    /// Appends one slot of raw bytes (any content) and publishes the tail.
    package func appendRawSlot(_ bytes: [UInt8]) {
        var slot = [UInt8](repeating: 0, count: RingLayout.slotSize)
        for (index, byte) in bytes.prefix(RingLayout.slotSize).enumerated() { slot[index] = byte }
        channel.own.writeSlot(written, slot)
        written &+= 1
        setTail(written)
    }

    /// Appends one well-formed slot carrying `message`.
    package func append(_ message: WireMessage, controlCount: UInt64 = 0) {
        appendRawSlot(RingLayout.slot(controlCount: controlCount, message: message.encoded()))
    }

    /// Stores any value as our tail and wakes the other side.
    package func setTail(_ tail: UInt64) {
        channel.own.store(tail, RingLayout.tailOffset)
        wake()
    }

    /// Stores any value as our head of the other side's ring and wakes it.
    package func setPeerHead(_ head: UInt64) {
        channel.own.store(head, RingLayout.peerHeadOffset)
        wake()
    }

    /// Wakes the other side the way the session agreed (§9.5, §9.8): a publisher of a futex-woken session raises
    /// its wake count and `FUTEX_WAKE`s it; otherwise one datagram.
    package func wake() {
        if channel.wakesPeerByFutex { channel.own.increment32(RingLayout.wakeCountOffset) }
        _ = channel.wakePeer()
    }

    /// Whether the subscriber accepted futex wake-ups (§9.8).
    package var usesFutexWake: Bool { channel.usesFutexWake }

    /// Stores any 32-bit value at a header offset of our own file (e.g. the wake count) and wakes the other side.
    package func scribble32(_ value: UInt32, at offset: Int) {
        channel.own.store32(value, offset)
        _ = channel.wakePeer()
    }

    /// Stores any 64-bit value at a header offset of our own file (e.g. `controlSent`) and wakes the other side.
    package func scribble64(_ value: UInt64, at offset: Int) {
        channel.own.store(value, offset)
        _ = channel.wakePeer()
    }

    /// Sends a datagram on the socket (with no descriptors).
    package func send(_ message: WireMessage) { _ = socket.send(message.encoded()) }

    /// Sends a datagram on the socket with `descriptors` (borrowed: the caller still owns them), e.g. a SURFACE.
    package func send(_ message: WireMessage, descriptors: [Int32]) {
        _ = socket.send(message.encoded(), descriptors: descriptors)
    }

    /// The next datagram from the other side, decoded (nil on end of file or timeout).
    package func nextMessage(timeoutMilliseconds: Int32 = 5000) -> WireMessage? {
        guard let datagram = try? Self.receive(on: socket, timeoutMilliseconds: timeoutMilliseconds) else { return nil }
        return try? WireMessage.decode(datagram.bytes, descriptorCount: datagram.descriptors.count)
    }

    /// The other side's ring tail as it stands (for a hostile subscriber to see frames arrive).
    package var peerTail: UInt64 { channel.peer.load(RingLayout.tailOffset) }

    /// Copies slot `index` of the other side's ring and decodes its message, if it is one.
    package func peerMessage(at index: UInt64) -> WireMessage? {
        guard case .success(let entry) = RingLayout.entry(channel.peer.copySlot(index)) else { return nil }
        return try? WireMessage.decode(entry.message, descriptorCount: 0)
    }

    package func close() { socket.shutdown() }
}
