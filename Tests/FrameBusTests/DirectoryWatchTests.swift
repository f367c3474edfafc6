import Foundation
import TestSupport
import Testing

@testable import FrameBus

/// The waiting subscriber's inotify watch: it fires when the watched name appears (as a publisher's socket does), not
/// for other names, and its parser takes any bytes without reading past them.
@Suite struct DirectoryWatchTests {
    /// A directory of the test's own under /tmp.
    static func makeDirectory() throws -> String {
        let path = "/tmp/fbwatch-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: false)
        return path
    }

    /// Whether the watch's descriptor becomes readable within `milliseconds`.
    static func readable(_ watch: DirectoryWatch, milliseconds: Int32) -> Bool {
        guard case .success(let events) = Syscall.poll([(watch.descriptor, PollEvents.readable)], timeout: milliseconds)
        else { return false }
        return events[0] != 0
    }

    @Test func aPublisherListeningAtTheWatchedPathWakesTheWatch() throws {
        let directory = try Self.makeDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = directory + "/camera.sock"
        let watch = try #require(DirectoryWatch.make(path: path))
        #expect(!watch.drain())
        // Another name in the same directory is not what the subscriber waits for.
        _ = FileManager.default.createFile(atPath: directory + "/other", contents: nil)
        #expect(Self.readable(watch, milliseconds: 5000))
        #expect(!watch.drain())
        let publisher = try Publisher(configuration: .init(path: path, formats: [.yuv420BiPlanarVideoRange8]))
        defer { publisher.stop() }
        #expect(Self.readable(watch, milliseconds: 5000))
        #expect(watch.drain())
    }

    @Test func aDirectoryThatDoesNotExistGivesNoWatch() {
        #expect(DirectoryWatch.make(path: "/tmp/fbwatch-missing-\(UUID().uuidString.prefix(8))/camera.sock") == nil)
        #expect(DirectoryWatch.make(path: "/tmp/") == nil)
    }

    @Test(arguments: [
        ("the name", [UInt8]("camera.sock".utf8), 16, true),
        ("another name", [UInt8]("camera.sock2".utf8), 16, false),
        ("a prefix of the name", [UInt8]("camera".utf8), 16, false),
        ("a record running past the bytes read counts as seen", [UInt8]("camera.sock".utf8), 8, true),
    ])
    func recordsAreParsedWithinWhatWasRead(_ name: String, _ recordName: [UInt8], _ padding: Int, _ expected: Bool) {
        // struct inotify_event: wd, mask (IN_CREATE), cookie, len, then len bytes of NUL-padded name.
        var record: [UInt8] = [1, 0, 0, 0, 0x00, 0x01, 0, 0, 0, 0, 0, 0, UInt8(padding), 0, 0, 0]
        record += recordName.prefix(padding) + [UInt8](repeating: 0, count: max(0, padding - recordName.count))
        if padding < recordName.count { record.removeLast(4) }  // the length now runs past the bytes read
        #expect(DirectoryWatch.events(in: record[...], name: [UInt8]("camera.sock".utf8)) == expected, "\(name)")
    }

    @Test func anOverflowedQueueCountsAsSeen() {
        let overflow: [UInt8] = [0xFF, 0xFF, 0xFF, 0xFF, 0x00, 0x40, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]  // IN_Q_OVERFLOW
        #expect(DirectoryWatch.events(in: overflow[...], name: [UInt8]("camera.sock".utf8)))
        #expect(!DirectoryWatch.events(in: overflow.prefix(15), name: [UInt8]("camera.sock".utf8)))
    }
}
