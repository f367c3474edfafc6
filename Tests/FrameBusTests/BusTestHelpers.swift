import Foundation
import FrameBusTesting
import ImageSources
import TestSupport

@testable import FrameBus

/// A socket path for a test bus (TestSupport's `temporarySocketPath`).
func temporaryBusPath(_ tag: String) -> String { temporarySocketPath(tag) }

/// Fills `buffer` with frame `index` of the test pattern and returns the hash of its packed bytes.
func fillFrame(_ buffer: PixelBuffer, index: Int) throws -> UInt64 {
    try buffer.lock()
    defer { try? buffer.unlock() }
    try TestPattern.fill(buffer, frameIndex: index)
    // A per-frame stamp in the first bytes, so that identical pattern frames still differ.
    try buffer.withUnsafeMutableBytes(ofPlane: 0) { bytes in
        withUnsafeBytes(of: UInt64(index).littleEndian) { stamp in
            for offset in 0..<8 { bytes[offset] = stamp[offset] }
        }
    }
    return fnv1a(try buffer.packedBytes())
}

/// Waits until the publisher's conversion worker has made and fanned out every frame handed to it. A test that expects
/// every frame in a converted format publishes no faster than the worker converts: a publisher that outruns it sheds
/// frames for those subscribers, by design (``PublisherCost``).
func conversionsSettled(_ publisher: Publisher) async -> Bool {
    await eventually { publisher.core.conversionWorker.isIdle }
}
