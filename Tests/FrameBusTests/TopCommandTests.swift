import Foundation
import Glibc
import Synchronization
import Testing
import TestSupport

@testable import FrameBus

@Suite(.timeLimit(.minutes(5))) struct TopCommandTests {
    @Test func topShowsALiveSubscriberFromAnotherProcess() async throws {
        let path = temporaryBusPath("top")
        let publisher = try Publisher(configuration: .init(path: path, formats: [.yuv420BiPlanarVideoRange8]))
        defer { publisher.stop() }
        let subscriber = try await startPeer(["bus-subscriber", path, "--timeout", "600"])
        try #require(await eventually { publisher.subscriberCount == 1 })
        let pool = try PixelBufferPool(
            attributes: .init(width: 64, height: 48, pixelFormat: .yuv420BiPlanarVideoRange8, allocationThreshold: 34)
        )
        let running = Atomic<Bool>(true)
        let producer = Thread {
            var index = 0
            while running.load(ordering: .relaxed) {
                if let buffer = try? publisher.makePixelBuffer(from: pool) {
                    _ = try? fillFrame(buffer, index: index)
                    _ = try? publisher.publish(buffer)
                    index += 1
                }
                usleep(16_000)
            }
        }
        producer.start()
        defer { running.store(false, ordering: .relaxed) }

        let top = try await startFramebus(["top", path, "--iterations", "2"])
        let status = try await top.exitStatus(within: 300)
        #expect(status == 0, "\(top.output)")
        let id = try #require(publisher.statistics.subscribers.first?.id)
        let rows = top.output.split(separator: "\n").filter { $0.hasPrefix("\(id) ") }
        #expect(rows.count == 2, "\(top.output)")
        let fields = rows.last.map { $0.split(separator: " ", omittingEmptySubsequences: true) } ?? []
        #expect(fields.count >= 13, "\(top.output)")
        if fields.count >= 13 {
            #expect(fields[2] == "420v")
            #expect(fields[3] == "latest")
            #expect((Double(fields[6]) ?? 0) > 0, "delivered per second: \(top.output)")
        }
        _ = subscriber
    }

    @Test func textFromThePublisherIsPrintedEscaped() async throws {
        let path = temporaryBusPath("evil-top")
        let listener = try Socket.listen(path: path, mode: 0o600).get()
        defer { unlink(path) }
        // top waits 5 s for the answer to its HELLO: accept, HELLO and the answer happen on a thread started before
        // top is, with no wait for a thread of the (busy) cooperative pool in between.
        let evil = WireMessage.error(WireErrorMessage(.notPermitted, "go away \u{1B}[2J\u{1B}]0;pwned\u{07} now")).encoded()
        let publisherSide = DedicatedThreadTask("raw-publisher") { () -> WireHello? in
            guard try listener.waitReadable(timeoutMilliseconds: 120_000).get(),
                let socket = try listener.accept().get()
            else { return nil }
            let connection = RawPeer(socket: socket)
            guard case .hello(let hello) = connection.next(timeout: 60) else { return nil }
            connection.send(evil)
            return hello
        }
        let top = try await startFramebus(["top", path, "--iterations", "1"])
        let hello = try await publisherSide.value
        #expect(try #require(hello, "top did not connect and say HELLO: \(top.output)").kind == .monitor)
        let status = try await top.exitStatus(within: 300)
        #expect(status != 0)
        #expect(top.output.contains("go away \\u{1B}[2J\\u{1B}]0;pwned\\u{07} now"), "\(top.output)")
        #expect(!top.output.contains("\u{1B}"))
    }
}
