import Foundation
import TestSupport
import Testing

@testable import FrameBus

/// `fb_subscriber_create_with_limit` from C (Tests/CABI/sizelimit.c): a subscriber's own largest frame
/// (docs/PROTOCOL.md §8.2). A publisher's 64x48 frames end a subscription limited to 32x32 with
/// FB_ERROR_SURFACE_REJECTED before any frame; a NULL limit and the default limit take them.
@Suite(.timeLimit(.minutes(5))) struct CABISizeLimitTests {
    /// One C subscriber: its limit (sizelimit.c's WIDTH and HEIGHT arguments) and whether 64x48 frames pass it.
    struct Case: Sendable, CustomTestStringConvertible {
        var width: String
        var height: String
        var admitted: Bool
        var testDescription: String { "\(width)x\(height) admits 64x48: \(admitted)" }
    }

    @Test(arguments: [
        Case(width: "32", height: "32", admitted: false), Case(width: "64", height: "48", admitted: true),
        Case(width: "-1", height: "0", admitted: true), Case(width: "0", height: "0", admitted: true),
    ])
    func aCSubscribersLimitRefusesLargerFramesOnly(_ limit: Case) async throws {
        let (width, height, admitted) = (limit.width, limit.height, limit.admitted)
        let scratch = try ScratchDirectory()
        let path = scratch.path("bus.sock")
        let publisher = try Publisher(configuration: .init(path: path, formats: [.yuv420BiPlanarVideoRange8]))
        defer { publisher.stop() }
        let pool = try PixelBufferPool(
            attributes: .init(width: 64, height: 48, pixelFormat: .yuv420BiPlanarVideoRange8, allocationThreshold: 8)
        )
        let program = try await CProgram.build("sizelimit")
        let run = try await program.start([path, "420v", width, height], in: scratch)
        #expect(await eventually { publisher.subscriberCount == 1 }, "\(run.output)")
        // Frames until the C subscriber saw one or ended (a bounded number: the test's time limit ends a hang).
        while !run.output.contains("frame seq=") && !run.output.contains("end status=") {
            let buffer = try publisher.makePixelBuffer(from: pool)
            try publisher.publish(buffer)
            _ = await eventually(timeout: 0.05) { run.output.contains("frame seq=") || run.output.contains("end status=") }
        }
        publisher.stop()
        #expect(try await run.exitStatus(within: 120) == 0, "\(run.output)")
        if admitted {
            #expect(run.output.contains("frame seq=") && run.output.contains("width=64 height=48"), "\(run.output)")
        } else {
            #expect(!run.output.contains("frame seq="), "\(run.output)")
            #expect(run.output.contains("end status=FB_ERROR_SURFACE_REJECTED"), "\(run.output)")
        }
    }
}
