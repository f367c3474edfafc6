import Foundation

/// Where bus sockets live by default: `$XDG_RUNTIME_DIR/framebus/`.
///
/// `$XDG_RUNTIME_DIR` (normally `/run/user/UID`) belongs to the user alone (mode 0700), so no other local user can
/// bind a name there first and pose as the publisher, as anyone can in `/tmp`. Publishers and subscribers that
/// agree on a name find each other without spelling out a path.
public enum SocketPath {
    /// The socket path for the stream called `name`: `$XDG_RUNTIME_DIR/framebus/NAME.sock`, creating the
    /// `framebus` directory (mode 0700) when `createDirectory` is set, as a publisher needs.
    ///
    /// - Parameters:
    ///   - name: the stream's name, e.g. `"camera"`: 1…64 characters, no `/`, not starting with `.`.
    ///   - createDirectory: create `$XDG_RUNTIME_DIR/framebus` if it is missing.
    /// - Throws: ``FrameBusError/Code-swift.struct/invalidArgument`` for a bad name or when `XDG_RUNTIME_DIR` is
    ///   unset or not an absolute path; ``FrameBusError/Code-swift.struct/systemCall`` if the directory cannot be
    ///   made.
    public static func `default`(name: String, createDirectory: Bool = false) throws(FrameBusError) -> String {
        try path(name: name, environment: ProcessInfo.processInfo.environment, createDirectory: createDirectory)
    }

    static func path(
        name: String,
        environment: [String: String],
        createDirectory: Bool
    ) throws(FrameBusError) -> String {
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
        let directory = (runtime.hasSuffix("/") ? String(runtime.dropLast()) : runtime) + "/framebus"
        if createDirectory {
            do {
                try FileManager.default.createDirectory(
                    atPath: directory,
                    withIntermediateDirectories: false,
                    attributes: [.posixPermissions: 0o700]
                )
            } catch {
                // Already there is fine, if it is a directory.
                let type = (try? FileManager.default.attributesOfItem(atPath: directory))?[.type] as? FileAttributeType
                guard type == .typeDirectory else {
                    throw FrameBusError(.systemCall, operation, message: "cannot create \(directory): \(error)")
                }
            }
        }
        return directory + "/" + name + ".sock"
    }
}
