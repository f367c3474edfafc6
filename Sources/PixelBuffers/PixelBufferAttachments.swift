/// The name of a pixel buffer attachment (CoreVideo's `kCVImageBuffer…Key`); custom keys are any other string.
public struct AttachmentKey: Hashable, Sendable, RawRepresentable, ExpressibleByStringLiteral, CustomStringConvertible {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public init(stringLiteral value: String) { self.rawValue = value }
    public var description: String { rawValue }

    /// ``ColorPrimaries`` (`kCVImageBufferColorPrimariesKey`).
    public static let colorPrimaries: AttachmentKey = "ColorPrimaries"
    /// ``TransferFunction`` (`kCVImageBufferTransferFunctionKey`).
    public static let transferFunction: AttachmentKey = "TransferFunction"
    /// ``YCbCrMatrix`` (`kCVImageBufferYCbCrMatrixKey`).
    public static let yCbCrMatrix: AttachmentKey = "YCbCrMatrix"
    /// ``ChromaLocation`` of the top (or only) field (`kCVImageBufferChromaLocationTopFieldKey`).
    public static let chromaLocationTopField: AttachmentKey = "ChromaLocationTopField"
    /// ``ChromaLocation`` of the bottom field (`kCVImageBufferChromaLocationBottomFieldKey`).
    public static let chromaLocationBottomField: AttachmentKey = "ChromaLocationBottomField"
    /// ``CleanAperture`` (`kCVImageBufferCleanApertureKey`).
    public static let cleanAperture: AttachmentKey = "CleanAperture"
    /// ``PixelAspectRatio`` (`kCVImageBufferPixelAspectRatioKey`).
    public static let pixelAspectRatio: AttachmentKey = "PixelAspectRatio"
}

/// An attachment's value.
public enum AttachmentValue: Hashable, Sendable {
    case string(String)
    case integer(Int64)
    case double(Double)
    case bool(Bool)
    case bytes([UInt8])
    case cleanAperture(CleanAperture)
    case pixelAspectRatio(PixelAspectRatio)
}

/// Whether an attachment is copied to buffers derived from this one (`kCVAttachmentMode_ShouldPropagate`).
public enum AttachmentMode: Hashable, Sendable {
    /// Copied by ``PixelBufferAttachments/propagatable`` and ``PixelBuffer/propagateAttachments(to:)``.
    case shouldPropagate
    /// Stays with this buffer only.
    case shouldNotPropagate
}

/// Colour primaries (`kCVImageBufferColorPrimaries_…`).
public enum ColorPrimaries: String, Hashable, Sendable, CaseIterable {
    case itu709 = "ITU_R_709_2"
    case ebu3213 = "EBU_3213"
    case smpteC = "SMPTE_C"
    case itu2020 = "ITU_R_2020"
    case p3D65 = "P3_D65"
}

/// Transfer functions (`kCVImageBufferTransferFunction_…`).
public enum TransferFunction: String, Hashable, Sendable, CaseIterable {
    case itu709 = "ITU_R_709_2"
    case smpte240M = "SMPTE_240M_1995"
    case sRGB = "IEC_sRGB"
    case linear = "Linear"
    case pq = "SMPTE_ST_2084_PQ"
    case hlg = "ITU_R_2100_HLG"
}

/// Y'CbCr matrices (`kCVImageBufferYCbCrMatrix_…`).
public enum YCbCrMatrix: String, Hashable, Sendable, CaseIterable {
    case itu709 = "ITU_R_709_2"
    case itu601 = "ITU_R_601_4"
    case smpte240M = "SMPTE_240M_1995"
    case itu2020 = "ITU_R_2020"
}

/// Where chroma samples sit relative to luma (`kCVImageBufferChromaLocation_…`).
public enum ChromaLocation: String, Hashable, Sendable, CaseIterable {
    case left = "Left"
    case center = "Center"
    case topLeft = "TopLeft"
    case top = "Top"
    case bottomLeft = "BottomLeft"
    case bottom = "Bottom"
    case dv420 = "DV 4:2:0"
}

/// The clean aperture: the part of the image meant to be shown, centred with an offset (in pixels).
public struct CleanAperture: Hashable, Sendable {
    public var width: Double
    public var height: Double
    public var horizontalOffset: Double
    public var verticalOffset: Double
    public init(width: Double, height: Double, horizontalOffset: Double = 0, verticalOffset: Double = 0) {
        self.width = width
        self.height = height
        self.horizontalOffset = horizontalOffset
        self.verticalOffset = verticalOffset
    }
}

/// The pixel aspect ratio as horizontal:vertical spacing (1:1 is square pixels).
public struct PixelAspectRatio: Hashable, Sendable {
    public var horizontalSpacing: Int
    public var verticalSpacing: Int
    public init(horizontalSpacing: Int, verticalSpacing: Int) {
        self.horizontalSpacing = horizontalSpacing
        self.verticalSpacing = verticalSpacing
    }
}

