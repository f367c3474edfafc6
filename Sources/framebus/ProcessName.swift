import Foundation

/// A local process's name, as `ps` shows it: `/proc/PID/comm`, and for an interpreter the script it runs (or for the
/// `framebus` command its subcommand), from `/proc/PID/cmdline`: `python3 luma.py`, `framebus subscribe`.
///
/// The pid comes from a publisher's monitor report, so it may name any process (or none): each file is read with a
/// bounded read, and the name is cut, escaped and shortened; it is only ever shown as text.
enum ProcessName {
    /// The longest name shown (the kernel keeps 15 bytes in `comm`).
    static let maximumLength = 15
    /// The longest script or subcommand shown after it.
    static let maximumDetailLength = 24

    /// Interpreters whose own name says little: the script they run says which client it is.
    static let interpreters = ["python", "perl", "ruby", "node", "bash", "sh", "dash", "java", "lua"]

    static func of(_ processID: Int32) -> String {
        guard processID > 0, let comm = read("/proc/\(processID)/comm", limit: 64) else { return "?" }
        let line = String(decoding: comm.prefix { $0 != 0x0A }, as: UTF8.self)
        let shown = String(line.escapingControlCharacters.prefix(maximumLength))
        guard !shown.isEmpty else { return "?" }
        guard let arguments = read("/proc/\(processID)/cmdline", limit: 4096) else { return shown }
        let words = arguments.split(separator: 0, omittingEmptySubsequences: true).map {
            String(decoding: $0, as: UTF8.self)
        }
        guard let detail = detail(name: line, arguments: words) else { return shown }
        return shown + " " + String(detail.escapingControlCharacters.prefix(maximumDetailLength))
    }

    /// What to show after the name: an interpreter's script (`-m module` gives the module), or `framebus`'s
    /// subcommand; nil for anything else.
    static func detail(name: String, arguments: [String]) -> String? {
        let isInterpreter = interpreters.contains { name == $0 || (name.hasPrefix($0) && name.dropFirst($0.count).allSatisfy { $0.isNumber || $0 == "." }) }
        if isInterpreter {
            var index = 1
            while index < arguments.count {
                let argument = arguments[index]
                if argument == "-m" || argument == "-c" {
                    return index + 1 < arguments.count && argument == "-m" ? arguments[index + 1] : nil
                }
                if !argument.hasPrefix("-") { return (argument as NSString).lastPathComponent }
                index += 1
            }
            return nil
        }
        if name == "framebus", arguments.count > 1, !arguments[1].hasPrefix("-") { return arguments[1] }
        return nil
    }

    private static func read(_ path: String, limit: Int) -> Data? {
        guard let file = FileHandle(forReadingAtPath: path) else { return nil }
        defer { try? file.close() }
        guard let data = try? file.read(upToCount: limit), !data.isEmpty else { return nil }
        return data
    }
}
