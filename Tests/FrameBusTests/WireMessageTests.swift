import Testing

@testable @_spi(Testing) import FrameBus

@Suite struct WireMessageTests {
    static let samples: [WireMessage] = [
        .hello(WireHello(deliveryMode: 1, queueDepth: 4, formats: [0x3432_3076, 0x2638_7630])),
        .welcome(
            WireWelcome(
                version: 1,
                deliveryMode: 0,
                queueDepth: 1,
                maximumHeldFrames: 5,
                format: 0x4247_5241,
                maximumMessageSize: 4096,
                streamID: 0xDEAD_BEEF,
                subscriberID: 3,
                nextSequence: 77
            )
        ),
        .error(WireErrorMessage(code: 2, reason: "no common format: wanted BGRA")),
        .surface(
            WireSurface(
                surfaceID: 9,
                allocationSize: 3_110_400,
                pixelFormat: 0x3432_3076,
                width: 1920,
                height: 1080,
                planes: [
                    WirePlane(offset: 0, bytesPerRow: 1920, width: 1920, height: 1080, bytesPerElement: 1),
                    WirePlane(offset: 2_073_600, bytesPerRow: 1920, width: 960, height: 540, bytesPerElement: 2),
                ]
            )
        ),
        .retireSurface(surfaceID: 9),
        .frame(
            WireFrame(
                sequence: 12,
                surfaceID: 9,
                presentationTime: WireTime(value: -5, timescale: 90000, flags: 1),
                duration: WireTime(value: 1, timescale: 60, flags: 1),
                publishTime: 123_456_789,
                bytesUsed: 3_110_400,
                flags: 3,
                attachments: (1, 1, 1, 1)
            )
        ),
        .drop(WireDrop(firstSequence: 3, lastSequence: 5, reason: 2)),
        .endOfStream(WireEndOfStream(lastSequence: .max, reason: 0)),
        .release(WireRelease(sequence: 12, surfaceID: 9, flags: 1)),
        .goodbye(reason: 0),
    ]

    @Test(arguments: samples) func everyMessageRoundTrips(_ message: WireMessage) throws {
        let bytes = message.encoded()
        #expect(Int(bytes[4]) | Int(bytes[5]) << 8 == bytes.count)
        let decoded = try WireMessage.decode(bytes, descriptorCount: message.carriesDescriptor ? 1 : 0)
        #expect(decoded == message)
    }

    @Test func fixedSizesMatchTheProtocolDocument() {
        let sizes = Dictionary(uniqueKeysWithValues: Self.samples.map { ($0.type, $0.encoded().count) })
        #expect(sizes[.welcome] == 48)
        #expect(sizes[.surface] == 136)
        #expect(sizes[.retireSurface] == 16)
        #expect(sizes[.frame] == 80)
        #expect(sizes[.drop] == 32)
        #expect(sizes[.endOfStream] == 24)
        #expect(sizes[.release] == 32)
        #expect(sizes[.goodbye] == 16)
        #expect(sizes[.hello] == 24 + 8)
    }

    @Test(arguments: samples) func everyTruncationIsATypedError(_ message: WireMessage) {
        let bytes = message.encoded()
        for cut in 0..<bytes.count {
            #expect(throws: WireError.self) {
                try WireMessage.decode(Array(bytes[..<cut]), descriptorCount: message.carriesDescriptor ? 1 : 0)
            }
        }
    }

    @Test func unknownTypeWrongLengthAndVersionAreRejected() throws {
        var unknown = WireMessage.goodbye(reason: 0).encoded()
        unknown[0] = 0x99
        #expect(throws: WireError(.unknownType, "type 0x99")) { try WireMessage.decode(unknown, descriptorCount: 0) }

        var padded = WireMessage.release(WireRelease(sequence: 1, surfaceID: 2, flags: 0)).encoded() + [0, 0, 0, 0]
        padded[4] = UInt8(padded.count)
        #expect(
            performing: { try WireMessage.decode(padded, descriptorCount: 0) },
            throws: { error in
                (error as? WireError)?.kind == .wrongLength
            }
        )

        var lying = WireMessage.goodbye(reason: 0).encoded()
        lying[4] = 99
        #expect(
            performing: { try WireMessage.decode(lying, descriptorCount: 0) },
            throws: { error in
                (error as? WireError)?.kind == .wrongLength
            }
        )

        let future = WireMessage.hello(WireHello(version: 2, deliveryMode: 0, queueDepth: 1, formats: [1])).encoded()
        #expect(
            performing: { try WireMessage.decode(future, descriptorCount: 0) },
            throws: { error in
                (error as? WireError)?.kind == .unsupportedVersion
            }
        )
    }

    @Test func descriptorsOnlyTravelWithSurfaces() {
        let frame = Self.samples[5].encoded()
        #expect(
            performing: { try WireMessage.decode(frame, descriptorCount: 1) },
            throws: { error in
                (error as? WireError)?.kind == .unexpectedDescriptors
            }
        )
        let surface = Self.samples[3].encoded()
        #expect(
            performing: { try WireMessage.decode(surface, descriptorCount: 0) },
            throws: { error in
                (error as? WireError)?.kind == .missingDescriptor
            }
        )
    }

    @Test func reservedFieldsAndFlagsMustBeZero() {
        var release = WireMessage.release(WireRelease(sequence: 1, surfaceID: 2, flags: 0)).encoded()
        release[28] = 1
        #expect(throws: WireError.self) { try WireMessage.decode(release, descriptorCount: 0) }
        var header = WireMessage.goodbye(reason: 0).encoded()
        header[2] = 1
        #expect(throws: WireError.self) { try WireMessage.decode(header, descriptorCount: 0) }
        var frame = Self.samples[5].encoded()
        frame[74] = 1
        #expect(throws: WireError.self) { try WireMessage.decode(frame, descriptorCount: 0) }
    }
}
