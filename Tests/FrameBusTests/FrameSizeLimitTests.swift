import Foundation
import TestSupport
import Testing

@testable import FrameBus

/// A subscriber's own size policy (docs/PROTOCOL.md §8.2): a SURFACE larger than the largest frame it accepts ends
/// the subscription before anything is mapped or decoded (ERROR `frameTooLarge` to the publisher), so a hostile
/// publisher's few-KB compressed frame that claims 16384 × 16384 cannot make a decoding consumer fill 384 MiB.
@Suite(.timeLimit(.minutes(5))) struct FrameSizeLimitTests {
    @Test func theDefaultLimitAdmits8KEitherWayAndNothingLarger() {
        let limit = FrameSizeLimit.default
        #expect(limit.admits(width: 7680, height: 4320) && limit.admits(width: 4320, height: 7680))
        #expect(limit.admits(width: 8192, height: 4352))
        #expect(!limit.admits(width: 16384, height: 16384))
        #expect(!limit.admits(width: 8192, height: 8192), "more pixels than 8192 × 4352")
        #expect(!limit.admits(width: 8193, height: 1))
        #expect(!limit.admits(width: -1, height: 10) && !limit.admits(width: .max, height: .max))
        #expect(FrameSizeLimit(maximumWidth: 64, maximumHeight: 48).maximumPixelCount == 64 * 48)
    }

    static func publisher(_ path: String) throws -> (Publisher, PixelBufferPool) {
        let publisher = try Publisher(configuration: .init(path: path, formats: [.yuv420BiPlanarVideoRange8]))
        let pool = try PixelBufferPool(
            attributes: .init(width: 64, height: 48, pixelFormat: .yuv420BiPlanarVideoRange8, allocationThreshold: 8)
        )
        return (publisher, pool)
    }

    /// The first event that is a frame or the end.
    static func firstFrameOrEnd(_ subscriber: Subscriber) async throws -> SubscriberEvent? {
        for try await event in subscriber.events {
            switch event {
            case .frame, .ended: return event
            default: continue
            }
        }
        return nil
    }

    @Test(arguments: [true, false])
    func aSurfaceLargerThanTheSubscribersLimitEndsItsSubscription(rings: Bool) async throws {
        let path = temporaryBusPath("sizelimit")
        let (publisher, pool) = try Self.publisher(path)
        defer { publisher.stop() }
        var small = Subscriber.Configuration(path: path, acceptedFormats: [.yuv420BiPlanarVideoRange8])
        small.largestFrame = FrameSizeLimit(maximumWidth: 32, maximumHeight: 32)
        small.usesSharedMemoryRings = rings
        var roomy = small
        roomy.largestFrame = .default
        let refusing = try Subscriber(configuration: small)
        let accepting = try Subscriber(configuration: roomy)
        defer {
            refusing.cancel()
            accepting.cancel()
        }
        #expect(await eventually { publisher.subscriberCount == 2 })
        let producer = PacedProducer(publisher: publisher, pool: pool, fps: 50)
        defer { producer.stop() }
        let refused = try await Self.firstFrameOrEnd(refusing)
        guard case .ended(let error)? = refused else {
            Issue.record("a 64x48 frame reached a subscriber whose limit is 32x32: \(String(describing: refused))")
            return
        }
        #expect(error.code == .surfaceRejected, "\(error)")
        #expect("\(error)".contains("largest frame"), "\(error)")
        guard case .frame? = try await Self.firstFrameOrEnd(accepting) else {
            Issue.record("the default limit refused a 64x48 frame")
            return
        }
        // The publisher was told (ERROR frameTooLarge) and let the refusing subscriber go.
        #expect(await eventually { publisher.subscriberCount == 1 })
    }

    /// `framebus subscribe --decode` against a publisher whose compressed surface claims 16384 × 16384 in a sparse
    /// memfd (the outside attack): refused at the SURFACE by default, ERROR 12 to the publisher; with the limit
    /// turned off the same surface is accepted (and the frame, not a valid image, fails to decode).
    @Test(arguments: [nil, "none"] as [String?])
    func aDecodingSubscriberRefusesAHugeSparseCompressedFrame(limit: String?) async throws {
        let path = temporaryBusPath("sizelimit-cli")
        let peer = try await startPeer(["hostile-publisher", path, "huge-sparse-compressed"])
        #expect(await eventually { peer.output.contains("listening") })
        var arguments = ["subscribe", "--path", path, "--accept", "&8v0", "--decode", "--frames", "1", "--duration", "20"]
        if let limit { arguments += ["--max-frame-size", limit] }
        let subscribe = try await startFramebus(arguments)
        let status = try await subscribe.exitStatus(within: 120)
        #expect(await eventually(timeout: 60) { peer.output.contains("after 2") || peer.output.contains("error code=") })
        if limit == nil {
            #expect(status == 1, "\(subscribe.output)")
            #expect(subscribe.output.contains("largest frame"), "\(subscribe.output)")
            #expect(peer.output.contains("error code=\(WireErrorCode.frameTooLarge.rawValue)"), "\(peer.output)")
        } else {
            #expect(!peer.output.contains("error code=\(WireErrorCode.frameTooLarge.rawValue)"), "\(peer.output)")
        }
    }
}
