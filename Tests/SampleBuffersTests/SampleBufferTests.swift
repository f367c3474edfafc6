import PixelBuffers
import SampleBuffers
import Synchronization
import Testing

private func timing(_ frame: Int64) -> SampleTimingInfo {
    SampleTimingInfo(
        presentationTimeStamp: MediaTime(value: frame * 1001, timescale: 30000),
        duration: MediaTime(value: 1001, timescale: 30000)
    )
}

private func makeBuffer(
    _ format: PixelFormat = .yuv420BiPlanarVideoRange8,
    width: Int = 64,
    height: Int = 48,
    attachments: PixelBufferAttachments = .bt709
) throws -> PixelBuffer {
    try PixelBuffer(width: width, height: height, pixelFormat: format, attachments: attachments)
}

@Suite(.timeLimit(.minutes(5))) struct VideoFormatDescriptionTests {
    @Test(arguments: PixelFormat.baseFormats)
    func descriptionOfAPixelBufferMatchesIt(format: PixelFormat) throws {
        let buffer = try makeBuffer(format, width: 32, height: 16)
        let description = VideoFormatDescription(imageBuffer: buffer)
        #expect(description.pixelFormat == format)
        #expect(description.dimensions == .init(width: 32, height: 16))
        #expect(description.extensions.colorPrimaries == .itu709 && description.extensions.yCbCrMatrix == .itu709)
        #expect(description.extensions.chromaLocationTopField == .center)
        #expect(description.isFullRange == (format.range == .full))
        #expect(description.matches(buffer))
    }

    @Test func descriptionDoesNotMatchOtherSizeFormatOrColour() throws {
        let description = VideoFormatDescription(imageBuffer: try makeBuffer())
        #expect(!description.matches(try makeBuffer(width: 64, height: 50)))
        #expect(!description.matches(try makeBuffer(width: 66, height: 48)))
        #expect(!description.matches(try makeBuffer(.yuv420BiPlanarFullRange8)))
        #expect(!description.matches(try makeBuffer(attachments: PixelBufferAttachments())))
        var other = PixelBufferAttachments.bt709
        other.transferFunction = .pq
        #expect(!description.matches(try makeBuffer(attachments: other)))
        // A description made from scratch with the same values matches.
        let made = VideoFormatDescription(
            pixelFormat: .yuv420BiPlanarVideoRange8,
            dimensions: .init(width: 64, height: 48),
            extensions: .init(attachments: .bt709)
        )
        #expect(made == description && made.hashValue == description.hashValue)
        #expect(made.description == "420v 64x48")
    }

    @Test func customAttachmentsAndModesDoNotAffectMatching() throws {
        let buffer = try makeBuffer()
        let description = VideoFormatDescription(imageBuffer: buffer)
        buffer.setAttachment("com.example.exposure", .double(0.01), mode: .shouldNotPropagate)
        #expect(description.matches(buffer))
        buffer.setAttachment(.cleanAperture, .cleanAperture(CleanAperture(width: 60, height: 40)))
        #expect(!description.matches(buffer))
        #expect(VideoFormatDescription(imageBuffer: buffer).extensions.cleanAperture?.width == 60)
    }

    @Test func extensionsRoundTripThroughAttachments() {
        let extensions = VideoFormatDescription.Extensions(
            colorPrimaries: .itu2020,
            transferFunction: .hlg,
            yCbCrMatrix: .itu2020,
            chromaLocationTopField: .topLeft,
            chromaLocationBottomField: .left,
            cleanAperture: CleanAperture(width: 1916, height: 1076, horizontalOffset: 1, verticalOffset: -1),
            pixelAspectRatio: PixelAspectRatio(horizontalSpacing: 4, verticalSpacing: 3)
        )
        #expect(VideoFormatDescription.Extensions(attachments: extensions.attachments) == extensions)
        #expect(VideoFormatDescription.Extensions().attachments.isEmpty)
    }

    @Test func compressedFormatsAreDescribedToo() throws {
        let buffer = try PixelBuffer(
            width: 64,
            height: 48,
            compressedFormat: .compressedYUV420BiPlanarVideoRange8,
            opaqueByteCount: 8192
        )
        let description = VideoFormatDescription(imageBuffer: buffer)
        #expect(description.pixelFormat == .compressedYUV420BiPlanarVideoRange8 && description.matches(buffer))
        #expect(!description.matches(try makeBuffer(attachments: PixelBufferAttachments())))
    }
}

