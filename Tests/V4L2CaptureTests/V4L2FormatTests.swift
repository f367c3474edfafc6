import FrameBus
import Testing

@testable import V4L2Capture

/// The pure mappings: V4L2 fourcc and quantization to a FrameBus format, colorimetry to attachments, and the
/// surface layout of a single-planar buffer.
@Suite(.timeLimit(.minutes(5))) struct V4L2FormatTests {
    @Test func fourCCsAreV4L2sLittleEndianCodes() {
        // videodev2.h: v4l2_fourcc('N','V','1','2') = 'N' | 'V' << 8 | '1' << 16 | '2' << 24.
        #expect(V4L2PixelFormat.nv12.rawValue == 0x3231_564E)
        #expect(V4L2PixelFormat.p010.rawValue == 0x3031_3050)
        #expect(V4L2PixelFormat.xbgr32.rawValue == 0x3432_5258)
        #expect(V4L2PixelFormat.abgr32.rawValue == 0x3432_5241)
        #expect(V4L2PixelFormat.nv12.description == "NV12")
        #expect(V4L2PixelFormat(rawValue: 0x0102_0304).description == "0x1020304")
    }

    @Test func quantizationChoosesVideoOrFullRangeFormats() {
        #expect(V4L2PixelFormat.nv12.pixelFormat(range: .video) == .yuv420BiPlanarVideoRange8)
        #expect(V4L2PixelFormat.nv12.pixelFormat(range: .full) == .yuv420BiPlanarFullRange8)
        #expect(V4L2PixelFormat.p010.pixelFormat(range: .video) == .yuv420BiPlanarVideoRange10)
        #expect(V4L2PixelFormat.p010.pixelFormat(range: .full) == .yuv420BiPlanarFullRange10)
        #expect(V4L2PixelFormat.xbgr32.pixelFormat(range: .full) == .bgra8)
        #expect(V4L2PixelFormat.abgr32.pixelFormat(range: .full) == .bgra8)
        #expect(V4L2PixelFormat(rawValue: 0x5659_5559).pixelFormat(range: .video) == nil)  // YUYV: not carried
    }

    @Test func requestedFormatsMapToTheirV4L2Candidates() {
        #expect(V4L2PixelFormat.candidates(for: .yuv420BiPlanarFullRange8) == [.nv12, .nv12m])
        #expect(V4L2PixelFormat.candidates(for: .compressedYUV420BiPlanarVideoRange10) == [.p010])
        #expect(V4L2PixelFormat.candidates(for: .bgra8) == [.xbgr32, .abgr32])
    }

    @Test func defaultQuantizationFollowsVideodev2sMapping() {
        func colorimetry(_ colorspace: UInt32, quantization: UInt32 = 0) -> V4L2Colorimetry {
            V4L2Colorimetry(colorspace: colorspace, transferFunction: 0, yCbCrEncoding: 0, quantization: quantization)
        }
        // V4L2_MAP_QUANTIZATION_DEFAULT: Y'CbCr limited unless JPEG; RGB full.
        #expect(colorimetry(1).range(isYCbCr: true) == .video)
        #expect(colorimetry(7).range(isYCbCr: true) == .full)
        #expect(colorimetry(8).range(isYCbCr: false) == .full)
        #expect(colorimetry(3, quantization: 1).range(isYCbCr: true) == .full)
        #expect(colorimetry(7, quantization: 2).range(isYCbCr: true) == .video)
    }

    @Test func rec709ColorimetryBecomesITU709Attachments() {
        let attachments = V4L2Colorimetry(colorspace: 3, transferFunction: 0, yCbCrEncoding: 0, quantization: 2)
            .attachments(isYCbCr: true)
        #expect(attachments.colorPrimaries == .itu709)
        #expect(attachments.transferFunction == .itu709)
        #expect(attachments.yCbCrMatrix == .itu709)
    }

    @Test func smpte170MDefaultsTo601MatrixAnd709Transfer() {
        let attachments = V4L2Colorimetry(colorspace: 1, transferFunction: 0, yCbCrEncoding: 0, quantization: 0)
            .attachments(isYCbCr: true)
        #expect(attachments.colorPrimaries == .smpteC)
        #expect(attachments.transferFunction == .itu709)
        #expect(attachments.yCbCrMatrix == .itu601)
    }

    @Test func sRGBOnRGBFormatsHasNoMatrix() {
        let attachments = V4L2Colorimetry(colorspace: 8, transferFunction: 0, yCbCrEncoding: 0, quantization: 0)
            .attachments(isYCbCr: false)
        #expect(attachments.colorPrimaries == .itu709)
        #expect(attachments.transferFunction == .sRGB)
        #expect(attachments.yCbCrMatrix == nil)
    }

    @Test func explicitFieldsOverrideTheColorspaceDefaults() {
        // BT.2020 primaries with PQ transfer and a BT.2020 matrix (HDR10).
        let hdr = V4L2Colorimetry(colorspace: 10, transferFunction: 7, yCbCrEncoding: 6, quantization: 2)
            .attachments(isYCbCr: true)
        #expect(hdr.colorPrimaries == .itu2020)
        #expect(hdr.transferFunction == .pq)
        #expect(hdr.yCbCrMatrix == .itu2020)
        // xvYCC 601 on 709 primaries; linear transfer (V4L2_XFER_FUNC_NONE).
        let mixed = V4L2Colorimetry(colorspace: 3, transferFunction: 5, yCbCrEncoding: 3, quantization: 0)
            .attachments(isYCbCr: true)
        #expect(mixed.yCbCrMatrix == .itu601)
        #expect(mixed.transferFunction == .linear)
    }

    @Test func colorimetryCoreVideoCannotNameIsLeftUnset() {
        // opRGB primaries and transfer; BT.2020 constant luminance; DCI-P3 (its own white point).
        let opRGB = V4L2Colorimetry(colorspace: 9, transferFunction: 0, yCbCrEncoding: 7, quantization: 0)
            .attachments(isYCbCr: true)
        #expect(opRGB.colorPrimaries == nil)
        #expect(opRGB.transferFunction == nil)
        #expect(opRGB.yCbCrMatrix == nil)
        let p3 = V4L2Colorimetry(colorspace: 12, transferFunction: 0, yCbCrEncoding: 0, quantization: 0)
            .attachments(isYCbCr: true)
        #expect(p3.colorPrimaries == nil)
        #expect(p3.transferFunction == nil)
        #expect(p3.yCbCrMatrix == .itu709)
    }

    @Test func nv12LayoutPutsChromaAfterLumaWithTheSameStride() throws {
        let layout = try V4L2PixelFormat.nv12.surfaceLayout(
            width: 640,
            height: 480,
            bytesPerLine: 704,
            bufferLength: 704 * 720,
            range: .video
        )
        #expect(layout.pixelFormat == PixelFormat.yuv420BiPlanarVideoRange8.fourCC)
        #expect(layout.planes.count == 2)
        #expect(
            layout.planes[0] == PlaneLayout(offset: 0, bytesPerRow: 704, width: 640, height: 480, bytesPerElement: 1)
        )
        #expect(
            layout.planes[1]
                == PlaneLayout(offset: 704 * 480, bytesPerRow: 704, width: 320, height: 240, bytesPerElement: 2)
        )
        #expect(layout.allocationSize == 704 * 720)
    }

    @Test func p010AndXR24LayoutsHaveTheirElementSizes() throws {
        let p010 = try V4L2PixelFormat.p010.surfaceLayout(
            width: 64,
            height: 32,
            bytesPerLine: 128,
            bufferLength: 128 * 48,
            range: .full
        )
        #expect(p010.pixelFormat == PixelFormat.yuv420BiPlanarFullRange10.fourCC)
        #expect(p010.planes.map(\.bytesPerElement) == [2, 4])
        let xr24 = try V4L2PixelFormat.xbgr32.surfaceLayout(
            width: 10,
            height: 10,
            bytesPerLine: 40,
            bufferLength: 4096,
            range: .full
        )
        #expect(xr24.planes == [PlaneLayout(offset: 0, bytesPerRow: 40, width: 10, height: 10, bytesPerElement: 4)])
    }

    @Test func layoutsTheBufferCannotHoldAreRefused() {
        // One byte short of the chroma plane's end.
        #expect(throws: V4L2CaptureError.self) {
            try V4L2PixelFormat.nv12.surfaceLayout(
                width: 640,
                height: 480,
                bytesPerLine: 640,
                bufferLength: 640 * 720 - 1,
                range: .video
            )
        }
        // A stride below a row.
        #expect(throws: V4L2CaptureError.self) {
            try V4L2PixelFormat.xbgr32.surfaceLayout(
                width: 640,
                height: 480,
                bytesPerLine: 2559,
                bufferLength: 1 << 24,
                range: .full
            )
        }
        // Absurd numbers from a driver neither trap nor pass.
        #expect(throws: V4L2CaptureError.self) {
            try V4L2PixelFormat.nv12.surfaceLayout(
                width: 640,
                height: 480,
                bytesPerLine: Int(UInt32.max),
                bufferLength: Int(UInt32.max),
                range: .video
            )
        }
        // Odd sizes cannot be 4:2:0.
        #expect(throws: V4L2CaptureError.self) {
            try V4L2PixelFormat.nv12.surfaceLayout(
                width: 641,
                height: 480,
                bytesPerLine: 704,
                bufferLength: 1 << 20,
                range: .video
            )
        }
    }

    @Test func nv12mPutsEachPlaneAtTheStartOfItsOwnBuffer() throws {
        #expect(V4L2PixelFormat.nv12m.rawValue == 0x3231_4D4E)
        #expect(V4L2PixelFormat.nv12m.memoryPlaneCount == 2 && V4L2PixelFormat.nv12.memoryPlaneCount == 1)
        #expect(V4L2PixelFormat.nv12m.pixelFormat(range: .video) == .yuv420BiPlanarVideoRange8)
        let layout = try V4L2PixelFormat.nv12m.surfaceLayout(
            width: 320,
            height: 180,
            bytesPerLine: [384, 448],
            bufferLengths: [384 * 180, 448 * 90 + 100],
            range: .video
        )
        #expect(layout.planes.map(\.offset) == [0, 0])
        #expect(layout.planes.map(\.bytesPerRow) == [384, 448])
        #expect(layout.planes.map(\.height) == [180, 90])
        #expect(layout.allocationSize == 384 * 180 + 448 * 90 + 100)
        // A CbCr buffer too small for its plane, a missing buffer, or one stride for two buffers is refused.
        #expect(throws: V4L2CaptureError.self) {
            try V4L2PixelFormat.nv12m.surfaceLayout(
                width: 320,
                height: 180,
                bytesPerLine: [320, 320],
                bufferLengths: [320 * 180, 320 * 90 - 1],
                range: .video
            )
        }
        #expect(throws: V4L2CaptureError.self) {
            try V4L2PixelFormat.nv12m.surfaceLayout(
                width: 320,
                height: 180,
                bytesPerLine: [320],
                bufferLengths: [320 * 270],
                range: .video
            )
        }
        // The single-buffer NV12 checks the whole frame against its one buffer.
        #expect(throws: V4L2CaptureError.self) {
            try V4L2PixelFormat.nv12.surfaceLayout(
                width: 320,
                height: 180,
                bytesPerLine: [320, 320],
                bufferLengths: [320 * 270, 320 * 90],
                range: .video
            )
        }
    }
}
