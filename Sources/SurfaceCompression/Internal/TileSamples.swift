import CSurfaceCodecKernels

/// The memory of a base-format image: up to two planes, each a pointer and bytes per row.
///
/// For 4:2:0 formats plane 0 is Y and plane 1 is interleaved CbCr; for BGRA only plane 0 is used.
/// `originY` is the image row that the first row of the planes holds: 0 for a whole frame, the first row
/// of a tile row for a region scratch buffer.
@unsafe struct ImagePlanes {
    var plane0: UnsafeMutableRawPointer
    var bytesPerRow0: Int
    var plane1: UnsafeMutableRawPointer
    var bytesPerRow1: Int
    var originY: Int = 0
    /// Whether only this process can write the planes (a writable memfd surface it made: sealed with
    /// `F_SEAL_FUTURE_WRITE`, no other mapping can write it). Only then may the decoder read back what it wrote
    /// there as an LZ4 dictionary (docs/COMPRESSED-LAYOUT.md §9 rule 4); memory a caller hands over as a pointer,
    /// or a DMA-BUF, is not.
    var isPrivate = false
}

/// Moving one tile between the base-format image and contiguous per-component sample buffers
/// ("gather" for the encoder, "scatter" for the decoder). Component `c` lives at `scratch + c * stride`.
enum TileSamples {
    static func gather(
        _ grid: TileGrid,
        tile: Int,
        from image: ImagePlanes,
        into scratch: UnsafeMutableRawPointer,
        stride: Int
    ) {
        let rect = grid.tileRect(tile)
        switch grid.format.kind {
        case .yuv8:
            let y = unsafe scratch.assumingMemoryBound(to: UInt8.self)
            for row in 0..<rect.height {
                let src = unsafe image.plane0 + (rect.y + row - image.originY) * image.bytesPerRow0 + rect.x
                unsafe (y + row * rect.width).update(from: src.assumingMemoryBound(to: UInt8.self), count: rect.width)
            }
            let cw = rect.width / 2
            let cb = unsafe (scratch + stride).assumingMemoryBound(to: UInt8.self)
            let cr = unsafe (scratch + 2 * stride).assumingMemoryBound(to: UInt8.self)
            for row in 0..<rect.height / 2 {
                let src = unsafe (image.plane1 + ((rect.y - image.originY) / 2 + row) * image.bytesPerRow1 + rect.x)
                    .assumingMemoryBound(to: UInt16.self)
                let b = unsafe cb + row * cw
                let r = unsafe cr + row * cw
                for i in 0..<cw {
                    let pair = unsafe UInt16(littleEndian: src[i])
                    unsafe b[i] = UInt8(truncatingIfNeeded: pair)
                    unsafe r[i] = UInt8(truncatingIfNeeded: pair &>> 8)
                }
            }
        case .yuv16:
            let y = unsafe scratch.assumingMemoryBound(to: UInt16.self)
            for row in 0..<rect.height {
                let src = unsafe image.plane0 + (rect.y + row - image.originY) * image.bytesPerRow0 + rect.x * 2
                unsafe (y + row * rect.width).update(from: src.assumingMemoryBound(to: UInt16.self), count: rect.width)
            }
            let cw = rect.width / 2
            let cb = unsafe (scratch + stride).assumingMemoryBound(to: UInt16.self)
            let cr = unsafe (scratch + 2 * stride).assumingMemoryBound(to: UInt16.self)
            for row in 0..<rect.height / 2 {
                let src = unsafe (image.plane1 + ((rect.y - image.originY) / 2 + row) * image.bytesPerRow1 + rect.x * 2)
                    .assumingMemoryBound(to: UInt32.self)
                let b = unsafe cb + row * cw
                let r = unsafe cr + row * cw
                for i in 0..<cw {
                    let pair = unsafe UInt32(littleEndian: src[i])
                    unsafe b[i] = UInt16(truncatingIfNeeded: pair)
                    unsafe r[i] = UInt16(truncatingIfNeeded: pair &>> 16)
                }
            }
        case .bgra:
            let g = unsafe scratch.assumingMemoryBound(to: UInt8.self)
            let bg = unsafe (scratch + stride).assumingMemoryBound(to: UInt8.self)
            let rg = unsafe (scratch + 2 * stride).assumingMemoryBound(to: UInt8.self)
            let a = unsafe (scratch + 3 * stride).assumingMemoryBound(to: UInt8.self)
            for row in 0..<rect.height {
                let src = unsafe (image.plane0 + (rect.y + row - image.originY) * image.bytesPerRow0 + rect.x * 4)
                    .assumingMemoryBound(to: UInt32.self)
                let o = row * rect.width
                // 16 pixels at a time in SIMD registers (the scalar loop below does not vectorise: four outputs).
                var i = 0
                while i + 16 <= rect.width {
                    let p = unsafe UnsafeRawPointer(src + i).loadUnaligned(as: SIMD16<UInt32>.self)
                    let blue = SIMD16<UInt8>(truncatingIfNeeded: p)
                    let green = SIMD16<UInt8>(truncatingIfNeeded: p &>> 8)
                    let red = SIMD16<UInt8>(truncatingIfNeeded: p &>> 16)
                    let alpha = SIMD16<UInt8>(truncatingIfNeeded: p &>> 24)
                    unsafe UnsafeMutableRawPointer(g + o + i).storeBytes(of: green, as: SIMD16<UInt8>.self)
                    unsafe UnsafeMutableRawPointer(bg + o + i).storeBytes(of: blue &- green, as: SIMD16<UInt8>.self)
                    unsafe UnsafeMutableRawPointer(rg + o + i).storeBytes(of: red &- green, as: SIMD16<UInt8>.self)
                    unsafe UnsafeMutableRawPointer(a + o + i).storeBytes(of: alpha, as: SIMD16<UInt8>.self)
                    i += 16
                }
                for i in i..<rect.width {
                    let p = unsafe UInt32(littleEndian: src[i])
                    let blue = UInt8(truncatingIfNeeded: p)
                    let green = UInt8(truncatingIfNeeded: p &>> 8)
                    let red = UInt8(truncatingIfNeeded: p &>> 16)
                    unsafe g[o + i] = green
                    unsafe bg[o + i] = blue &- green
                    unsafe rg[o + i] = red &- green
                    unsafe a[o + i] = UInt8(truncatingIfNeeded: p &>> 24)
                }
            }
        }
    }