/// The attachments of a pixel buffer: colour description, geometry hints and custom keys, each with a
/// propagation mode (CoreVideo's `CVBufferSetAttachment`).
///
/// ```swift
/// var attachments = PixelBufferAttachments()
/// attachments.colorPrimaries = .itu709
/// attachments.set("com.example.exposure", .double(0.01), mode: .shouldNotPropagate)
/// ```
public struct PixelBufferAttachments: Hashable, Sendable {
    private var entries: [AttachmentKey: Entry] = [:]

    private struct Entry: Hashable, Sendable {
        var value: AttachmentValue
        var mode: AttachmentMode
    }

    public init() {}

    /// The BT.709 description FrameBus's converter produces: primaries, transfer function and matrix 709,
    /// chroma sited at the centre (make_frames.py averages 2×2 blocks).
    public static var bt709: PixelBufferAttachments {
        var attachments = PixelBufferAttachments()
        attachments.colorPrimaries = .itu709
        attachments.transferFunction = .itu709
        attachments.yCbCrMatrix = .itu709
        attachments.chromaLocationTopField = .center
        return attachments
    }

    /// The value for `key`, or `nil`.
    public subscript(key: AttachmentKey) -> AttachmentValue? { entries[key]?.value }

    /// Sets (or with `nil`, removes) an attachment.
    public mutating func set(_ key: AttachmentKey, _ value: AttachmentValue?, mode: AttachmentMode = .shouldPropagate) {
        if let value { entries[key] = Entry(value: value, mode: mode) } else { entries[key] = nil }
    }

    /// Removes an attachment (`CVBufferRemoveAttachment`).
    public mutating func remove(_ key: AttachmentKey) { entries[key] = nil }

    /// Removes every attachment (`CVBufferRemoveAllAttachments`).
    public mutating func removeAll() { entries.removeAll() }

    /// The propagation mode of `key`, or `nil` if it is not set.
    public func mode(of key: AttachmentKey) -> AttachmentMode? { entries[key]?.mode }

    /// Every key that is set.
    public var keys: [AttachmentKey] { entries.keys.sorted { $0.rawValue < $1.rawValue } }

    /// Whether no attachment is set.
    public var isEmpty: Bool { entries.isEmpty }

    /// The attachments whose mode is ``AttachmentMode/shouldPropagate``.
    public var propagatable: PixelBufferAttachments {
        var result = PixelBufferAttachments()
        result.entries = entries.filter { $0.value.mode == .shouldPropagate }
        return result
    }

    /// Copies every attachment of `other` into this one, replacing equal keys.
    public mutating func merge(_ other: PixelBufferAttachments) {
        entries.merge(other.entries) { _, new in new }
    }

    // MARK: Typed accessors

    private func string(_ key: AttachmentKey) -> String? {
        if case .string(let text) = self[key] { return text }
        return nil
    }

    /// Colour primaries.
    public var colorPrimaries: ColorPrimaries? {
        get { string(.colorPrimaries).flatMap(ColorPrimaries.init(rawValue:)) }
        set { set(.colorPrimaries, newValue.map { .string($0.rawValue) }) }
    }
    /// Transfer function.
    public var transferFunction: TransferFunction? {
        get { string(.transferFunction).flatMap(TransferFunction.init(rawValue:)) }
        set { set(.transferFunction, newValue.map { .string($0.rawValue) }) }
    }
    /// Y'CbCr matrix.
    public var yCbCrMatrix: YCbCrMatrix? {
        get { string(.yCbCrMatrix).flatMap(YCbCrMatrix.init(rawValue:)) }
        set { set(.yCbCrMatrix, newValue.map { .string($0.rawValue) }) }
    }
    /// Chroma location of the top (or only) field.
    public var chromaLocationTopField: ChromaLocation? {
        get { string(.chromaLocationTopField).flatMap(ChromaLocation.init(rawValue:)) }
        set { set(.chromaLocationTopField, newValue.map { .string($0.rawValue) }) }
    }
    /// Chroma location of the bottom field.
    public var chromaLocationBottomField: ChromaLocation? {
        get { string(.chromaLocationBottomField).flatMap(ChromaLocation.init(rawValue:)) }
        set { set(.chromaLocationBottomField, newValue.map { .string($0.rawValue) }) }
    }
    /// Clean aperture.
    public var cleanAperture: CleanAperture? {
        get { if case .cleanAperture(let value) = self[.cleanAperture] { value } else { nil } }
        set { set(.cleanAperture, newValue.map { .cleanAperture($0) }) }
    }
    /// Pixel aspect ratio.
    public var pixelAspectRatio: PixelAspectRatio? {
        get { if case .pixelAspectRatio(let value) = self[.pixelAspectRatio] { value } else { nil } }
        set { set(.pixelAspectRatio, newValue.map { .pixelAspectRatio($0) }) }
    }
}
