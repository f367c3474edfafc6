import FrameBus

/// The colour attachment codes of docs/PROTOCOL.md §5.7 (FRAME's four attachment bytes), which `fb_colorimetry`
/// uses too. The tables are the protocol's: index + 1 is the code, 0 is "not present".
enum ColorimetryCodes {
    static let primaries: [ColorPrimaries] = [.itu709, .ebu3213, .smpteC, .itu2020, .p3D65]
    static let transfers: [TransferFunction] = [.itu709, .smpte240M, .sRGB, .linear, .pq, .hlg]
    static let matrices: [YCbCrMatrix] = [.itu709, .itu601, .smpte240M, .itu2020]
    static let chromaLocations: [ChromaLocation] = [.left, .center, .topLeft, .top, .bottomLeft, .bottom, .dv420]

    /// The four codes of `attachments` (0 for absent or unknown values).
    static func codes(of attachments: PixelBufferAttachments) -> (UInt8, UInt8, UInt8, UInt8) {
        (
            code(attachments.colorPrimaries, in: primaries), code(attachments.transferFunction, in: transfers),
            code(attachments.yCbCrMatrix, in: matrices), code(attachments.chromaLocationTopField, in: chromaLocations)
        )
    }

    /// Sets the attachments the non-zero codes name on `attachments`; zero codes leave an attachment as it is.
    ///
    /// - Throws: ``ABIStatus/invalidArgument`` for a code past its table.
    static func apply(
        primaries primariesCode: UInt8,
        transfer transferCode: UInt8,
        matrix matrixCode: UInt8,
        chromaLocation chromaCode: UInt8,
        to attachments: inout PixelBufferAttachments
    ) throws(ABIError) {
        if primariesCode != 0 { attachments.colorPrimaries = try value(primariesCode, in: primaries, "primaries") }
        if transferCode != 0 { attachments.transferFunction = try value(transferCode, in: transfers, "transfer") }
        if matrixCode != 0 { attachments.yCbCrMatrix = try value(matrixCode, in: matrices, "matrix") }
        if chromaCode != 0 {
            attachments.chromaLocationTopField = try value(chromaCode, in: chromaLocations, "chroma_location")
        }
    }

    private static func code<T: Equatable>(_ value: T?, in table: [T]) -> UInt8 {
        guard let value, let index = table.firstIndex(of: value) else { return 0 }
        return UInt8(index + 1)
    }

    private static func value<T>(_ code: UInt8, in table: [T], _ field: String) throws(ABIError) -> T {
        guard Int(code) <= table.count else {
            throw ABIError(.invalidArgument, "fb_colorimetry.\(field): code \(code) is not in 0...\(table.count)")
        }
        return table[Int(code) - 1]
    }
}