    /// Writes one tile into the image; `components[c]` points at component `c`'s contiguous samples. With
    /// `skipsComponent0`, a 4:2:0 tile's Y is already in the plane.
    static func scatter(
        _ grid: TileGrid,
        tile: Int,
        components: ComponentPointers,
        into image: ImagePlanes,
        skipsComponent0: Bool = false
    ) {
        let rect = grid.tileRect(tile)
        switch grid.format.kind {
        case .yuv8:
            let y = unsafe components.c0.assumingMemoryBound(to: UInt8.self)
            for row in 0..<(skipsComponent0 ? 0 : rect.height) {
                let dst = unsafe image.plane0 + (rect.y + row - image.originY) * image.bytesPerRow0 + rect.x
                unsafe dst.assumingMemoryBound(to: UInt8.self).update(from: y + row * rect.width, count: rect.width)
            }
            let cw = rect.width / 2
            let cb = unsafe components.c1.assumingMemoryBound(to: UInt8.self)
            let cr = unsafe components.c2.assumingMemoryBound(to: UInt8.self)
            for row in 0..<rect.height / 2 {
                let dst = unsafe (image.plane1 + ((rect.y - image.originY) / 2 + row) * image.bytesPerRow1 + rect.x)
                    .assumingMemoryBound(to: UInt8.self)
                // The C kernel (AVX-512 or SSE2 on x86-64): byte unpacking, which this loop in Swift did not become.
                unsafe csck_interleave_cbcr8(cb + row * cw, cr + row * cw, cw, dst)
            }
        case .yuv16:
            let y = unsafe components.c0.assumingMemoryBound(to: UInt16.self)
            for row in 0..<(skipsComponent0 ? 0 : rect.height) {
                let dst = unsafe image.plane0 + (rect.y + row - image.originY) * image.bytesPerRow0 + rect.x * 2
                unsafe dst.assumingMemoryBound(to: UInt16.self).update(from: y + row * rect.width, count: rect.width)
            }
            let cw = rect.width / 2
            let cb = unsafe components.c1.assumingMemoryBound(to: UInt16.self)
            let cr = unsafe components.c2.assumingMemoryBound(to: UInt16.self)
            for row in 0..<rect.height / 2 {
                let dst = unsafe (image.plane1 + ((rect.y - image.originY) / 2 + row) * image.bytesPerRow1 + rect.x * 2)
                    .assumingMemoryBound(to: UInt16.self)
                unsafe csck_interleave_cbcr16(cb + row * cw, cr + row * cw, cw, dst)
            }
        case .bgra:
            let g = unsafe components.c0.assumingMemoryBound(to: UInt8.self)
            let bg = unsafe components.c1.assumingMemoryBound(to: UInt8.self)
            let rg = unsafe components.c2.assumingMemoryBound(to: UInt8.self)
            let a = unsafe components.c3.assumingMemoryBound(to: UInt8.self)
            for row in 0..<rect.height {
                let dst = unsafe (image.plane0 + (rect.y + row - image.originY) * image.bytesPerRow0 + rect.x * 4)
                    .assumingMemoryBound(to: UInt8.self)
                let o = row * rect.width
                // The C kernel (SSE2 on x86-64): Swift's widening SIMD conversions are not inlined here.
                unsafe csck_interleave_bgra(g + o, bg + o, rg + o, a + o, rect.width, dst)
            }
        }
    }
}

/// Read-only pointers to the decoded samples of each component of one tile.
@unsafe struct ComponentPointers {
    var c0: UnsafeRawPointer
    var c1: UnsafeRawPointer
    var c2: UnsafeRawPointer
    var c3: UnsafeRawPointer
}
