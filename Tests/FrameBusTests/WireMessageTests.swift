import Testing
import TestSupport

@testable import FrameBus

/// Parses a hex dump ("01 00 1c ..."; spaces, newlines and `|` ignored) into bytes.
func hexBytes(_ text: String) -> [UInt8] {
    let digits = text.filter(\.isHexDigit)
    precondition(digits.count % 2 == 0, "odd hex digit count")
    var bytes: [UInt8] = []
    var index = digits.startIndex
    while index < digits.endIndex {
        let next = digits.index(index, offsetBy: 2)
        bytes.append(UInt8(digits[index..<next], radix: 16)!)
        index = next
    }
    return bytes
}

/// The example datagrams of docs/PROTOCOL.md, Appendix A, written by hand from the document's tables (not by the
/// encoder), with the message each one is.
enum GoldenVectors {
    static let helloV2 = hexBytes(
        """
        01 00 00 00 20 00 00 00  53 55 42 46 02 00 01 00  04 00 02 00 00 00 01 00
        76 30 32 34 30 76 38 26
        """
    )
    static let helloV1 = hexBytes(
        """
        01 00 00 00 1c 00 00 00  46 42 55 53 01 00 00 00  01 00 01 00 00 00 00 00
        41 52 47 42
        """
    )
    static let helloMonitor = hexBytes(
        """
        01 00 00 00 18 00 00 00  53 55 42 46 02 00 00 00  00 00 00 00 01 00 00 00
        """
    )
    static let welcomeV2 = hexBytes(
        """
        02 00 00 00 38 00 00 00  02 00 00 00 01 00 02 00  76 30 32 34 00 10 00 00
        ef cd ab 89 67 45 23 01  03 00 00 00 00 00 00 00  4d 00 00 00 00 00 00 00
        40 00 00 00 00 00 00 00
        """
    )
    static let error = hexBytes("03 00 00 00 0e 00 00 00  01 00 02 00 6e 6f")
    static let surface = hexBytes(
        """
        12 00 00 00 c8 00 00 00  07 00 00 00 00 00 00 00  76 30 32 34 04 00 00 00
        02 00 00 00 01 00 02 02  00 00 00 00 00 00 00 00
        08 00 00 00 00 00 00 00  04 00 00 00 00 00 00 00
        00 00 00 00 00 00 00 00  00 00 00 00 00 00 00 00
        00 00 00 00 00 00 00 00  00 00 00 00 00 00 00 00  04 00 00 00 04 00 00 00  02 00 00 00 01 00 00 00
        01 00 00 00 00 00 00 00  00 00 00 00 00 00 00 00  04 00 00 00 02 00 00 00  01 00 00 00 02 00 00 00
        00 00 00 00 00 00 00 00  00 00 00 00 00 00 00 00  00 00 00 00 00 00 00 00  00 00 00 00 00 00 00 00
        00 00 00 00 00 00 00 00  00 00 00 00 00 00 00 00  00 00 00 00 00 00 00 00  00 00 00 00 00 00 00 00
        """
    )
    static let frame = hexBytes(
        """
        20 00 00 00 50 00 00 00  0c 00 00 00 00 00 00 00  07 00 00 00 00 00 00 00
        fb ff ff ff ff ff ff ff  90 5f 01 00 01 00 00 00  01 00 00 00 00 00 00 00
        3c 00 00 00 01 00 00 00  08 07 06 05 04 03 02 01  0c 00 00 00 00 00 00 00
        03 00 00 00 01 01 01 01
        """
    )
    static let drop = hexBytes(
        "21 00 00 00 20 00 00 00  03 00 00 00 00 00 00 00  05 00 00 00 00 00 00 00  02 00 00 00 00 00 00 00"
    )
    static let endOfStream = hexBytes("30 00 00 00 18 00 00 00  ff ff ff ff ff ff ff ff  00 00 00 00 00 00 00 00")
    static let release = hexBytes(
        "40 00 00 00 20 00 00 00  0c 00 00 00 00 00 00 00  07 00 00 00 00 00 00 00  01 00 00 00 00 00 00 00"
    )
    static let retire = hexBytes("11 00 00 00 10 00 00 00  07 00 00 00 00 00 00 00")
    static let goodbye = hexBytes("41 00 00 00 10 00 00 00  00 00 00 00 00 00 00 00")
    static let monitorReport = hexBytes(
        """
        50 00 00 00 88 00 00 00  e8 03 00 00 00 00 00 00  58 02 00 00 00 00 00 00
        01 00 01 00 00 00 00 00  02 00 00 00 00 00 00 00
        03 00 00 00 00 00 00 00  92 10 00 00 e8 03 00 00  76 30 32 34 00 00 01 00
        4e 02 00 00 00 00 00 00  00 10 00 00 00 00 00 00  01 00 00 00 00 00 00 00
        02 00 00 00 00 00 00 00  00 00 00 00 00 00 00 00  01 00 00 00 00 00 00 00
        dc 05 00 00 00 00 00 00  28 23 00 00 00 00 00 00  02 00 00 00 00 00 00 00
        """
    )

