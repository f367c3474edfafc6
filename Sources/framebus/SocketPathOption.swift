import ArgumentParser
import FrameBus

/// The socket a publishing command (`publish`, `capture`) listens on: `--path`, else the default path for `--name`.
enum SocketPathOption {
    /// `path` if given, else ``SocketPath/default(name:)`` for `name`. A path directly in `/` is refused: it is what
    /// `--path "$XDG_RUNTIME_DIR/camera.sock"` becomes when that variable is unset, and a socket there is not in a
    /// directory of the user's own (use `--name camera`, which falls back to a private directory).
    static func resolve(path: String?, name: String) throws -> String {
        guard let path else { return try SocketPath.default(name: name) }
        let trimmed = path.drop { $0 == "/" }
        if path.hasPrefix("/") && !trimmed.isEmpty && !trimmed.contains("/") {
            throw ValidationError(
                "refusing to listen on \(path), a socket directly in /: is XDG_RUNTIME_DIR unset? "
                    + "Use --name \(trimmed.hasSuffix(".sock") ? String(trimmed.dropLast(5)) : String(trimmed)) "
                    + "(a private directory of the user) or a --path in a directory of your own"
            )
        }
        return path
    }
}
