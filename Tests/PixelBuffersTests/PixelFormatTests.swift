import CFrameBusShims
import PixelBuffers
import Testing

@Suite(.timeLimit(.minutes(5))) struct PixelFormatTests {
    @Test func fourCharacterCodesRoundTrip() throws {
        for format in PixelFormat.all {
            #expect(try PixelFormat(format.name) == format)
            #expect(try PixelFormat(fourCC: format.fourCC) == format)
        }
        #expect(PixelFormat.yuv420BiPlanarVideoRange8.fourCC == 0x3432_3076)
        #expect(
            PixelFormat.all.map(\.name) == [
                "420v", "420f", "x420", "xf20", "BGRA", "&8v0", "&8f0", "&xv0", "&xf0", "&BGA",
            ]
        )
    }

    @Test func unknownCodesAreTypedErrors() {
        #expect(throws: PixelBufferError(code: .unknownPixelFormat, operation: "PixelFormat(fourCC: 2vuy)")) {
            try PixelFormat("2vuy")
        }
        #expect(throws: PixelBufferError.self) { try PixelFormat("toolong") }
    }

    @Test func compressedVariantsMapBothWays() {
        for (base, compressed) in zip(PixelFormat.baseFormats, PixelFormat.compressedFormats) {
            #expect(base.compressedVariant == compressed)
            #expect(compressed.base == base)
            #expect(compressed.compressedVariant == nil)
            #expect(base.base == base)
            #expect(compressed.isCompressed && !base.isCompressed)
            #expect(compressed.planes == base.planes)
            #expect(compressed.drmFourCC == base.drmFourCC)
            #expect(compressed.bitDepth == base.bitDepth && compressed.range == base.range)
        }
    }

    @Test func drmFourCCsMatchDRMFourCCHeader() {
        // The shim's constants are checked against drm_fourcc.h with _Static_assert.
        #expect(PixelFormat.yuv420BiPlanarVideoRange8.drmFourCC == CFB_DRM_FORMAT_NV12)
        #expect(PixelFormat.yuv420BiPlanarFullRange8.drmFourCC == CFB_DRM_FORMAT_NV12)
        #expect(PixelFormat.yuv420BiPlanarVideoRange10.drmFourCC == CFB_DRM_FORMAT_P010)
        #expect(PixelFormat.yuv420BiPlanarFullRange10.drmFourCC == CFB_DRM_FORMAT_P010)
        #expect(PixelFormat.bgra8.drmFourCC == CFB_DRM_FORMAT_ARGB8888)
        #expect(PixelFormat.yuv420BiPlanarVideoRange8.drmFormatName == "NV12")
        #expect(PixelFormat.yuv420BiPlanarFullRange10.drmFormatName == "P010")
        #expect(PixelFormat.bgra8.drmFormatName == "AR24")
    }

    /// libdrm's drmGetFormatName spellings, without libdrm: trailing spaces trimmed, `_BE`, `INVALID`.
    @Test(
        arguments: [
            (UInt32(0x3231_564E), "NV12"), (UInt32(0x2020_3852), "R8"), (UInt32(0x3631_4752) | 1 << 31, "RG16_BE"),
            (UInt32(0), "INVALID"), (UInt32(1), "0x1"),
        ] as [(UInt32, String)]
    )
    func drmFormatNamesAreSpelledAsLibdrmSpellsThem(code: UInt32, name: String) {
        #expect(PixelFormat.drmFormatName(code) == name)
    }

    @Test func geometryMatchesTheFormatTable() {
        let nv12 = PixelFormat.yuv420BiPlanarVideoRange8
        #expect(
            nv12.planes.count == 2 && nv12.bitDepth == 8 && nv12.range == .video && nv12.chromaSubsampling == .yuv420
        )
        #expect(nv12.planes[1].horizontalSubsampling == 2 && nv12.planes[1].bytesPerElement == 2)
        let p010 = PixelFormat.yuv420BiPlanarFullRange10
        #expect(p010.bitDepth == 10 && p010.range == .full && p010.planes[0].bytesPerElement == 2)
        #expect(p010.planes[1].bytesPerElement == 4)
        let bgra = PixelFormat.bgra8
        #expect(bgra.planes.count == 1 && bgra.planes[0].bytesPerElement == 4 && bgra.chromaSubsampling == .none)
        #expect(!nv12.isValidSize(width: 3, height: 2))
        #expect(bgra.isValidSize(width: 3, height: 3))
        #expect(!bgra.isValidSize(width: 0, height: 3))
    }
}
