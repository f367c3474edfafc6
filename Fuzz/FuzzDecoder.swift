// libFuzzer entry point for the compressed-surface decoder (built by Fuzz/run.sh, not by SwiftPM).
//
// The input is taken as the bytes of a compressed surface. It is parsed and, if the header and table are
// valid, decoded into an image of the size the header describes, with checksums off (so the fuzzer reaches
// the payload decoders) and on, into planes taken as shared and as private (the in-plane dictionary path). Any crash, out-of-bounds access (AddressSanitizer) or hang is a bug; a thrown
// CompressionError is the expected outcome for damaged input.

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzDecoder(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    // Copy into an exact-size allocation so AddressSanitizer sees any read past the end.
    let input = UnsafeMutableRawPointer.allocate(byteCount: max(size, 1), alignment: 16)
    defer { input.deallocate() }
    input.copyMemory(from: data, byteCount: size)
    _ = try? TileCodec.bytesUsed(UnsafeRawPointer(input), count: size)
    for verify in [false, true] {
        guard let header = try? TileCodec.parse(UnsafeRawPointer(input), count: size, verifyChecksums: verify) else {
            return 0
        }
        let grid = header.grid
        // A valid surface may describe a huge image made of solid tiles; keep the fuzzer's memory bounded.
        guard grid.rawImageByteCount <= 32 << 20 else { return 0 }
        let bytesPerSample = grid.format.bytesPerSample
        let plane0Bytes: Int
        let rowBytes0: Int
        let rowBytes1: Int
        switch grid.format.kind {
        case .bgra:
            rowBytes0 = grid.width * 4
            rowBytes1 = rowBytes0
            plane0Bytes = rowBytes0 * grid.height
        case .yuv8, .yuv16:
            rowBytes0 = grid.width * bytesPerSample
            rowBytes1 = grid.width * bytesPerSample
            plane0Bytes = rowBytes0 * grid.height
        }
        let total = grid.rawImageByteCount
        let image = UnsafeMutableRawPointer.allocate(byteCount: max(total, 1), alignment: 64)
        defer { image.deallocate() }
        // Both kinds of plane: memory others may write (the private inner-payload areas hold every dictionary) and
        // memory only this decoder writes (an lz4Up Y band's dictionary is the band above it in the plane).
        for isPrivate in [false, true] {
            let planes = ImagePlanes(
                plane0: image,
                bytesPerRow0: rowBytes0,
                plane1: grid.format.kind == .bgra ? image : image + plane0Bytes,
                bytesPerRow1: rowBytes1,
                isPrivate: isPrivate
            )
            try? TileCodec.decode(
                header,
                from: UnsafeRawPointer(input),
                tiles: 0..<grid.tileCount,
                into: planes,
                threads: 1,
                verifyChecksums: verify
            )
        }
    }
    return 0
}
