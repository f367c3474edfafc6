import Foundation
import SystemPackage
import Testing
import TestSupport

@testable import FrameBus

func temporarySocketPath(_ tag: String = "t") -> String {
    "/tmp/fbt-\(tag)-\(UUID().uuidString.prefix(12)).sock"
}

@Suite(.timeLimit(.minutes(5))) struct SocketTests {
    @Test func listenerCreatesSocketFileWithOwnerOnlyMode() throws {
        let path = temporarySocketPath()
        defer { unlink(path) }
        let listener = try Socket.listen(path: path, mode: 0o600).get()
        var information = stat()
        #expect(stat(path, &information) == 0)
        #expect(information.st_mode & 0o777 == 0o600)
        #expect(information.st_mode & S_IFMT == S_IFSOCK)
        _ = listener
    }

    /// A dead publisher's file: a socket inode nobody listens on. It is made by a socket that was bound and closed
    /// without ever listening, not by a closed listener: a child another test spawns at the same moment holds a copy
    /// of every descriptor until its exec closes them, and a listener held that way is live to `connect` (this test
    /// failed so once in CI beside the hostile-peer tests).
    @Test func staleSocketFileIsReplaced() throws {
        let path = temporarySocketPath()
        defer { unlink(path) }
        do {
            let dead = Socket(adopting: try Syscall.unixSocket().get())
            try Syscall.bind(dead.descriptor, path: path).get()
        }  // closed without unlinking
        #expect(FileManager.default.fileExists(atPath: path))
        let second = try Socket.listen(path: path, mode: 0o600).get()
        let client = try Socket.connect(path: path, timeoutNanoseconds: 1_000_000_000).get()
        _ = (second, client)
    }

    @Test func liveListenerIsAnError() throws {
        let path = temporarySocketPath()
        defer { unlink(path) }
        let live = try Socket.listen(path: path, mode: 0o600).get()
        let result = Socket.listen(path: path, mode: 0o600)
        guard case .failure(let error) = result else {
            Issue.record("second listener succeeded")
            return
        }
        #expect(error.code == .addressInUse)
        _ = live
    }

    /// The socket is bound under a private name and linked to its path only once it listens: nothing else is left
    /// in the directory, and a client that saw the file connects at once. A file name too short for a private
    /// name of its length is bound directly.
    @Test(arguments: ["publisher.sock", "p"])
    func thePathAppearsOnlyOnceTheSocketListens(name: String) throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("fbsock-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: false)
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent(name).path
        let listener = try Socket.listen(path: path, mode: 0o640).get()
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path) == [name])
        var information = stat()
        #expect(lstat(path, &information) == 0)
        #expect(information.st_mode & 0o777 == 0o640)
        #expect(information.st_nlink == 1)
        let client = try Socket.connect(path: path, timeoutNanoseconds: 1_000_000_000).get()
        _ = try listener.waitReadable(timeoutMilliseconds: 2000).get()
        #expect(try listener.accept().get() != nil)
        _ = client
    }

    /// A live publisher's file is never replaced, by either way of binding, and it keeps accepting.
    @Test(arguments: ["publisher.sock", "p"])
    func aLiveListenerKeepsItsPath(name: String) throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("fbsock-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: false)
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent(name).path
        let live = try Socket.listen(path: path, mode: 0o600).get()
        guard case .failure(let error) = Socket.listen(path: path, mode: 0o600) else {
            Issue.record("a second listener took a live publisher's path")
            return
        }
        #expect(error.code == .addressInUse)
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path) == [name])
        let client = try Socket.connect(path: path, timeoutNanoseconds: 1_000_000_000).get()
        _ = try live.waitReadable(timeoutMilliseconds: 2000).get()
        #expect(try live.accept().get() != nil)
        _ = client
    }

    @Test func regularFileAtPathIsNeverRemoved() throws {
        let path = temporarySocketPath()
        defer { unlink(path) }
        #expect(FileManager.default.createFile(atPath: path, contents: Data([1, 2, 3])))
        let result = Socket.listen(path: path, mode: 0o600)
        guard case .failure(let error) = result else {
            Issue.record("listener replaced a regular file")
            return
        }
        #expect(error.code == .addressInUse)
        #expect(FileManager.default.contents(atPath: path) == Data([1, 2, 3]))
    }

    @Test func descriptorTravelsWithDatagramAndPeerCredentialsAreOurs() throws {
        let path = temporarySocketPath()
        defer { unlink(path) }
        let listener = try Socket.listen(path: path, mode: 0o600).get()
        let client = try Socket.connect(path: path, timeoutNanoseconds: 1_000_000_000).get()
        _ = try listener.waitReadable(timeoutMilliseconds: 2000).get()
        let server = try #require(try listener.accept().get())
        let credentials = try server.peerCredentials().get()
        #expect(credentials.uid == getuid())
        #expect(credentials.pid == getpid())

        var fds: [Int32] = [0, 0]
        #expect(pipe(&fds) == 0)
        defer {
            close(fds[0])
            close(fds[1])
        }
        #expect(try client.send([1, 2, 3, 4], descriptors: [fds[1]]).get() == .sent)
        _ = try server.waitReadable(timeoutMilliseconds: 2000).get()
        guard case .datagram(let datagram) = try server.receive(maximumSize: 64).get() else {
            Issue.record("no datagram")
            return
        }
        #expect(datagram.bytes == [1, 2, 3, 4])
        #expect(datagram.descriptors.count == 1)
        #expect(!datagram.isTruncated)
        // The received fd is the pipe's write end: writing to it reaches the read end.
        let received = try #require(datagram.descriptors.first?.take())
        defer { try? received.close() }
        #expect(try received.writeAll([42]) == 1)
        var byte: UInt8 = 0
        #expect(read(fds[0], &byte, 1) == 1)
        #expect(byte == 42)
    }

    @Test func oversizedDatagramIsReportedTruncated() throws {
        let (a, b) = try Syscall.unixSocketPair().get()
        let sender = Socket(adopting: a)
        let receiver = Socket(adopting: b)
        #expect(try sender.send([UInt8](repeating: 7, count: 200)).get() == .sent)
        guard case .datagram(let datagram) = try receiver.receive(maximumSize: 100).get() else {
            Issue.record("no datagram")
            return
        }
        #expect(datagram.isTruncated)
        #expect(datagram.bytes.count == 100)
    }

    @Test func closedPeerReadsAsEndOfFile() throws {
        let (a, b) = try Syscall.unixSocketPair().get()
        var sender: Socket? = Socket(adopting: a)
        let receiver = Socket(adopting: b)
        _ = sender
        sender = nil
        // Waited for, not read at once: a child another test spawns at this moment holds a copy of `a` until its
        // exec closes it, and until then the end of file has not happened yet.
        #expect(try receiver.waitReadable(timeoutMilliseconds: 10_000).get())
        guard case .endOfFile = try receiver.receive(maximumSize: 100).get() else {
            Issue.record("expected end of file")
            return
        }
    }
}
