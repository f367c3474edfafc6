import ArgumentParser
import Foundation
import FrameBusRecording

/// `framebus export`: turn a recording into raw Matroska that ffmpeg and GStreamer open.
struct ExportCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "export",
        abstract: "Write a recording as raw Matroska (compressed frames decoded, bit-exact) for ffmpeg and GStreamer.",
        discussion: """
            Each frame keeps its sequence number, timing and drop records. A recording cut short exports up to its \
            last whole frame (said on stderr); a damaged one stops with an error (exit status 1).
            """
    )

    @Argument(help: "The recording.")
    var file: String

    @Option(help: "The raw recording to write (created or truncated).")
    var output: String

    func run() throws {
        let result = try RecordingExport.export(from: file, to: output)
        say("exported \(result.frames) frames to \(output)")
        if let truncation = result.truncation {
            FileHandle.standardError.write(Data((escapedForTerminal("framebus export: \(truncation)") + "\n").utf8))
        }
    }
}
