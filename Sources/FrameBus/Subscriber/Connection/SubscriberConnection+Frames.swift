import PixelBuffers
import SampleBuffers
import Surfaces

// FRAME: a frame the state machine accepted, made into a sample buffer for the consumer, held until released.

extension SubscriberConnection {
    func deliver(_ frame: WireFrame, discontinuity: DiscontinuityFlags) -> Bool {
        guard let imported = surfaces[frame.surfaceID] else {
            return perform(machine.frameRefused("FRAME on surface \(frame.surfaceID), never imported"), descriptors: [])
        }
        let surface = imported.surface
        if let refusal = surfaces[frame.surfaceID]?.committedMemoryRefusal(for: frame) {
            // The connection fails before anyone touched memory the publisher did not commit.
            return perform(machine.frameRefused(refusal), descriptors: [])
        }
        // From here the frame is held: the token releases it whatever happens.
        let token = ReleaseToken(
            sequence: frame.sequence,
            surfaceID: frame.surfaceID,
            generation: generation,
            sender: core.sender
        )
        // Sized for its three entries up front, so filling it never regrows it.
        var custom = [AttachmentKey: AttachmentValue](minimumCapacity: 3)
        custom[.busSequenceNumber] = .integer(Int64(bitPattern: frame.sequence))
        custom[.busBytesUsed] = .integer(Int64(clamping: frame.bytesUsed))
        custom[.busPublishTime] = .integer(Int64(bitPattern: frame.publishTime))
        let attachments = SampleAttachments(discontinuity: discontinuity, custom: custom)
        let pixelAttachments: PixelBufferAttachments
        if let last = lastAttachments, last.codes == frame.attachments {
            pixelAttachments = last.decoded
        } else {
            pixelAttachments = WireAttachments.decode(frame.attachments)
            lastAttachments = (frame.attachments, pixelAttachments)
        }
        let timing = SampleTimingInfo(
            presentationTimeStamp: Self.mediaTime(frame.presentationTime),
            duration: Self.mediaTime(frame.duration)
        )
        let sample: SampleBuffer
        do {
            // The frame is held for as long as its pixel buffer lives: whoever keeps `sampleBuffer.imageBuffer`
            // (and drops the sample buffer) keeps the publisher from recycling the surface, as with CoreVideo.
            // Invalidating the sample buffer does not release it either, since its image buffer may still be in use.
            // The import checked that the surface fits its format.
            let pixelBuffer = PixelBuffer(
                checkedSurface: surface,
                pixelFormat: imported.format,
                attachments: pixelAttachments,
                releaseHandler: { token.release() }
            )
            sample = try SampleBuffer(
                imageBuffer: pixelBuffer,
                timing: timing,
                attachments: attachments,
                dataIsReady: true
            )
        } catch {
            token.release(notDelivered: true)
            return perform(machine.frameRefused("surface \(frame.surfaceID): \(error)"), descriptors: [])
        }
        if isCallerTurn { core.leadership.framesReadByCallers.add(1, ordering: .relaxed) }
        slice.lastFrameConsumedHere = core.deliver(
            PendingFrame(sample: sample, token: token, publishTime: frame.publishTime, bytesUsed: frame.bytesUsed),
            sequence: frame.sequence
        )
        return true
    }

    static func mediaTime(_ time: WireTime) -> MediaTime {
        let flags = MediaTime.Flags(rawValue: time.flags).intersection(.all)
        guard flags.contains(.valid) else { return .invalid }
        return MediaTime(value: time.value, timescale: time.timescale, flags: flags)
    }
}