@Suite(.timeLimit(.minutes(5))) struct SampleBufferTests {
    @Test func sampleBufferCarriesImageTimingAndDescription() throws {
        let image = try makeBuffer()
        let sample = try SampleBuffer(imageBuffer: image, timing: timing(3))
        #expect(sample.imageBuffer === image)
        #expect(sample.formatDescription == VideoFormatDescription(imageBuffer: image))
        #expect(sample.presentationTimeStamp == MediaTime(value: 3003, timescale: 30000))
        #expect(sample.duration == MediaTime(value: 1, timescale: 30) + MediaTime(value: 1, timescale: 30000))
        #expect(sample.decodeTimeStamp.kind == .invalid)
        #expect(sample.isValid && sample.dataIsReady)
        #expect(sample.attachments.isEmpty && !sample.isDiscontinuity && sample.droppedFrameReason == nil)
        #expect(sample.description.hasPrefix("SampleBuffer(420v 64x48, pts 3003/30000"))
    }

    @Test func mismatchedFormatDescriptionIsRefused() throws {
        let image = try makeBuffer()
        let wrong = VideoFormatDescription(imageBuffer: try makeBuffer(width: 32, height: 48))
        #expect(throws: SampleBufferError.self) {
            try SampleBuffer(imageBuffer: image, formatDescription: wrong, timing: timing(0))
        }
        do {
            _ = try SampleBuffer(imageBuffer: image, formatDescription: wrong, timing: timing(0))
            Issue.record("expected an error")
        } catch {
            #expect(error.code == .formatDescriptionMismatch)
        }
        let right = VideoFormatDescription(imageBuffer: image)
        #expect(try SampleBuffer(imageBuffer: image, formatDescription: right, timing: timing(0)).isValid)
    }

    @Test func invalidateRunsTheHandlerExactlyOnce() throws {
        let calls = Mutex(0)
        let sample = try SampleBuffer(imageBuffer: try makeBuffer(), timing: timing(0)) { invalidated in
            #expect(!invalidated.isValid)
            calls.withLock { $0 += 1 }
        }
        #expect(sample.invalidate())
        #expect(!sample.invalidate())
        #expect(!sample.isValid && calls.withLock { $0 } == 1)
        #expect(sample.description.hasSuffix(", invalid)"))
        #expect(throws: SampleBufferError(code: .invalidated, operation: "SampleBuffer.setInvalidationHandler")) {
            try sample.setInvalidationHandler(nil)
        }
    }

    @Test func concurrentInvalidationRunsTheHandlerOnce() async throws {
        let calls = Mutex(0)
        let sample = try SampleBuffer(imageBuffer: try makeBuffer(), timing: timing(0)) { _ in
            calls.withLock { $0 += 1 }
        }
        let winners = await withTaskGroup(of: Bool.self) { group in
            for _ in 0..<32 { group.addTask { sample.invalidate() } }
            return await group.reduce(0) { $0 + ($1 ? 1 : 0) }
        }
        #expect(winners == 1 && calls.withLock { $0 } == 1)
    }

    @Test func replacedInvalidationHandlerIsTheOneCalled() throws {
        let which = Mutex<[String]>([])
        let sample = try SampleBuffer(imageBuffer: try makeBuffer(), timing: timing(0)) { _ in
            which.withLock { $0.append("first") }
        }
        try sample.setInvalidationHandler { _ in which.withLock { $0.append("second") } }
        sample.invalidate()
        #expect(which.withLock { $0 } == ["second"])
    }

    @Test func makeDataReadyCallsTheHandlerThenMarksReady() throws {
        let calls = Mutex(0)
        let sample = try SampleBuffer(
            imageBuffer: try makeBuffer(),
            timing: timing(0),
            dataIsReady: false,
            makeDataReadyHandler: { _ in calls.withLock { $0 += 1 } }
        )
        #expect(!sample.dataIsReady)
        try sample.makeDataReady()
        #expect(sample.dataIsReady && calls.withLock { $0 } == 1)
        try sample.makeDataReady()  // already ready: the handler is not called again
        #expect(calls.withLock { $0 } == 1)
    }

    @Test func makeDataReadyFailures() throws {
        let noHandler = try SampleBuffer(imageBuffer: try makeBuffer(), timing: timing(0), dataIsReady: false)
        #expect(throws: SampleBufferError(code: .dataNotReady, operation: "SampleBuffer.makeDataReady")) {
            try noHandler.makeDataReady()
        }
        noHandler.setDataReady()
        try noHandler.makeDataReady()
        #expect(noHandler.dataIsReady)

        let failing = try SampleBuffer(
            imageBuffer: try makeBuffer(),
            timing: timing(0),
            dataIsReady: false,
            makeDataReadyHandler: { _ throws(SampleBufferError) in
                throw SampleBufferError(code: .dataFailed, operation: "decode")
            }
        )
        #expect(throws: SampleBufferError(code: .dataFailed, operation: "decode")) { try failing.makeDataReady() }
        #expect(!failing.dataIsReady)

        failing.invalidate()
        #expect(throws: SampleBufferError(code: .invalidated, operation: "SampleBuffer.makeDataReady")) {
            try failing.makeDataReady()
        }
    }

    @Test func attachmentsAreReadAndWrittenThroughTheBuffer() throws {
        let sample = try SampleBuffer(
            imageBuffer: try makeBuffer(),
            timing: timing(0),
            attachments: SampleAttachments(discontinuity: [.streamDiscontinuity])
        )
        #expect(sample.isDiscontinuity && sample.discontinuity == .streamDiscontinuity)
        sample.discontinuity = []
        #expect(!sample.isDiscontinuity)
        sample[attachment: "com.example.frameNumber"] = .integer(42)
        #expect(sample[attachment: "com.example.frameNumber"] == .integer(42))
        #expect(sample.attachments.custom.count == 1)
        sample[attachment: "com.example.frameNumber"] = nil
        #expect(sample.attachments.isEmpty)
        let previous = sample.updateAttachments { attachments -> DiscontinuityFlags in
            defer { attachments.discontinuity.insert(.formatChange) }
            return attachments.discontinuity
        }
        #expect(previous == [] && sample.discontinuity == .formatChange)
    }

    @Test(arguments: DroppedFrameReason.allCases)
    func droppedFrameMarkerCarriesItsReason(reason: DroppedFrameReason) {
        let marker = SampleBuffer(
            droppedFrameReason: reason,
            info: reason == .discontinuity ? .cameraModeSwitch : nil,
            timing: timing(7),
            attachments: SampleAttachments(droppedFrameReason: .frameWasLate, discontinuity: [.samplesDropped])
        )
        #expect(marker.imageBuffer == nil && marker.formatDescription == nil)
        #expect(marker.droppedFrameReason == reason)
        #expect(marker.droppedFrameReasonInfo == (reason == .discontinuity ? .cameraModeSwitch : nil))
        #expect(marker.discontinuity == .samplesDropped)
        #expect(marker.presentationTimeStamp == MediaTime(value: 7007, timescale: 30000))
        #expect(marker.isValid && marker.dataIsReady)
        #expect(marker.description.hasPrefix("SampleBuffer(dropped \(reason)"))
    }

    @Test func droppedFrameReasonCanBeSetOnAnyBuffer() throws {
        let sample = try SampleBuffer(imageBuffer: try makeBuffer(), timing: timing(0))
        sample.droppedFrameReason = .outOfBuffers
        sample.droppedFrameReasonInfo = .upstreamLoss
        #expect(
            sample.attachments
                == SampleAttachments(droppedFrameReason: .outOfBuffers, droppedFrameReasonInfo: .upstreamLoss)
        )
    }

    @Test func sampleBuffersAreEqualOnlyToThemselves() throws {
        let image = try makeBuffer()
        let a = try SampleBuffer(imageBuffer: image, timing: timing(0))
        let b = try SampleBuffer(imageBuffer: image, timing: timing(0))
        #expect(a == a && a != b)
        #expect(Set([a, b, a]).count == 2)
    }

    @Test func sampleBufferCrossesTasks() async throws {
        let sample = try SampleBuffer(imageBuffer: try makeBuffer(), timing: timing(1))
        let seen = await Task.detached { () -> MediaTime in
            sample.droppedFrameReason = .frameWasLate
            return sample.presentationTimeStamp
        }.value
        #expect(seen == MediaTime(value: 1001, timescale: 30000) && sample.droppedFrameReason == .frameWasLate)
    }
}
