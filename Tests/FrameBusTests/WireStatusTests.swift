import Testing

@testable import FrameBus

/// STATUS (PROTOCOL.md §5.13), the HELLO flag that asks for it, and DROP reason 4, byte by byte.
@Suite struct WireStatusTests {
    static let status = WireStatus(
        level: 2,
        factors: 0b1_0001,
        cost: 1250,
        frameDuration: WireTime(value: 1, timescale: 30, flags: 1),
        time: 0x0102_0304_0506_0708,
        framesShed: 9
    )

    /// The layout of §5.13, written out.
    static let bytes: [UInt8] =
        [0x60, 0x00, 0x00, 0x00, 48, 0, 0, 0]  // header: type 0x0060, reserved, length 48
        + [2, 0, 0x11, 0]  // level serious, factors cpu and bus
        + [0xE2, 0x04, 0, 0]  // cost 1250 (1.25 frame intervals)
        + [1, 0, 0, 0, 0, 0, 0, 0, 30, 0, 0, 0, 1, 0, 0, 0]  // 1/30 s, valid
        + [8, 7, 6, 5, 4, 3, 2, 1]  // time
        + [9, 0, 0, 0, 0, 0, 0, 0]  // frames shed

    @Test func statusEncodesAsTheProtocolSaysAndDecodesBack() throws {
        #expect(WireMessage.status(Self.status).encoded() == Self.bytes)
        #expect(try WireMessage.decode(Self.bytes, descriptorCount: 0) == .status(Self.status))
    }

    @Test(arguments: [
        ("level 5", 8, [UInt8(5)], WireError.Kind.invalidField),
        ("invalid duration flags", 28, [0x40], .invalidField),
        ("valid duration with timescale 0", 24, [0], .invalidField),
    ])
    func aBadStatusIsATypedError(name: String, offset: Int, patch: [UInt8], expected: WireError.Kind) {
        var bytes = Self.bytes
        bytes.replaceSubrange(offset..<(offset + patch.count), with: patch)
        #expect(throws: WireError.self) { try WireMessage.decode(bytes, descriptorCount: 0) }
        do {
            _ = try WireMessage.decode(bytes, descriptorCount: 0)
        } catch {
            #expect(error.kind == expected, "\(name)")
        }
    }

    @Test func aStatusOfAnotherLengthIsMalformed() {
        var long = Self.bytes + [0, 0, 0, 0]
        long[4] = 52
        #expect(throws: WireError.self) { try WireMessage.decode(long, descriptorCount: 0) }
        #expect(throws: WireError.self) { try WireMessage.decode(Array(Self.bytes.prefix(40)), descriptorCount: 0) }
    }

    /// Unknown factor bits are the publisher's business (a newer factor); a receiver masks them.
    @Test func unknownFactorBitsAreAccepted() throws {
        var bytes = Self.bytes
        bytes[11] = 0x80
        guard case .status(let status) = try WireMessage.decode(bytes, descriptorCount: 0) else {
            Issue.record("not a STATUS")
            return
        }
        #expect(status.factors & WireStatus.knownFactors == 0x11)
        #expect(PublisherMonitor.status(status).systemPressure.factors == [.cpu, .bus])
    }

    @Test func helloWithWantsStatusDecodesAndAnUnknownFlagDoesNot() throws {
        var hello = WireHello(deliveryMode: 0, queueDepth: 1, flags: WireHello.wantsStatusFlag, formats: [0x3432_3076])
        let bytes = WireMessage.hello(hello).encoded()
        #expect(bytes[22] == 0x04)
        #expect(try WireMessage.decode(bytes, descriptorCount: 0) == .hello(hello))
        hello.flags = 1 << 4
        #expect(throws: WireError.self) {
            try WireMessage.decode(WireMessage.hello(hello).encoded(), descriptorCount: 0)
        }
    }

    @Test func dropReasonFourIsWorkFellBehind() throws {
        let drop = WireDrop(3...5, reason: .workFellBehind)
        let bytes = WireMessage.drop(drop).encoded()
        #expect(bytes[24] == 4)
        #expect(try WireMessage.decode(bytes, descriptorCount: 0) == .drop(drop))
    }
}
