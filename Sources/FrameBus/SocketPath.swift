import SystemPackage

/// Where bus sockets live by default: `$XDG_RUNTIME_DIR/NAME.sock`, else `${TMPDIR:-/tmp}/framebus-UID/NAME.sock`.
///
/// `$XDG_RUNTIME_DIR` (normally `/run/user/UID`, mode 0700) belongs to the user alone, so no other local user can
/// bind a name there first and pose as the publisher, as anyone can in `/tmp` itself. Where no login session made
/// one (containers, CI, ssh, services), the fallback is a private directory `framebus-UID` in `$TMPDIR` (an absolute
/// path) or `/tmp`, created with mode 0700 and used only while it is a real directory (not a symbolic link) owned by
/// this user with no group or other permissions; otherwise the path is refused, never silently shared. Swift, the C
/// library (`fb_default_socket_path`), the GStreamer elements and the Python package follow this same rule, so
/// publishers and subscribers that agree on a name find each other without spelling out a path; `framebus publish`
/// and `framebus subscribe` use the name `framebus` unless told otherwise.
public enum SocketPath {
    /// The socket path for the stream called `name`: `$XDG_RUNTIME_DIR/NAME.sock`, or, when `XDG_RUNTIME_DIR` is
    /// unset or not an absolute path, `${TMPDIR:-/tmp}/framebus-UID/NAME.sock` (the directory is created, mode 0700,
    /// when missing).
    ///
    /// - Parameter name: the stream's name, e.g. `"camera"`: 1…64 characters, no `/`, not starting with `.`, no
    ///   control characters.
    /// - Throws: ``FrameBusError/Code-swift.struct/invalidArgument`` for a bad name;
    ///   ``FrameBusError/Code-swift.struct/permissionDenied`` when the fallback directory exists but is not a
    ///   directory of this user's with mode 0700 (a symbolic link, another owner, group or other permissions);
    ///   ``FrameBusError/Code-swift.struct/systemCall`` when it cannot be created or examined.
    public static func `default`(name: String = "framebus") throws(FrameBusError) -> String {
        try path(name: name, environment: currentEnvironment())
    }

    /// The directory ``default(name:)`` puts sockets in (the fallback directory is created when missing).
    public static func runtimeDirectory() throws(FrameBusError) -> String {
        try runtimeDirectory(environment: currentEnvironment(), userID: Syscall.userID())
    }

    /// The two variables the rule reads, from the live environment (`getenv`, so a C caller's `setenv` counts).
    static func currentEnvironment() -> [String: String] {
        var environment: [String: String] = [:]
        for name in ["XDG_RUNTIME_DIR", "TMPDIR"] { environment[name] = Syscall.environmentVariable(name) }
        return environment
    }

    static func path(
        name: String,
        environment: [String: String],
        userID: UInt32 = Syscall.userID()
    ) throws(FrameBusError) -> String {
        let operation = "SocketPath.default"
        guard (1...64).contains(name.utf8.count), !name.contains("/"), !name.hasPrefix("."),
            !name.unicodeScalars.contains(where: { $0.properties.generalCategory == .control })
        else {
            throw FrameBusError(.invalidArgument, operation, message: "stream name \(PeerText.escaped(name))")
        }
        return try runtimeDirectory(environment: environment, userID: userID) + "/" + name + ".sock"
    }

    /// `$XDG_RUNTIME_DIR`, or the private fallback directory, made and checked for the user `userID`.
    static func runtimeDirectory(environment: [String: String], userID: UInt32) throws(FrameBusError) -> String {
        if let runtime = environment["XDG_RUNTIME_DIR"], runtime.hasPrefix("/") {
            return withoutTrailingSlashes(runtime)
        }
        var parent = "/tmp"
        if let temporary = environment["TMPDIR"], temporary.hasPrefix("/") { parent = withoutTrailingSlashes(temporary) }
        let directory = parent + "/framebus-\(userID)"
        try makePrivateDirectory(directory, userID: userID)
        return directory
    }

    /// Creates `directory` with mode 0700 unless it exists, then insists that it is a directory (not a symbolic
    /// link) owned by `userID` with no group or other permissions: in a shared `/tmp` another user may have made
    /// it first, to receive our subscribers or to pose as our publishers.
    static func makePrivateDirectory(_ directory: String, userID: UInt32) throws(FrameBusError) {
        let operation = "SocketPath.default"
        switch Syscall.makeDirectory(directory, mode: 0o700) {
        case .success, .failure(.fileExists): break
        case .failure(let errno):
            throw FrameBusError(.systemCall, operation, errno: errno, message: "mkdir \(directory)")
        }
        let status: Syscall.PathStatus
        switch Syscall.pathStatus(directory) {
        case .success(let value): status = value
        case .failure(let errno):
            throw FrameBusError(.systemCall, operation, errno: errno, message: "lstat \(directory)")
        }
        let problem: String? =
            if status.isSymbolicLink || !status.isDirectory {
                "it is not a directory (a symbolic link or another file)"
            } else if status.ownerID != userID {
                "it belongs to uid \(status.ownerID), not to uid \(userID)"
            } else if status.permissions & 0o077 != 0 || status.permissions & 0o700 != 0o700 {
                "its mode is 0\(String(status.permissions, radix: 8)), not 0700"
            } else {
                nil
            }
        if let problem {
            throw FrameBusError(
                .permissionDenied,
                operation,
                message: "XDG_RUNTIME_DIR is unset and the fallback directory \(directory) is unsafe: \(problem); "
                    + "remove it, set XDG_RUNTIME_DIR, or give the socket path explicitly"
            )
        }
    }

    private static func withoutTrailingSlashes(_ path: String) -> String {
        var trimmed = Substring(path)
        while trimmed.count > 1, trimmed.hasSuffix("/") { trimmed = trimmed.dropLast() }
        return String(trimmed)
    }
}
