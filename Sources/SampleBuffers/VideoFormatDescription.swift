import PixelBuffers

/// What the images of a video stream look like: dimensions, pixel format and colour extensions
/// (`CMVideoFormatDescription`).
///
/// Two sample buffers with equal descriptions can be handled alike (same pool, same converter); a change of
/// description is a format change. The extensions reuse the value types of ``PixelBufferAttachments`` so a
/// description made from a pixel buffer carries exactly that buffer's colour attachments.
///
/// ```swift
/// let buffer = try PixelBuffer(width: 1920, height: 1080, pixelFormat: .yuv420BiPlanarVideoRange8,
///                              attachments: .bt709)
/// let description = VideoFormatDescription(imageBuffer: buffer)
/// description.dimensions           // 1920×1080
/// description.extensions.yCbCrMatrix  // .itu709
/// description.matches(buffer)      // true
/// ```
public struct VideoFormatDescription: Hashable, Sendable, CustomStringConvertible {
    /// Width and height in pixels (`CMVideoDimensions`).
    public struct Dimensions: Hashable, Sendable, CustomStringConvertible {
        /// Width in pixels.
        public var width: Int
        /// Height in pixels.
        public var height: Int

        public init(width: Int, height: Int) {
            self.width = width
            self.height = height
        }

        /// `"1920x1080"`.
        public var description: String { "\(width)x\(height)" }
    }

    /// The format description extensions that correspond to image buffer attachments
    /// (`kCMFormatDescriptionExtension_ColorPrimaries` and so on); `nil` means not specified.
    public struct Extensions: Hashable, Sendable {
        /// Colour primaries.
        public var colorPrimaries: ColorPrimaries?
        /// Transfer function.
        public var transferFunction: TransferFunction?
        /// Y'CbCr matrix.
        public var yCbCrMatrix: YCbCrMatrix?
        /// Chroma location of the top (or only) field.
        public var chromaLocationTopField: ChromaLocation?
        /// Chroma location of the bottom field.
        public var chromaLocationBottomField: ChromaLocation?
        /// The part of the image meant to be shown.
        public var cleanAperture: CleanAperture?
        /// The pixel aspect ratio.
        public var pixelAspectRatio: PixelAspectRatio?

        /// Creates extensions; every one defaults to unspecified.
        public init(
            colorPrimaries: ColorPrimaries? = nil,
            transferFunction: TransferFunction? = nil,
            yCbCrMatrix: YCbCrMatrix? = nil,
            chromaLocationTopField: ChromaLocation? = nil,
            chromaLocationBottomField: ChromaLocation? = nil,
            cleanAperture: CleanAperture? = nil,
            pixelAspectRatio: PixelAspectRatio? = nil
        ) {
            self.colorPrimaries = colorPrimaries
            self.transferFunction = transferFunction
            self.yCbCrMatrix = yCbCrMatrix
            self.chromaLocationTopField = chromaLocationTopField
            self.chromaLocationBottomField = chromaLocationBottomField
            self.cleanAperture = cleanAperture
            self.pixelAspectRatio = pixelAspectRatio
        }

        /// The extensions found in pixel buffer attachments (custom keys are not extensions and are ignored).
        public init(attachments: PixelBufferAttachments) {
            self.init(
                colorPrimaries: attachments.colorPrimaries,
                transferFunction: attachments.transferFunction,
                yCbCrMatrix: attachments.yCbCrMatrix,
                chromaLocationTopField: attachments.chromaLocationTopField,
                chromaLocationBottomField: attachments.chromaLocationBottomField,
                cleanAperture: attachments.cleanAperture,
                pixelAspectRatio: attachments.pixelAspectRatio
            )
        }

        /// The same values as pixel buffer attachments, all ``AttachmentMode/shouldPropagate``, for stamping onto
        /// a buffer (`CVBufferSetAttachments` from a format description's extensions).
        public var attachments: PixelBufferAttachments {
            var attachments = PixelBufferAttachments()
            attachments.colorPrimaries = colorPrimaries
            attachments.transferFunction = transferFunction
            attachments.yCbCrMatrix = yCbCrMatrix
            attachments.chromaLocationTopField = chromaLocationTopField
            attachments.chromaLocationBottomField = chromaLocationBottomField
            attachments.cleanAperture = cleanAperture
            attachments.pixelAspectRatio = pixelAspectRatio
            return attachments
        }
    }

    /// Width and height in pixels.
    public var dimensions: Dimensions
    /// The pixel format (`CMFormatDescriptionGetMediaSubType`).
    public var pixelFormat: PixelFormat
    /// The colour and geometry extensions.
    public var extensions: Extensions

    /// Creates a description (`CMVideoFormatDescriptionCreate`).
    public init(pixelFormat: PixelFormat, dimensions: Dimensions, extensions: Extensions = Extensions()) {
        self.pixelFormat = pixelFormat
        self.dimensions = dimensions
        self.extensions = extensions
    }

    /// Creates the description of a pixel buffer: its size, format and the attachments that are extensions
    /// (`CMVideoFormatDescriptionCreateForImageBuffer`).
    public init(imageBuffer: PixelBuffer) {
        self.init(
            pixelFormat: imageBuffer.pixelFormat,
            dimensions: Dimensions(width: imageBuffer.width, height: imageBuffer.height),
            extensions: Extensions(attachments: imageBuffer.attachments)
        )
    }

    /// Whether the pixel buffer has this description's dimensions, pixel format and extensions
    /// (`CMVideoFormatDescriptionMatchesImageBuffer`).
    ///
    /// An extension set in one and unspecified in the other is a mismatch; custom attachments do not count.
    public func matches(_ pixelBuffer: PixelBuffer) -> Bool {
        self == VideoFormatDescription(imageBuffer: pixelBuffer)
    }

    /// Whether the quantisation range is full (`kCMFormatDescriptionExtension_FullRangeVideo`); a property of the
    /// pixel format, as in CoreVideo.
    public var isFullRange: Bool { pixelFormat.range == .full }

    /// `"420v 1920x1080"`.
    public var description: String { "\(pixelFormat) \(dimensions)" }
}
