import Foundation
import Testing

@testable import FrameBus

/// `SocketPath`'s fallback when `XDG_RUNTIME_DIR` is unset: a private directory `${TMPDIR:-/tmp}/framebus-UID`,
/// created with mode 0700 and refused when it is not a directory of the user's alone. Each test works in a scratch
/// directory given as `TMPDIR`; the real `/tmp` is used only by the test of the `/tmp` default.
@Suite(.timeLimit(.minutes(5))) struct SocketPathFallbackTests {
    /// A scratch directory standing for `/tmp`, removed at the end.
    final class ScratchParent {
        let path: String
        init() throws {
            path = FileManager.default.temporaryDirectory.appendingPathComponent(
                "fbrt-\(UUID().uuidString.prefix(8))"
            ).path
            try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: false)
        }
        deinit { try? FileManager.default.removeItem(atPath: path) }

        func attributes(_ name: String) throws -> [FileAttributeKey: Any] {
            try FileManager.default.attributesOfItem(atPath: path + "/" + name)
        }
    }

    static let userID = getuid()

    @Test(arguments: [[:], ["XDG_RUNTIME_DIR": ""], ["XDG_RUNTIME_DIR": "relative/dir"]])
    func withoutARuntimeDirectoryThePathIsInAPrivateDirectoryMadeWithMode0700(_ base: [String: String]) throws {
        let scratch = try ScratchParent()
        var environment = base
        environment["TMPDIR"] = scratch.path + "/"
        let path = try SocketPath.path(name: "camera", environment: environment)
        #expect(path == "\(scratch.path)/framebus-\(Self.userID)/camera.sock")
        let attributes = try scratch.attributes("framebus-\(Self.userID)")
        #expect(attributes[.type] as? FileAttributeType == .typeDirectory)
        #expect((attributes[.posixPermissions] as? Int) == 0o700)
        #expect((attributes[.ownerAccountID] as? Int).map(UInt32.init) == Self.userID)
        // A second call (the subscriber after the publisher) accepts the directory the first one made.
        #expect(try SocketPath.path(name: "camera", environment: environment) == path)
    }

    @Test func theRuntimeDirectoryWinsOverTheFallback() throws {
        let scratch = try ScratchParent()
        let environment = ["XDG_RUNTIME_DIR": "/run/user/1000/", "TMPDIR": scratch.path]
        #expect(try SocketPath.path(name: "camera", environment: environment) == "/run/user/1000/camera.sock")
        #expect(!FileManager.default.fileExists(atPath: scratch.path + "/framebus-\(Self.userID)"))
    }

    @Test func withoutTMPDIRTheFallbackIsInSlashTmp() throws {
        let path = try SocketPath.path(name: "camera", environment: [:])
        #expect(path == "/tmp/framebus-\(Self.userID)/camera.sock")
        let attributes = try FileManager.default.attributesOfItem(atPath: "/tmp/framebus-\(Self.userID)")
        #expect((attributes[.posixPermissions] as? Int) == 0o700)
    }

    @Test(arguments: [0o755, 0o750, 0o701, 0o1777, 0o500])
    func aFallbackDirectoryWithAnotherModeIsRefused(mode: Int) throws {
        let scratch = try ScratchParent()
        let directory = scratch.path + "/framebus-\(Self.userID)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: false)
        try FileManager.default.setAttributes([.posixPermissions: mode], ofItemAtPath: directory)
        let error = #expect(throws: FrameBusError.self) {
            _ = try SocketPath.path(name: "camera", environment: ["TMPDIR": scratch.path])
        }
        #expect(error?.code == .permissionDenied)
        #expect(error?.message?.contains("mode") == true, "\(String(describing: error))")
        try FileManager.default.setAttributes([.posixPermissions: 0o700], ofItemAtPath: directory)
    }

    @Test func aFallbackDirectoryOfAnotherUserIsRefused() throws {
        // Made by us under the name of uid OTHER: seen by OTHER it belongs to another user, with no root to chown.
        let scratch = try ScratchParent()
        let other = Self.userID &+ 1
        let directory = scratch.path + "/framebus-\(other)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: false)
        try FileManager.default.setAttributes([.posixPermissions: 0o700], ofItemAtPath: directory)
        let error = #expect(throws: FrameBusError.self) {
            _ = try SocketPath.path(name: "camera", environment: ["TMPDIR": scratch.path], userID: other)
        }
        #expect(error?.code == .permissionDenied)
        #expect(error?.message?.contains("belongs to uid \(Self.userID)") == true, "\(String(describing: error))")
        if Self.userID == 0 {
            // As root, also a real foreign owner: our own framebus-0 given to nobody.
            let own = scratch.path + "/framebus-0"
            try FileManager.default.createDirectory(atPath: own, withIntermediateDirectories: false)
            try FileManager.default.setAttributes([.posixPermissions: 0o700], ofItemAtPath: own)
            #expect(chown(own, 65534, 65534) == 0)
            #expect(throws: FrameBusError.self) {
                _ = try SocketPath.path(name: "camera", environment: ["TMPDIR": scratch.path])
            }
        }
    }

    @Test func aSymbolicLinkInPlaceOfTheFallbackDirectoryIsRefused() throws {
        let scratch = try ScratchParent()
        let target = scratch.path + "/elsewhere"
        try FileManager.default.createDirectory(atPath: target, withIntermediateDirectories: false)
        try FileManager.default.setAttributes([.posixPermissions: 0o700], ofItemAtPath: target)
        try FileManager.default.createSymbolicLink(
            atPath: scratch.path + "/framebus-\(Self.userID)",
            withDestinationPath: target
        )
        let error = #expect(throws: FrameBusError.self) {
            _ = try SocketPath.path(name: "camera", environment: ["TMPDIR": scratch.path])
        }
        #expect(error?.code == .permissionDenied)
    }

    @Test func aRelativeTMPDIRIsIgnored() throws {
        let path = try SocketPath.path(name: "x", environment: ["TMPDIR": "relative"])
        #expect(path == "/tmp/framebus-\(Self.userID)/x.sock")
    }
}
