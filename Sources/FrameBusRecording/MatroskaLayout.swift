import FrameBus

/// The bytes FrameBus writes around frames: the header block, cluster headers, frame elements, the trailer.
/// docs/RECORDING.md describes the result.
enum MatroskaLayout {
    static let blockSize = 4096
    /// Matroska timestamps count milliseconds (TimestampScale 1 000 000 ns); exact times are in each frame's record.
    static let timestampScale: UInt64 = 1_000_000
    /// Bytes kept for the SeekHead at the start of the Segment (a Void until the recording is closed).
    static let seekHeadSpace = 160
    /// Bytes kept for Info's Duration (a Void of the same size until the recording is closed): id 2 + size 1 + 8.
    static let durationSpace = 11
    /// Where the Segment's size field starts: right after the EBML header and the Segment id.
    static var segmentSizeOffset: Int { ebmlHeader().count + 4 }
    /// Where the Segment's data starts (positions in the SeekHead and Cues count from here).
    static var segmentDataOffset: Int { segmentSizeOffset + 8 }

    /// What the header block says once the recording is closed.
    struct Closing {
        var durationMilliseconds: Double
        var cuesPosition: UInt64
        var tagsPosition: UInt64
    }

    static func ebmlHeader() -> [UInt8] {
        var writer = EBMLWriter()
        writer.master(EBML.header) { header in
            header.unsigned(EBML.version, 1)
            header.unsigned(EBML.readVersion, 1)
            header.unsigned(EBML.maxIDLength, 4)
            header.unsigned(EBML.maxSizeLength, 8)
            header.string(EBML.docType, "matroska")
            header.unsigned(EBML.docTypeVersion, 4)
            header.unsigned(EBML.docTypeReadVersion, 2)
        }
        return writer.bytes
    }

    /// The first 4096 bytes of a recording: EBML header, Segment start, SeekHead space, Info, Tracks, Void. Alone
    /// in its block, so closing the recording rewrites just this block.
    static func headerBlock(track: RecordingTrack, closing: Closing? = nil) -> [UInt8] {
        var writer = EBMLWriter()
        writer.bytes = ebmlHeader()
        writer.id(EBML.segment)
        // The Segment's size stays unknown even when closed: ffmpeg refuses clusters of unknown size inside a
        // Segment of known size, and the clusters must be of unknown size to be crash-safe.
        writer.size(EBML.unknownSize, length: 8)
        let segmentStart = writer.bytes.count

        var seekHead = EBMLWriter()
        var body = EBMLWriter()
        // Info and Tracks positions are fixed: right after the SeekHead space.
        let infoPosition = UInt64(seekHeadSpace)
        var info = EBMLWriter()
        info.master(EBML.info) { info in
            info.unsigned(EBML.timestampScale, timestampScale)
            info.string(EBML.muxingApp, "FrameBus")
            info.string(EBML.writingApp, "framebus record")
            if let closing {
                info.float(EBML.duration, closing.durationMilliseconds)
            } else {
                info.void(totalLength: durationSpace)
            }
        }
        body.bytes += info.bytes
        let tracksPosition = infoPosition + UInt64(info.bytes.count)
        body.master(EBML.tracks) { tracks in
            tracks.master(EBML.trackEntry) { entry in
                entry.unsigned(EBML.trackNumber, 1)
                entry.unsigned(EBML.trackUID, 1)
                entry.unsigned(EBML.trackType, 1)
                entry.unsigned(EBML.flagLacing, 0)
                if track.rawFourCC != nil {
                    entry.string(EBML.codecID, RecordingTrack.rawCodecID)
                } else {
                    entry.string(EBML.codecID, RecordingTrack.compressedCodecID)
                    entry.binary(EBML.codecPrivate, Array(track.pixelFormat.name.utf8))
                }
                entry.string(EBML.codecName, "FrameBus \(track.pixelFormat.name)")
                entry.master(EBML.video) { video in
                    video.unsigned(EBML.pixelWidth, UInt64(track.width))
                    video.unsigned(EBML.pixelHeight, UInt64(track.height))
                    if let fourCC = track.rawFourCC { video.binary(EBML.colourSpace, Array(fourCC.utf8)) }
                    video.master(EBML.colour) { colour in
                        colour.unsigned(EBML.range, track.pixelFormat.range == .video ? 1 : 2)
                    }
                }
            }
        }
        if let closing {
            seekHead.master(EBML.seekHead) { head in
                for (id, position) in [
                    (EBML.info, infoPosition), (EBML.tracks, tracksPosition), (EBML.cues, closing.cuesPosition),
                    (EBML.tags, closing.tagsPosition),
                ] {
                    head.master(EBML.seek) { seek in
                        var idBytes = EBMLWriter()
                        idBytes.id(id)
                        seek.binary(EBML.seekID, idBytes.bytes)
                        seek.unsigned(EBML.seekPosition, position)
                    }
                }
            }
        }
        seekHead.void(totalLength: seekHeadSpace - seekHead.bytes.count)
        writer.bytes += seekHead.bytes
        writer.bytes += body.bytes
        precondition(writer.bytes.count - segmentStart >= 0 && writer.bytes.count + 2 <= blockSize)
        writer.void(totalLength: blockSize - writer.bytes.count)
        return writer.bytes
    }