    static let nv12: UInt32 = 0x3432_3076
    static let compressedNV12: UInt32 = 0x2638_7630
    static let bgra: UInt32 = 0x4247_5241

    /// (datagram, fds that travel with it, the message it is).
    static let all: [([UInt8], Int, WireMessage)] = [
        (
            helloV2, 0,
            .hello(
                WireHello(
                    version: 2,
                    deliveryMode: 1,
                    queueDepth: 4,
                    flags: WireHello.acceptsDMABufFlag,
                    formats: [nv12, compressedNV12]
                )
            )
        ),
        (helloV1, 0, .hello(WireHello(version: 1, deliveryMode: 0, queueDepth: 1, formats: [bgra]))),
        (helloMonitor, 0, .hello(.monitor)),
        (
            welcomeV2, 0,
            .welcome(
                WireWelcome(
                    version: 2,
                    deliveryMode: 0,
                    queueDepth: 1,
                    maximumHeldFrames: 2,
                    format: nv12,
                    maximumMessageSize: 4096,
                    streamID: 0x0123_4567_89AB_CDEF,
                    subscriberID: 3,
                    nextSequence: 77,
                    maximumAnnouncedSurfaces: 64
                )
            )
        ),
        (error, 0, .error(WireErrorMessage(.unsupportedVersion, "no"))),
        (
            surface, 2,
            .surface(
                WireSurface(
                    surfaceID: 7,
                    pixelFormat: nv12,
                    width: 4,
                    height: 2,
                    descriptorByteCounts: [8, 4],
                    planes: [
                        WireSurfacePlane(offset: 0, bytesPerRow: 4, width: 4, height: 2, bytesPerElement: 1),
                        WireSurfacePlane(
                            descriptorIndex: 1,
                            offset: 0,
                            bytesPerRow: 4,
                            width: 2,
                            height: 1,
                            bytesPerElement: 2
                        ),
                    ]
                )
            )
        ),
        (
            frame, 0,
            .frame(
                WireFrame(
                    sequence: 12,
                    surfaceID: 7,
                    presentationTime: WireTime(value: -5, timescale: 90000, flags: 1),
                    duration: WireTime(value: 1, timescale: 60, flags: 1),
                    publishTime: 0x0102_0304_0506_0708,
                    bytesUsed: 12,
                    flags: 3,
                    attachments: (1, 1, 1, 1)
                )
            )
        ),
        (drop, 0, .drop(WireDrop(3...5, reason: .outOfBuffers))),
        (endOfStream, 0, .endOfStream(WireEndOfStream(lastSequence: .max, reason: 0))),
        (release, 0, .release(WireRelease(sequence: 12, surfaceID: 7, flags: WireRelease.notDeliveredFlag))),
        (retire, 0, .retireSurface(surfaceID: 7)),
        (goodbye, 0, .goodbye(reason: 0)),
        (
            monitorReport, 0,
            .monitorReport(
                WireMonitorReport(
                    time: 1000,
                    published: 600,
                    droppedAtSource: 2,
                    subscriberCount: 1,
                    records: [
                        .init(
                            subscriberID: 3,
                            processID: 4242,
                            userID: 1000,
                            format: nv12,
                            deliveryMode: 0,
                            queueDepth: 1,
                            delivered: 590,
                            bytesDelivered: 4096,
                            droppedLate: 1,
                            droppedOutOfBuffers: 2,
                            droppedDiscontinuity: 0,
                            held: 1,
                            queued: 0,
                            holdTimeP50: 1500,
                            holdTimeP99: 9000,
                            version: 2
                        )
                    ]
                )
            )
        ),
    ]
}

