// Mode "solid-publisher PATH [--frames N] [--buffers B]": an honest Publisher whose frame i has every byte of every
// plane set to 0x11 × (i + 1) (wrapping), from a pool of B buffers (default 4), so a recycled surface is visible in
// the bytes. It waits (up to ten minutes; a test's lifeline ends it sooner) for one subscriber, publishes N frames (default 40) as fast as buffers free up (waiting up to
// 2 s for each), prints "published N" and "waits W" (how many frames had to wait for a buffer), and stops.
import FrameBus
import Glibc

func runSolidPublisher(_ arguments: [String]) -> Int32 {
    guard let path = arguments.first else { return 2 }
    let options = PeerOptions(arguments.dropFirst())
    let count = options.int("frames", 40)
    do {
        let publisher = try Publisher(configuration: .init(path: path, formats: [.yuv420BiPlanarVideoRange8]))
        let pool = try PixelBufferPool(
            attributes: .init(
                width: 64,
                height: 48,
                pixelFormat: .yuv420BiPlanarVideoRange8,
                allocationThreshold: options.int("buffers", 4)
            )
        )
        emit("listening")
        var waited = 0
        // A test that died before connecting ends this peer through its lifeline (main.swift); without one, give up
        // after ten minutes without a subscriber, long enough for any slow machine.
        var waitedForSubscriber = 0
        while publisher.subscriberCount == 0 {
            guard waitedForSubscriber < 600_000 else {
                emit("nobody connected")
                publisher.stop()
                return 3
            }
            usleep(1000)
            waitedForSubscriber += 1
        }
        for index in 0..<count {
            var buffer: PixelBuffer?
            for attempt in 0..<2000 {
                buffer = try? publisher.makePixelBuffer(from: pool)
                if buffer != nil { break }
                if attempt == 0 { waited += 1 }
                usleep(1000)
            }
            guard let buffer else {
                emit("no buffer for frame \(index)")
                break
            }
            let value = UInt8(truncatingIfNeeded: 0x11 &* (index + 1))
            try buffer.lock()
            for plane in 0..<buffer.planeCount {
                try buffer.withUnsafeMutableBytes(ofPlane: plane) { bytes in
                    for offset in bytes.indices { bytes[offset] = value }
                }
            }
            try buffer.unlock()
            try publisher.publish(buffer)
            usleep(2000)
        }
        emit("published \(count)")
        emit("waits \(waited)")
        usleep(200_000)
        publisher.stop()
        return 0
    } catch {
        emit("error \(error)")
        return 1
    }
}
