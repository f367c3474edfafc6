import ArgumentParser
import Foundation
import FrameBus

/// The eventfd floor of `framebus bench bus`: a ping-pong over two eventfds shared by the two processes (passed once
/// with `SCM_RIGHTS`), beside the SEQPACKET one. Each ping writes the sender's CLOCK_MONOTONIC stamp as the eventfd's
/// value; the peer blocks in `read`, records the one-way latency and answers on the other eventfd. This is the
/// cheapest blocking wake-up between two processes: one `write` and one `read` per side, no socket.
extension BenchBusCommand {
    static let eventfdFloor = "eventfd-floor"

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
        frames: Int
    ) throws -> BenchResult {
        try request(channel, "begin", expect: "ok")
        try channel.send(Array("efd-run \(frames)".utf8))
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
            transport: Self.eventfdFloor,
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
}
