import ArgumentParser
import Foundation
import FrameBus

/// The eventfd floor of `framebus bench bus`: a ping-pong over two eventfds shared by the two processes (passed once
/// with `SCM_RIGHTS`), beside the SEQPACKET one. Each ping writes the sender's CLOCK_MONOTONIC stamp as the eventfd's
/// value; the peer blocks in `read`, records the one-way latency and answers on the other eventfd. This is the
/// cheapest blocking wake-up between two processes: one `write` and one `read` per side, no socket.
///
/// `eventfd-dispatch-floor` is the same ping-pong with the peer's side waiting the way a `DispatchSource` does: a read
/// source on the ping eventfd targeting a serial queue, whose handler reads, records and answers. It measures what
/// waiting for readiness "on the delegate's queue" costs on Linux, where libdispatch's sources are polled by its own
/// event thread (`epoll_wait`) and their handlers then run on a worker thread that thread wakes: against
/// `eventfd-floor`, the price of that second wake-up with no FrameBus code in the way.
extension BenchBusCommand {
    static let eventfdFloor = "eventfd-floor"
    static let eventfdDispatchFloor = "eventfd-dispatch-floor"

    /// Hands the peer two eventfds (ping, pong), keeping our copies.
    func shareEventfds(_ channel: BenchmarkSocket) throws -> (ping: Int32, pong: Int32) {
        let ping = try BenchmarkSocket.makeEventfd()
        let pong = try BenchmarkSocket.makeEventfd()
        try channel.send(Array("efd".utf8))
        try channel.send([0xEF], descriptors: [ping, pong])
        try expectReply(channel, "ready")
        return (ping, pong)
    }

    func measureEventfdFloor(
        _ channel: BenchmarkSocket,
        eventfds: (ping: Int32, pong: Int32),
        rate: Int,
        frames: Int,
        throughDispatchSource: Bool = false
    ) throws -> BenchResult {
        try request(channel, "begin", expect: "ok")
        try channel.send(Array("\(throughDispatchSource ? "efd-dispatch-run" : "efd-run") \(frames)".utf8))
        let period: UInt64 = rate > 0 ? 1_000_000_000 / UInt64(rate) : 0
        let cpu = BenchmarkSocket.processCPUNanoseconds()
        let start = BenchmarkSocket.monotonicNanoseconds()
        var next = start
        for _ in 0..<frames {
            BenchmarkSocket.eventfdWrite(eventfds.ping, max(1, BenchmarkSocket.monotonicNanoseconds()))
            _ = BenchmarkSocket.eventfdRead(eventfds.pong)
            if period > 0 {
                next += period
                sleep(until: next)
            }
        }
        let elapsed = BenchmarkSocket.monotonicNanoseconds() - start
        let parentCPU = BenchmarkSocket.processCPUNanoseconds() - cpu
        guard let reply = try channel.receive(timeoutMilliseconds: 60_000) else {
            throw ValidationError("peer went away during the eventfd run")
        }
        let peer = try JSONDecoder().decode(PeerReport.self, from: Data(reply))
        return BenchResult(
            transport: throughDispatchSource ? Self.eventfdDispatchFloor : Self.eventfdFloor,
            format: "8B",
            width: 0,
            height: 0,
            rateHz: rate,
            sentFrames: frames,
            seconds: Double(elapsed) / 1e9,
            peer: peer,
            publisherCPUNanoseconds: parentCPU
        )
    }
}

extension BenchPeer {
    /// `efd`: takes the two eventfds of the next datagram.
    func receiveEventfds() throws {
        guard let fds = try channel.receiveDescriptors(), fds.count == 2 else {
            try reply("no eventfds")
            return
        }
        for fd in eventfds { BenchmarkSocket.closeDescriptor(fd) }
        eventfds = fds
        try reply("ready")
    }

    /// `efd-run N`: answers N pings, recording each one-way latency, then reports.
    func runEventfdFloor(_ count: Int) throws {
        guard eventfds.count == 2 else {
            try reply("no eventfds")
            return
        }
        for _ in 0..<count {
            let stamp = BenchmarkSocket.eventfdRead(eventfds[0])
            let now = BenchmarkSocket.monotonicNanoseconds()
            record(now &- stamp, at: now)
            BenchmarkSocket.eventfdWrite(eventfds[1], 1)
        }
        try reply(try makeReport())
    }

    /// `efd-dispatch-run N`: answers N pings from a `DispatchSource` read handler on a serial queue, then reports.
    func runEventfdDispatchFloor(_ count: Int) throws {
        guard eventfds.count == 2 else {
            try reply("no eventfds")
            return
        }
        let (ping, pong) = (eventfds[0], eventfds[1])
        let queue = DispatchQueue(label: "framebus.bench.eventfd-dispatch")
        let source = DispatchSource.makeReadSource(fileDescriptor: ping, queue: queue)
        let done = DispatchSemaphore(value: 0)
        let samples = Samples()
        source.setEventHandler {
            let stamp = BenchmarkSocket.eventfdRead(ping)
            let now = BenchmarkSocket.monotonicNanoseconds()
            samples.append(now &- stamp, at: now)
            BenchmarkSocket.eventfdWrite(pong, 1)
            if samples.count == count { done.signal() }
        }
        source.resume()
        done.wait()
        source.cancel()
        for (latency, time) in samples.taken { record(latency, at: time) }
        try reply(try makeReport())
    }

    /// The handler's samples, handed back to the peer's thread after the run (the handler runs on a queue).
    final class Samples: @unchecked Sendable {
        // `@unchecked Sendable`: written only by the serial queue's handler, read after the semaphore it signals.
        private(set) var taken: [(UInt64, UInt64)] = []
        var count: Int { taken.count }
        func append(_ latency: UInt64, at time: UInt64) { taken.append((latency, time)) }
    }
}
