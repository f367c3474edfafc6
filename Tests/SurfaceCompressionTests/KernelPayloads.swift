/// Inputs for the kernel tests (KernelUnpackingTests, VectorKernelTests, NEONKernelTests), made in one place.

/// How the block widths of an arbitrary packed payload are drawn.
enum PayloadWidths: CaseIterable {
    /// Uniform in 0...maximum.
    case uniform
    /// The maximum three times in four, else uniform.
    case mostlyWidest
    /// 0...2 only.
    case narrow
    /// Always the maximum (no randomness spent on widths).
    case widest

    /// The three mixes the tier comparisons walk through, in their historical order (style 0, 1, 2).
    static let mixes: [PayloadWidths] = [.uniform, .mostlyWidest, .narrow]
}

/// A packed payload (packed8 for `maximum` 8, packed10 for 10) of `blocks` blocks: width nibbles drawn as `widths`
/// says, random predictor bits and random residual bytes. Valid, whatever it decodes to.
func arbitraryPackedPayload(blocks: Int, maximum: Int, widths: PayloadWidths, random: inout SplitMix) -> [UInt8] {
    var nibbles = [UInt8](repeating: 0, count: (blocks + 1) / 2)
    var total = 0
    for block in 0..<blocks {
        let w: Int
        switch widths {
        case .uniform: w = Int(random.next() % UInt64(maximum + 1))
        case .mostlyWidest: w = random.next() % 4 == 0 ? Int(random.next() % UInt64(maximum + 1)) : maximum
        case .narrow: w = Int(random.next() % 3)
        case .widest: w = maximum
        }
        nibbles[block / 2] |= UInt8(w) << (4 * (block % 2))
        total += w
    }
    var bits = [UInt8](repeating: 0, count: (blocks + 7) / 8)
    for block in 0..<blocks where random.next() % 2 == 0 { bits[block / 8] |= 1 << (block % 8) }
    return nibbles + bits + (0..<total).map { _ in UInt8(truncatingIfNeeded: random.next()) }
}

/// The number of 8-sample blocks of a `width` × `height` component.
func blockCount(width: Int, height: Int) -> Int { (width + 7) / 8 * height }
