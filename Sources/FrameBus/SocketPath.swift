import Foundation

/// Where bus sockets live by default: `$XDG_RUNTIME_DIR/NAME.sock`.
///
/// `$XDG_RUNTIME_DIR` (normally `/run/user/UID`, mode 0700) belongs to the user alone, so no other local user can
/// bind a name there first and pose as the publisher, as anyone can in `/tmp`. Publishers and subscribers that agree
/// on a name find each other without spelling out a path; `framebus publish` and `framebus subscribe` use the name
/// `framebus` unless told otherwise.
public enum SocketPath {
    /// The socket path for the stream called `name`: `$XDG_RUNTIME_DIR/NAME.sock`.
    ///
    /// - Parameter name: the stream's name, e.g. `"camera"`: 1…64 characters, no `/`, not starting with `.`, no
    ///   control characters.
    /// - Throws: ``FrameBusError/Code-swift.struct/invalidArgument`` for a bad name, or when `XDG_RUNTIME_DIR` is
    ///   unset or not an absolute path (then give the path explicitly).
    public static func `default`(name: String = "framebus") throws(FrameBusError) -> String {
        try path(name: name, environment: ProcessInfo.processInfo.environment)
    }

    static func path(name: String, environment: [String: String]) throws(FrameBusError) -> String {
        let operation = "SocketPath.default"
        guard (1...64).contains(name.utf8.count), !name.contains("/"), !name.hasPrefix("."),
            !name.unicodeScalars.contains(where: { $0.properties.generalCategory == .control })
        else {
            throw FrameBusError(.invalidArgument, operation, message: "stream name \(PeerText.escaped(name))")
        }
        guard let runtime = environment["XDG_RUNTIME_DIR"], runtime.hasPrefix("/") else {
            throw FrameBusError(
                .invalidArgument,
                operation,
                message: "XDG_RUNTIME_DIR is not set to an absolute path; give the socket path explicitly"
            )
        }
        return (runtime.hasSuffix("/") ? String(runtime.dropLast()) : runtime) + "/" + name + ".sock"
    }
}
