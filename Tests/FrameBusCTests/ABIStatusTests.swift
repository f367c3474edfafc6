import CFrameBusABI
import Testing

@testable import FrameBusC

/// The Swift mirror of the header's status codes matches the header.
@Suite(.timeLimit(.minutes(5))) struct ABIStatusTests {
    @Test func everyStatusMatchesTheHeaderMacroOfItsName() {
        let header: [(String, Int32)] = [
            ("FB_OK", FB_OK), ("FB_ERROR_INVALID_ARGUMENT", FB_ERROR_INVALID_ARGUMENT),
            ("FB_ERROR_SYSTEM_CALL", FB_ERROR_SYSTEM_CALL), ("FB_ERROR_ADDRESS_IN_USE", FB_ERROR_ADDRESS_IN_USE),
            ("FB_ERROR_PERMISSION_DENIED", FB_ERROR_PERMISSION_DENIED), ("FB_ERROR_REFUSED", FB_ERROR_REFUSED),
            ("FB_ERROR_PROTOCOL_VIOLATION", FB_ERROR_PROTOCOL_VIOLATION),
            ("FB_ERROR_END_OF_STREAM", FB_ERROR_END_OF_STREAM), ("FB_ERROR_TIMED_OUT", FB_ERROR_TIMED_OUT),
            ("FB_ERROR_SURFACE_REJECTED", FB_ERROR_SURFACE_REJECTED), ("FB_ERROR_CLOSED", FB_ERROR_CLOSED),
            ("FB_ERROR_OUT_OF_BUFFERS", FB_ERROR_OUT_OF_BUFFERS), ("FB_ERROR_RESOURCE", FB_ERROR_RESOURCE),
            ("FB_ERROR_BUSY", FB_ERROR_BUSY), ("FB_ERROR_INTERRUPTED", FB_ERROR_INTERRUPTED),
            ("FB_ERROR_FORMAT_MISMATCH", FB_ERROR_FORMAT_MISMATCH), ("FB_ERROR_CORRUPT_DATA", FB_ERROR_CORRUPT_DATA),
            ("FB_ERROR_UNSUPPORTED_VERSION", FB_ERROR_UNSUPPORTED_VERSION),
            ("FB_ERROR_BUFFER_TOO_SMALL", FB_ERROR_BUFFER_TOO_SMALL), ("FB_ERROR_CANCELLED", FB_ERROR_CANCELLED),
            ("FB_ERROR_INTERNAL", FB_ERROR_INTERNAL),
        ]
        #expect(header.count == ABIStatus.allCases.count)
        for (name, value) in header {
            let status = ABIStatus(rawValue: value)
            #expect(status.map { "\($0.name)" } == name, "\(name) = \(value)")
        }
    }

    @Test func messagesAreTruncatedAtACharacterBoundaryAndTerminated() {
        var storage = [UInt8](repeating: 0xAA, count: 8)
        storage.withUnsafeMutableBytes { bytes in copyMessage("abcdeé", into: bytes) }
        // "abcde" + "é" (2 bytes) is 7 bytes: it fits before the NUL.
        #expect(storage == Array("abcdeé".utf8) + [0])
        storage = [UInt8](repeating: 0xAA, count: 7)
        storage.withUnsafeMutableBytes { bytes in copyMessage("abcdeé", into: bytes) }
        // Six bytes fit; the é would be cut in half, so it goes entirely.
        #expect(storage == Array("abcde".utf8) + [0, 0xAA])
    }
}
