import Foundation

/// A local process's name, as `ps` shows it: `/proc/PID/comm`.
///
/// The pid comes from a publisher's monitor report, so it may name any process (or none): the name is read with a
/// bounded read, cut at the first line, escaped and shortened; it is only ever shown as text.
enum ProcessName {
    /// The longest name shown (the kernel keeps 15 bytes in `comm`).
    static let maximumLength = 15

    static func of(_ processID: Int32) -> String {
        guard processID > 0, let file = FileHandle(forReadingAtPath: "/proc/\(processID)/comm") else { return "?" }
        defer { try? file.close() }
        guard let data = try? file.read(upToCount: 64), !data.isEmpty else { return "?" }
        let line = String(decoding: data.prefix { $0 != 0x0A }, as: UTF8.self)
        let shown = String(line.escapingControlCharacters.prefix(maximumLength))
        return shown.isEmpty ? "?" : shown
    }
}