@Suite(.heavyWork, .timeLimit(.minutes(5))) struct WireMessageTests {
    static let goldenIndices = Array(GoldenVectors.all.indices)

    @Test(arguments: goldenIndices) func documentExamplesDecodeToTheirMessages(_ index: Int) throws {
        let (bytes, descriptors, message) = GoldenVectors.all[index]
        #expect(try WireMessage.decode(bytes, descriptorCount: descriptors) == message)
    }

    @Test(arguments: goldenIndices) func encoderWritesTheDocumentExamples(_ index: Int) {
        let (bytes, descriptors, message) = GoldenVectors.all[index]
        #expect(message.encoded() == bytes)
        #expect(message.descriptorCount == descriptors)
    }

    @Test func fixedSizesMatchTheProtocolDocument() {
        #expect(GoldenVectors.welcomeV2.count == 56)
        #expect(GoldenVectors.surface.count == 200)
        #expect(GoldenVectors.frame.count == 80)
        #expect(GoldenVectors.drop.count == 32)
        #expect(GoldenVectors.endOfStream.count == 24)
        #expect(GoldenVectors.release.count == 32)
        #expect(GoldenVectors.retire.count == 16)
        #expect(GoldenVectors.goodbye.count == 16)
        #expect(GoldenVectors.monitorReport.count == 40 + 96)
    }

    @Test(arguments: goldenIndices) func everyTruncationIsATypedError(_ index: Int) {
        let (bytes, descriptors, _) = GoldenVectors.all[index]
        for cut in 0..<bytes.count {
            #expect(throws: WireError.self) {
                try WireMessage.decode(Array(bytes[..<cut]), descriptorCount: descriptors)
            }
        }
    }

    @Test func versionOneWelcomeAndSurfaceStillDecode() throws {
        let welcome = WireMessage.welcome(
            WireWelcome(
                version: 1,
                deliveryMode: 1,
                queueDepth: 8,
                maximumHeldFrames: 12,
                format: GoldenVectors.nv12,
                maximumMessageSize: 4096,
                streamID: 1,
                subscriberID: 2,
                nextSequence: 3
            )
        )
        #expect(welcome.encoded().count == 48)
        #expect(try WireMessage.decode(welcome.encoded(), descriptorCount: 0) == welcome)
        let surface = WireMessage.surfaceV1(
            WireSurfaceV1(
                surfaceID: 9,
                allocationSize: 12,
                pixelFormat: GoldenVectors.nv12,
                width: 4,
                height: 2,
                planes: [
                    WirePlane(offset: 0, bytesPerRow: 4, width: 4, height: 2, bytesPerElement: 1),
                    WirePlane(offset: 8, bytesPerRow: 4, width: 2, height: 1, bytesPerElement: 2),
                ]
            )
        )
        #expect(surface.encoded().count == 136)
        #expect(try WireMessage.decode(surface.encoded(), descriptorCount: 1) == surface)
    }

    /// A byte patch to a golden datagram and the error kind it must produce.
    struct Mutation: Sendable, CustomTestStringConvertible {
        let name: String
        let base: [UInt8]
        let descriptors: Int
        let patches: [(offset: Int, bytes: [UInt8])]
        let expected: WireError.Kind
        var testDescription: String { name }
    }

    static func le64(_ value: UInt64) -> [UInt8] { (0..<8).map { UInt8(truncatingIfNeeded: value >> (8 * $0)) } }
    static func le32(_ value: UInt32) -> [UInt8] { (0..<4).map { UInt8(truncatingIfNeeded: value >> (8 * $0)) } }

    static let mutations: [Mutation] = [
        Mutation(
            name: "unknown type",
            base: GoldenVectors.goodbye,
            descriptors: 0,
            patches: [(0, [0x99])],
            expected: .unknownType
        ),
        Mutation(
            name: "header reserved",
            base: GoldenVectors.goodbye,
            descriptors: 0,
            patches: [(2, [1])],
            expected: .invalidField
        ),
        Mutation(
            name: "length lies",
            base: GoldenVectors.goodbye,
            descriptors: 0,
            patches: [(4, [99])],
            expected: .wrongLength
        ),
        Mutation(
            name: "GOODBYE reserved",
            base: GoldenVectors.goodbye,
            descriptors: 0,
            patches: [(12, [1])],
            expected: .invalidField
        ),
        Mutation(
            name: "HELLO bad magic",
            base: GoldenVectors.helloV2,
            descriptors: 0,
            patches: [(8, [0x54])],
            expected: .badMagic
        ),
        Mutation(
            name: "HELLO version 4",
            base: GoldenVectors.helloV2,
            descriptors: 0,
            patches: [(12, [4])],
            expected: .unsupportedVersion
        ),
        // Version 3 (docs/PROTOCOL.md §9): the version-2 layout with a ring file and a wake-up socket.
        Mutation(
            name: "HELLO version 3 without its two fds",
            base: GoldenVectors.helloV2,
            descriptors: 0,
            patches: [(12, [3])],
            expected: .missingDescriptor
        ),
        Mutation(
            name: "HELLO v2 magic with version 1",
            base: GoldenVectors.helloV2,
            descriptors: 0,
            patches: [(12, [1])],
            expected: .unsupportedVersion
        ),
        Mutation(
            name: "HELLO v1 magic with version 2",
            base: GoldenVectors.helloV1,
            descriptors: 0,
            patches: [(12, [2])],
            expected: .unsupportedVersion
        ),
        Mutation(
            name: "HELLO mode 2",
            base: GoldenVectors.helloV2,
            descriptors: 0,
            patches: [(14, [2])],
            expected: .invalidField
        ),
        Mutation(
            name: "HELLO depth 65",
            base: GoldenVectors.helloV2,
            descriptors: 0,
            patches: [(16, [65])],
            expected: .invalidField
        ),
        Mutation(
            name: "HELLO latest-only depth 4",
            base: GoldenVectors.helloV2,
            descriptors: 0,
            patches: [(14, [0])],
            expected: .invalidField
        ),
        Mutation(
            name: "HELLO format count lies",
            base: GoldenVectors.helloV2,
            descriptors: 0,
            patches: [(18, [3])],
            expected: .wrongLength
        ),
        Mutation(
            name: "HELLO kind 2",
            base: GoldenVectors.helloV2,
            descriptors: 0,
            patches: [(20, [2])],
            expected: .invalidField
        ),
        Mutation(
            name: "HELLO unknown flag",
            base: GoldenVectors.helloV2,
            descriptors: 0,
            patches: [(22, [0x00, 0x80])],  // bit 15: bits 0 (acceptsDMABuf) and 1 (deferred) are known
            expected: .invalidField
        ),
        Mutation(
            name: "HELLO v1 reserved",
            base: GoldenVectors.helloV1,
            descriptors: 0,
            patches: [(20, [1])],
            expected: .invalidField
        ),
        Mutation(
            name: "monitor HELLO with depth",
            base: GoldenVectors.helloMonitor,
            descriptors: 0,
            patches: [(16, [1])],
            expected: .invalidField
        ),
        Mutation(
            name: "WELCOME version 4",
            base: GoldenVectors.welcomeV2,
            descriptors: 0,
            patches: [(8, [4])],
            expected: .unsupportedVersion
        ),
        // Version 3 (docs/PROTOCOL.md §9): the version-2 layout with a ring file and a wake-up socket.
        Mutation(
            name: "WELCOME version 3 without its two fds",
            base: GoldenVectors.welcomeV2,
            descriptors: 0,
            patches: [(8, [3])],
            expected: .missingDescriptor
        ),
        Mutation(
            name: "WELCOME held 0",
            base: GoldenVectors.welcomeV2,
            descriptors: 0,
            patches: [(14, [0])],
            expected: .invalidField
        ),
        Mutation(
            name: "WELCOME message size",
            base: GoldenVectors.welcomeV2,
            descriptors: 0,
            patches: [(21, [0x20])],
            expected: .invalidField
        ),
        Mutation(
            name: "WELCOME reserved",
            base: GoldenVectors.welcomeV2,
            descriptors: 0,
            patches: [(52, [1])],
            expected: .invalidField
        ),
        Mutation(
            name: "ERROR reason length 1025",
            base: GoldenVectors.error,
            descriptors: 0,
            patches: [(10, [0x01, 0x04])],
            expected: .invalidField
        ),
        Mutation(
            name: "ERROR reason length lies",
            base: GoldenVectors.error,
            descriptors: 0,
            patches: [(10, [3])],
            expected: .wrongLength
        ),
        Mutation(
            name: "SURFACE id 0",
            base: GoldenVectors.surface,
            descriptors: 2,
            patches: [(8, [0])],
            expected: .invalidField
        ),
        Mutation(
            name: "SURFACE width 0",
            base: GoldenVectors.surface,
            descriptors: 2,
            patches: [(20, [0])],
            expected: .invalidField
        ),
        Mutation(
            name: "SURFACE height 65537",
            base: GoldenVectors.surface,
            descriptors: 2,
            patches: [(24, le32(65537))],
            expected: .invalidField
        ),
        Mutation(
            name: "SURFACE backing 3",
            base: GoldenVectors.surface,
            descriptors: 2,
            patches: [(28, [3])],
            expected: .invalidField
        ),
        Mutation(
            name: "SURFACE 5 descriptors",
            base: GoldenVectors.surface,
            descriptors: 2,
            patches: [(30, [5])],
            expected: .invalidField
        ),
        Mutation(
            name: "SURFACE 5 planes",
            base: GoldenVectors.surface,
            descriptors: 2,
            patches: [(31, [5])],
            expected: .invalidField
        ),
        Mutation(
            name: "SURFACE memfd not linear",
            base: GoldenVectors.surface,
            descriptors: 2,
            patches: [(32, [1])],
            expected: .invalidField
        ),
        Mutation(
            name: "SURFACE byte count 0",
            base: GoldenVectors.surface,
            descriptors: 2,
            patches: [(40, [0])],
            expected: .invalidField
        ),
        Mutation(
            name: "SURFACE byte count 2^32+1",
            base: GoldenVectors.surface,
            descriptors: 2,
            patches: [(40, le64((1 << 32) + 1))],
            expected: .invalidField
        ),
        Mutation(
            name: "SURFACE unused byte count",
            base: GoldenVectors.surface,
            descriptors: 2,
            patches: [(56, [1])],
            expected: .invalidField
        ),
        Mutation(
            name: "SURFACE plane past its descriptor",
            base: GoldenVectors.surface,
            descriptors: 2,
            patches: [(124, [3])],
            expected: .invalidField
        ),
        Mutation(
            name: "SURFACE plane offset wraps",
            base: GoldenVectors.surface,
            descriptors: 2,
            patches: [(112, le64(.max))],
            expected: .invalidField
        ),
        Mutation(
            name: "SURFACE row shorter than its elements",
            base: GoldenVectors.surface,
            descriptors: 2,
            patches: [(88, [5])],
            expected: .invalidField
        ),
        Mutation(
            name: "SURFACE plane descriptor index 2",
            base: GoldenVectors.surface,
            descriptors: 2,
            patches: [(104, [2])],
            expected: .invalidField
        ),
        Mutation(
            name: "SURFACE plane reserved",
            base: GoldenVectors.surface,
            descriptors: 2,
            patches: [(76, [1])],
            expected: .invalidField
        ),
        Mutation(
            name: "SURFACE unused plane not zero",
            base: GoldenVectors.surface,
            descriptors: 2,
            patches: [(150, [1])],
            expected: .invalidField
        ),
        Mutation(
            name: "SURFACE descriptor no plane uses",
            base: GoldenVectors.surface,
            descriptors: 2,
            patches: [(104, [0]), (44, [0])],
            expected: .invalidField
        ),
        Mutation(
            name: "SURFACE with one fd for two",
            base: GoldenVectors.surface,
            descriptors: 1,
            patches: [],
            expected: .missingDescriptor
        ),
        Mutation(
            name: "SURFACE with three fds for two",
            base: GoldenVectors.surface,
            descriptors: 3,
            patches: [],
            expected: .unexpectedDescriptors
        ),
        Mutation(
            name: "FRAME with an fd",
            base: GoldenVectors.frame,
            descriptors: 1,
            patches: [],
            expected: .unexpectedDescriptors
        ),
        Mutation(
            name: "FRAME surface 0",
            base: GoldenVectors.frame,
            descriptors: 0,
            patches: [(16, [0])],
            expected: .invalidField
        ),
        Mutation(
            name: "FRAME unknown flag",
            base: GoldenVectors.frame,
            descriptors: 0,
            patches: [(72, [4])],
            expected: .invalidField
        ),
        Mutation(
            name: "FRAME valid time with timescale 0",
            base: GoldenVectors.frame,
            descriptors: 0,
            patches: [(32, [0, 0, 0, 0])],
            expected: .invalidField
        ),
        Mutation(
            name: "FRAME unknown time flag",
            base: GoldenVectors.frame,
            descriptors: 0,
            patches: [(52, [0x21])],
            expected: .invalidField
        ),
        Mutation(
            name: "FRAME bytes used 2^32+1",
            base: GoldenVectors.frame,
            descriptors: 0,
            patches: [(64, le64((1 << 32) + 1))],
            expected: .invalidField
        ),
        Mutation(
            name: "DROP reversed range",
            base: GoldenVectors.drop,
            descriptors: 0,
            patches: [(8, [6])],
            expected: .invalidField
        ),
        Mutation(
            name: "DROP reason 6",
            base: GoldenVectors.drop,
            descriptors: 0,
            patches: [(24, [6])],
            expected: .invalidField
        ),
        Mutation(
            name: "DROP reserved",
            base: GoldenVectors.drop,
            descriptors: 0,
            patches: [(28, [1])],
            expected: .invalidField
        ),
        Mutation(
            name: "END_OF_STREAM reserved",
            base: GoldenVectors.endOfStream,
            descriptors: 0,
            patches: [(20, [1])],
            expected: .invalidField
        ),
        Mutation(
            name: "RELEASE unknown flag",
            base: GoldenVectors.release,
            descriptors: 0,
            patches: [(24, [2])],
            expected: .invalidField
        ),
        Mutation(
            name: "RELEASE surface 0",
            base: GoldenVectors.release,
            descriptors: 0,
            patches: [(16, [0])],
            expected: .invalidField
        ),
        Mutation(
            name: "FRAME sequence 2^64-1",
            base: GoldenVectors.frame,
            descriptors: 0,
            patches: [(8, [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff])],
            expected: .invalidField
        ),
        Mutation(
            name: "RETIRE surface 0",
            base: GoldenVectors.retire,
            descriptors: 0,
            patches: [(8, [0])],
            expected: .invalidField
        ),
        Mutation(
            name: "MONITOR_REPORT 33 records",
            base: GoldenVectors.monitorReport,
            descriptors: 0,
            patches: [(24, [40]), (26, [33])],
            expected: .invalidField
        ),
        Mutation(
            name: "MONITOR_REPORT more records than subscribers",
            base: GoldenVectors.monitorReport,
            descriptors: 0,
            patches: [(24, [0])],
            expected: .invalidField
        ),
        Mutation(
            name: "MONITOR_REPORT record count lies",
            base: GoldenVectors.monitorReport,
            descriptors: 0,
            patches: [(24, [2]), (26, [2])],
            expected: .wrongLength
        ),
        Mutation(
            name: "MONITOR_REPORT record reserved",
            base: GoldenVectors.monitorReport,
            descriptors: 0,
            patches: [(130, [1])],
            expected: .invalidField
        ),
    ]

    @Test(arguments: mutations) func everyOutOfRangeFieldIsATypedError(_ mutation: Mutation) {
        var bytes = mutation.base
        for patch in mutation.patches {
            bytes.replaceSubrange(patch.offset..<(patch.offset + patch.bytes.count), with: patch.bytes)
        }
        #expect(
            performing: { try WireMessage.decode(bytes, descriptorCount: mutation.descriptors) },
            throws: { error in (error as? WireError)?.kind == mutation.expected }
        )
    }

    @Test func aShortHelloOfAnUnknownVersionIsUnsupportedNotMalformed() {
        // Header, FourCC magic, version 7, and nothing else: 14 bytes.
        let short = hexBytes("01 00 00 00 0e 00 00 00  53 55 42 46 07 00")
        #expect(throws: WireError.self) { try WireMessage.decode(short, descriptorCount: 0) }
        do {
            _ = try WireMessage.decode(short, descriptorCount: 0)
        } catch {
            #expect(error.kind == .unsupportedVersion)
            #expect(error.errorCode == .unsupportedVersion)
        }
    }

    @Test func dropFrameCountSaturatesForTheWholeRange() throws {
        let whole = hexBytes(
            "21 00 00 00 20 00 00 00  00 00 00 00 00 00 00 00  ff ff ff ff ff ff ff ff  02 00 00 00 00 00 00 00"
        )
        guard case .drop(let drop) = try WireMessage.decode(whole, descriptorCount: 0) else {
            Issue.record("not a DROP")
            return
        }
        #expect(drop.frameCount == .max)
        #expect(WireDrop(5...5, reason: .discontinuity).frameCount == 1)
    }

    /// Seeded mutations of every golden vector plus random datagrams: the decoder returns or throws, never traps,
    /// and whatever it returns re-encodes to the same bytes (it accepted exactly the document's layout).
    @Test func decoderIsTotalAndAcceptsOnlyWhatItCanReencode() {
        var generator = SplitMix64(seed: 0xF8B5)
        for round in 0..<60_000 {
            var bytes: [UInt8]
            var descriptors: Int
            if round % 4 == 0 {
                bytes = (0..<Int(generator.next() % 300)).map { _ in UInt8(truncatingIfNeeded: generator.next()) }
                if bytes.count >= 2 { bytes[1] = 0 }
                descriptors = Int(generator.next() % 3)
            } else {
                let (base, baseDescriptors, _) = GoldenVectors.all[
                    Int(generator.next() % UInt64(GoldenVectors.all.count))
                ]
                bytes = base
                descriptors = baseDescriptors
                for _ in 0..<(1 + generator.next() % 3) {
                    let offset = Int(generator.next() % UInt64(bytes.count))
                    bytes[offset] = UInt8(truncatingIfNeeded: generator.next())
                }
            }
            if let message = try? WireMessage.decode(bytes, descriptorCount: descriptors) {
                #expect(message.encoded() == bytes || message.type == .error)
                #expect(message.descriptorCount == descriptors)
            }
        }
    }
}

/// A small deterministic generator for reproducible property tests.
struct SplitMix64: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
