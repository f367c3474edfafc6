import Foundation
import Glibc
import TestSupport
import Testing

@testable import FrameBus

/// `framebus publish --wait-for-subscriber`: the first frame waits for a subscriber, so a recorder started first gets
/// frame 0; the stop signals still stop the waiting publisher.
@Suite(.timeLimit(.minutes(3))) struct PublishWaitForSubscriberTests {
    @Test func aSubscriberThatConnectsLateStillGetsFrameZero() async throws {
        let path = temporaryBusPath("wait")
        let command = try await startFramebus([
            "publish", "--path", path, "--size", "64x48", "--fps", "200", "--wait-for-subscriber",
        ])
                try #require(await eventually { command.output.contains("waiting for a subscriber") }, "\(command.output)")
        // At 200 fps a publisher that did not wait would be far past frame 0 by the time we connect.

        var configuration = Subscriber.Configuration(path: path, acceptedFormats: [.yuv420BiPlanarVideoRange8])
        configuration.delivery = .queue(depth: 4)
        let subscriber = try Subscriber(configuration: configuration)
        defer { subscriber.cancel() }
        var first: UInt64?
        for try await event in subscriber.events {
            if case .frame(let frame) = event {
                first = frame.busSequenceNumber
                break
            }
            if case .dropped(let drop) = event { Issue.record("dropped before the first frame: \(drop)") }
            if case .ended(let error) = event { Issue.record("ended: \(error)") }
        }
        #expect(first == 0, "\(command.output)")
    }

    @Test(arguments: [SIGINT, SIGTERM])
    func aStopSignalStopsThePublisherWhileItWaits(_ signal: Int32) async throws {
        let path = temporaryBusPath("waitstop")
        let command = try await startFramebus([
            "publish", "--path", path, "--size", "64x48", "--fps", "30", "--wait-for-subscriber",
        ])
                try #require(await eventually { command.output.contains("waiting for a subscriber") }, "\(command.output)")
        command.send(signal)
        let status = try await command.exitStatus(within: 60)
        #expect(status == 0, "\(command.output)")
        #expect(!FileManager.default.fileExists(atPath: path), "the socket file was left behind")
    }
}