    /// A Cluster of unknown size and its Timestamp.
    static func clusterHeader(timestamp: UInt64) -> [UInt8] {
        var writer = EBMLWriter()
        writer.id(EBML.cluster)
        writer.size(EBML.unknownSize, length: 8)
        writer.unsigned(EBML.timestamp, timestamp)
        return writer.bytes
    }

    /// Everything of a frame's BlockGroup before its payload: the BlockGroup header, the BlockAdditions with the
    /// frame record, and the Block header (track 1, the timestamp relative to the cluster, no flags).
    static func framePrefix(record: FrameRecord, relativeTimestamp: Int16, payloadByteCount: Int) -> [UInt8] {
        var additions = EBMLWriter()
        additions.master(EBML.blockAdditions) { additions in
            additions.master(EBML.blockMore) { more in
                more.unsigned(EBML.blockAddID, FrameRecord.blockAddID)
                more.binary(EBML.blockAdditional, record.encoded())
            }
        }
        let blockBody = 4 + payloadByteCount
        var writer = EBMLWriter()
        writer.id(EBML.blockGroup)
        writer.size(UInt64(additions.bytes.count + 1 + 8 + blockBody), length: 8)
        writer.bytes += additions.bytes
        writer.id(EBML.block)
        writer.size(UInt64(blockBody), length: 8)
        writer.bytes.append(0x81)
        let bits = UInt16(bitPattern: relativeTimestamp)
        writer.bytes += [UInt8(bits >> 8), UInt8(bits & 0xFF), 0x00]
        return writer.bytes
    }

    /// A Void that takes the stream from `position` to the next block boundary (or the one after, when only one
    /// byte is left: a Void is at least two). Empty when `position` is on a boundary.
    static func padding(from position: Int) -> [UInt8] {
        var gap = (blockSize - position % blockSize) % blockSize
        if gap == 0 { return [] }
        if gap == 1 { gap += blockSize }
        var writer = EBMLWriter()
        writer.void(totalLength: gap)
        return writer.bytes
    }

    /// The trailer written when the recording closes, starting at `position` (inside the Segment): Cues (one point
    /// per cluster), Tags (the format, the frame count and the drop log), then a Void to the block boundary.
    /// Returns the bytes and the Cues' and Tags' positions relative to the Segment's data.
    static func trailer(
        at position: Int,
        track: RecordingTrack,
        cues: [(timestamp: UInt64, position: UInt64)],
        frames: UInt64,
        drops: [RecordingDrop]
    ) -> (bytes: [UInt8], cuesPosition: UInt64, tagsPosition: UInt64) {
        var writer = EBMLWriter()
        let cuesPosition = UInt64(position - segmentDataOffset)
        writer.master(EBML.cues) { cuesElement in
            for cue in cues {
                cuesElement.master(EBML.cuePoint) { point in
                    point.unsigned(EBML.cueTime, cue.timestamp)
                    point.master(EBML.cueTrackPositions) { positions in
                        positions.unsigned(EBML.cueTrack, 1)
                        positions.unsigned(EBML.cueClusterPosition, cue.position)
                    }
                }
            }
        }
        let tagsPosition = cuesPosition + UInt64(writer.bytes.count)
        // The drop log as text, one record per line: "reason first last count". At most 4096 records (the recorder
        // merges beyond).
        let log = drops.map { "\($0.reason) \($0.sequences.lowerBound) \($0.sequences.upperBound) \($0.frameCount)" }
            .joined(separator: "\n")
        writer.master(EBML.tags) { tags in
            tags.master(EBML.tag) { tag in
                tag.master(EBML.targets) { _ in }
                for (name, value) in [
                    ("FRAMEBUS_FORMAT", track.pixelFormat.name), ("FRAMEBUS_FRAMES", "\(frames)"),
                    ("FRAMEBUS_DROPS", log),
                ] {
                    tag.master(EBML.simpleTag) { simple in
                        simple.string(EBML.tagName, name)
                        simple.string(EBML.tagString, value)
                    }
                }
            }
        }
        writer.bytes += padding(from: position + writer.bytes.count)
        return (writer.bytes, cuesPosition, tagsPosition)
    }
}
