// Writes the protocol fuzzer's seed corpus: every message type as a datagram for the decoder (selector 0), and
// publisher sessions as scripts (selector 1) built from real datagrams: version-1 and version-2 subscribers,
// a monitor, releases, drops, retirements, slow readers, hostile HELLOs, stop.
import Glibc

@main
enum MakeSeeds {
    static var index = 0

    static func write(_ directory: String, _ bytes: [UInt8]) {
        index += 1
        let path = "\(directory)/seed-\(index)"
        guard let file = fopen(path, "wb") else { return }
        _ = bytes.withUnsafeBytes { fwrite($0.baseAddress, 1, $0.count, file) }
        fclose(file)
    }

    static func le16(_ value: Int) -> [UInt8] { [UInt8(value & 0xFF), UInt8(value >> 8 & 0xFF)] }

    static func main() {
        let directory = CommandLine.arguments[1]
        let nv12: UInt32 = 0x3432_3076
        let surface = WireSurface(
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
        let messages: [WireMessage] = [
            .hello(WireHello(deliveryMode: 1, queueDepth: 4, flags: 1, formats: [nv12, 0x2638_7630])),
            .hello(WireHello(version: 1, deliveryMode: 0, queueDepth: 1, formats: [nv12])),
            .hello(.monitor),
            .welcome(
                WireWelcome(
                    version: 2,
                    deliveryMode: 0,
                    queueDepth: 1,
                    maximumHeldFrames: 2,
                    format: nv12,
                    maximumMessageSize: 4096,
                    streamID: 1,
                    subscriberID: 3,
                    nextSequence: 77,
                    maximumAnnouncedSurfaces: 64
                )
            ),
            .error(WireErrorMessage(.notPermitted, "uid 4242 is not allowed")),
            .surface(surface),
            .surfaceV1(
                WireSurfaceV1(
                    surfaceID: 7,
                    allocationSize: 12,
                    pixelFormat: nv12,
                    width: 4,
                    height: 2,
                    planes: [
                        WirePlane(offset: 0, bytesPerRow: 4, width: 4, height: 2, bytesPerElement: 1),
                        WirePlane(offset: 8, bytesPerRow: 4, width: 2, height: 1, bytesPerElement: 2),
                    ]
                )
            ),
            .retireSurface(surfaceID: 7),
            .frame(
                WireFrame(
                    sequence: 12,
                    surfaceID: 7,
                    presentationTime: WireTime(value: 5, timescale: 90000, flags: 1),
                    duration: .invalid,
                    publishTime: 9,
                    bytesUsed: 12,
                    flags: 3,
                    attachments: (1, 1, 1, 1)
                )
            ),
            .drop(WireDrop(3...5, reason: .outOfBuffers)),
            .endOfStream(WireEndOfStream(lastSequence: .max, reason: 0)),
            .release(WireRelease(sequence: 12, surfaceID: 7, flags: 1)),
            .goodbye(reason: 0),
            .monitorReport(
                WireMonitorReport(time: 1, published: 2, droppedAtSource: 0, subscriberCount: 0, records: [])
            ),
        ]
        for message in messages {
            write(directory, [0, UInt8(message.descriptorCount)] + message.encoded())
        }

        func datagram(_ connection: UInt8, _ message: WireMessage) -> [UInt8] {
            let bytes = message.encoded()
            return [1, connection, 0, 1] + le16(bytes.count) + bytes
        }
        let helloV2 = WireMessage.hello(WireHello(deliveryMode: 1, queueDepth: 8, formats: [nv12]))
        let helloV1 = WireMessage.hello(WireHello(version: 1, deliveryMode: 0, queueDepth: 1, formats: [nv12]))
        var session: [UInt8] = [1]
        session += [0, 0] + datagram(0, helloV2)  // accept, HELLO v2
        session += [0, 0] + datagram(1, helloV1)  // accept, HELLO v1
        session += [0, 0] + datagram(2, .hello(.monitor))  // a monitor
        for surfaceIndex: UInt8 in [0, 1, 2, 3, 4, 0, 1] { session += [4, surfaceIndex, 1, 0] }
        session += [11, 0, 0, 0, 11, 1, 1, 1, 11, 0, 2, 0]  // releases
        session += [5, 2] + [3, 0, 0, 0, 0, 0, 0, 0]  // 3 frames lost upstream
        session += [3, 20, 6, 0, 6, 1]  // time passes; the pool frees surfaces 1 and 2
        session += [4, 5, 0, 1, 3, 200, 7, 0, 3]  // a DMA-BUF frame, a second passes, partial flush
        session += datagram(0, .release(WireRelease(sequence: 99, surfaceID: 1, flags: 0)))  // a bad RELEASE
        session += datagram(1, .goodbye(reason: 0)) + [8]
        write(directory, session)

        // Handshakes that go wrong, and a flood of silent connections.
        var hostile: [UInt8] = [1]
        for _ in 0..<10 { hostile += [0, 0] }
        hostile += [0, 1] + datagram(10, helloV2)  // not permitted
        hostile += [1, 0, 0, 0, 14, 0] + [1, 0, 0, 0, 14, 0, 0, 0, 0x53, 0x55, 0x42, 0x46, 7, 0]  // short HELLO, v7
        hostile += datagram(1, .release(WireRelease(sequence: 0, surfaceID: 1, flags: 0)))  // RELEASE first
        hostile += [3, 255, 3, 255, 3, 255]
        write(directory, hostile)

        // A slow reader: frames pile up and nothing is flushed.
        var slow: [UInt8] = [1, 9, 12]
        slow += [10, 0, 2, 1, 1, 64, 0]
        for index in 0..<80 { slow += [4, UInt8(index % 9), 1, 0] }
        slow += [5, 1] + [255, 255, 255, 255, 255, 255, 255, 255] + [3, 200]
        write(directory, slow)
    }
}
