/// The EBML element ids a recording uses (Matroska, RFC 9559), and how EBML writes ids, sizes and values.
enum EBML {
    // EBML header.
    static let header: UInt32 = 0x1A45_DFA3
    static let version: UInt32 = 0x4286
    static let readVersion: UInt32 = 0x42F7
    static let maxIDLength: UInt32 = 0x42F2
    static let maxSizeLength: UInt32 = 0x42F3
    static let docType: UInt32 = 0x4282
    static let docTypeVersion: UInt32 = 0x4287
    static let docTypeReadVersion: UInt32 = 0x4285
    // Global.
    static let void: UInt32 = 0xEC
    static let crc32: UInt32 = 0xBF
    // Segment and its children.
    static let segment: UInt32 = 0x1853_8067
    static let seekHead: UInt32 = 0x114D_9B74
    static let seek: UInt32 = 0x4DBB
    static let seekID: UInt32 = 0x53AB
    static let seekPosition: UInt32 = 0x53AC
    static let info: UInt32 = 0x1549_A966
    static let timestampScale: UInt32 = 0x2AD7B1
    static let duration: UInt32 = 0x4489
    static let muxingApp: UInt32 = 0x4D80
    static let writingApp: UInt32 = 0x5741
    static let tracks: UInt32 = 0x1654_AE6B
    static let trackEntry: UInt32 = 0xAE
    static let trackNumber: UInt32 = 0xD7
    static let trackUID: UInt32 = 0x73C5
    static let trackType: UInt32 = 0x83
    static let flagLacing: UInt32 = 0x9C
    static let codecID: UInt32 = 0x86
    static let codecPrivate: UInt32 = 0x63A2
    static let codecName: UInt32 = 0x25_8688
    static let video: UInt32 = 0xE0
    static let pixelWidth: UInt32 = 0xB0
    static let pixelHeight: UInt32 = 0xBA
    static let colourSpace: UInt32 = 0x2E_B524
    static let colour: UInt32 = 0x55B0
    static let range: UInt32 = 0x55B9
    static let cluster: UInt32 = 0x1F43_B675
    static let timestamp: UInt32 = 0xE7
    static let simpleBlock: UInt32 = 0xA3
    static let blockGroup: UInt32 = 0xA0
    static let block: UInt32 = 0xA1
    static let blockAdditions: UInt32 = 0x75A1
    static let blockMore: UInt32 = 0xA6
    static let blockAddID: UInt32 = 0xEE
    static let blockAdditional: UInt32 = 0xA5
    static let cues: UInt32 = 0x1C53_BB6B
    static let cuePoint: UInt32 = 0xBB
    static let cueTime: UInt32 = 0xB3
    static let cueTrackPositions: UInt32 = 0xB7
    static let cueTrack: UInt32 = 0xF7
    static let cueClusterPosition: UInt32 = 0xF1
    static let tags: UInt32 = 0x1254_C367
    static let tag: UInt32 = 0x7373
    static let targets: UInt32 = 0x63C0
    static let simpleTag: UInt32 = 0x67C8
    static let tagName: UInt32 = 0x45A3
    static let tagString: UInt32 = 0x4487

    /// The size field of an element of unknown size, 8 bytes long (all value bits set).
    static let unknownSize: UInt64 = 0x00FF_FFFF_FFFF_FFFF

    /// How many bytes an element id takes (ids keep their marker bit, so their length is their byte count).
    static func idLength(_ id: UInt32) -> Int {
        id > 0xFF_FFFF ? 4 : id > 0xFFFF ? 3 : id > 0xFF ? 2 : 1
    }

    /// The shortest size field that holds `size` (a value with every bit set is reserved for "unknown").
    static func sizeLength(_ size: UInt64) -> Int {
        var length = 1
        while length < 8, size >= (UInt64(1) << (7 * UInt64(length))) - 1 { length += 1 }
        return length
    }
}

/// Builds EBML into a byte array: ids, sizes, and elements whose size is known when they are written.
struct EBMLWriter {
    var bytes: [UInt8] = []

    mutating func id(_ id: UInt32) {
        let length = EBML.idLength(id)
        for index in stride(from: length - 1, through: 0, by: -1) {
            bytes.append(UInt8(truncatingIfNeeded: id >> (8 * UInt32(index))))
        }
    }

    /// A size field of `length` bytes (1…8); `EBML.unknownSize` with length 8 for "unknown".
    mutating func size(_ size: UInt64, length: Int) {
        precondition(
            (1...8).contains(length) && (size == EBML.unknownSize || size < (UInt64(1) << (7 * UInt64(length))) - 1)
        )
        let marked = size | (UInt64(1) << (7 * UInt64(length)))
        for index in stride(from: length - 1, through: 0, by: -1) {
            bytes.append(UInt8(truncatingIfNeeded: marked >> (8 * UInt64(index))))
        }
    }

    mutating func size(_ size: UInt64) { self.size(size, length: EBML.sizeLength(size)) }

    /// A master element whose children `body` writes (the size is computed after).
    mutating func master(_ id: UInt32, _ body: (inout EBMLWriter) -> Void) {
        var child = EBMLWriter()
        body(&child)
        self.id(id)
        size(UInt64(child.bytes.count))
        bytes += child.bytes
    }

    mutating func unsigned(_ id: UInt32, _ value: UInt64) {
        var length = 1
        while length < 8, value >> (8 * UInt64(length)) != 0 { length += 1 }
        self.id(id)
        size(UInt64(length))
        for index in stride(from: length - 1, through: 0, by: -1) {
            bytes.append(UInt8(truncatingIfNeeded: value >> (8 * UInt64(index))))
        }
    }

    mutating func float(_ id: UInt32, _ value: Double) {
        self.id(id)
        size(8)
        let bits = value.bitPattern
        for index in stride(from: 7, through: 0, by: -1) {
            bytes.append(UInt8(truncatingIfNeeded: bits >> (8 * UInt64(index))))
        }
    }

    mutating func string(_ id: UInt32, _ value: String) { binary(id, Array(value.utf8)) }

    mutating func binary(_ id: UInt32, _ value: [UInt8]) {
        self.id(id)
        size(UInt64(value.count))
        bytes += value
    }

    /// A Void element of exactly `totalLength` bytes (at least 2: its id and a one-byte size), which readers skip.
    mutating func void(totalLength: Int) {
        precondition(totalLength >= 2)
        // One id byte; the size field grows to 8 bytes for long paddings, and what is left is the payload.
        let sizeLength = totalLength - 1 > 127 ? 8 : 1
        id(EBML.void)
        size(UInt64(totalLength - 1 - sizeLength), length: sizeLength)
        bytes += repeatElement(0, count: totalLength - 1 - sizeLength)
    }
}
