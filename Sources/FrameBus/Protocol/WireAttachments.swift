import PixelBuffers

/// The four attachment bytes of a FRAME (docs/PROTOCOL.md §5.6). The tables are part of the protocol: never
/// reorder them, only append.
enum WireAttachments {
    static let primaries: [ColorPrimaries] = [.itu709, .ebu3213, .smpteC, .itu2020, .p3D65]
    static let transfers: [TransferFunction] = [.itu709, .smpte240M, .sRGB, .linear, .pq, .hlg]
    static let matrices: [YCbCrMatrix] = [.itu709, .itu601, .smpte240M, .itu2020]
    static let chromaLocations: [ChromaLocation] = [.left, .center, .topLeft, .top, .bottomLeft, .bottom, .dv420]

    private static func code<T: Equatable>(_ value: T?, in table: [T]) -> UInt8 {
        guard let value, let index = table.firstIndex(of: value) else { return 0 }
        return UInt8(index + 1)
    }

    private static func value<T>(_ code: UInt8, in table: [T]) -> T? {
        guard code >= 1, Int(code) <= table.count else { return nil }
        return table[Int(code) - 1]
    }

    static func encode(_ attachments: PixelBufferAttachments) -> WireAttachmentCodes {
        WireAttachmentCodes(
            (
                code(attachments.colorPrimaries, in: primaries), code(attachments.transferFunction, in: transfers),
                code(attachments.yCbCrMatrix, in: matrices),
                code(attachments.chromaLocationTopField, in: chromaLocations)
            )
        )
    }

    static func decode(_ codes: WireAttachmentCodes) -> PixelBufferAttachments {
        var attachments = PixelBufferAttachments()
        attachments.colorPrimaries = value(codes.colorPrimaries, in: primaries)
        attachments.transferFunction = value(codes.transferFunction, in: transfers)
        attachments.yCbCrMatrix = value(codes.yCbCrMatrix, in: matrices)
        attachments.chromaLocationTopField = value(codes.chromaLocation, in: chromaLocations)
        return attachments
    }
}
