import ArgumentParser
import CFrameBusShims
import Foundation
import FrameBus

#if canImport(Glibc)
import Glibc
#endif

/// The fan-out floors of `framebus bench bus` (`--transports fanout-floor`): what waking N sleeping processes costs
/// with no frame at all, paced like the `fanout` rows (`--fanout-rate`, `--fanout-frames`, `--fanout` counts), so
/// the fan-out targets can be read against what the machine allows.
///
/// - `floor-fanout-efd-N`: one eventfd per subscriber process, written in turn (N `write`s per frame) — the cheapest
///   per-subscriber wake-up, what any design that wakes each subscriber on its own descriptor pays at least.
/// - `floor-fanout-futex-N`: every process waits with FUTEX_WAIT on one 32-bit word, and one FUTEX_WAKE wakes them
///   all (a broadcast wake: one system call per frame whatever N).
///
/// Each frame's CLOCK_MONOTONIC stamp is taken once, before the first wake, as the bus stamps a frame once before
/// fanning it out, and stored in a page every process maps (with the word, in a memfd); each process records its
/// one-way latency from it. An eventfd's value, or the word's step, counts the frames a late process missed.
extension BenchBusCommand {
    static let fanoutFloor = "fanout-floor"
    static let fanoutFloorPrefix = "floor-fanout-"

    func measureFanoutFloors(control: BenchmarkSocket, base: String, counts: [Int]) throws -> [BenchResult] {
        guard let most = counts.max() else { return [] }
        return try withPeers(control: control, base: base, count: most) { channels in
            var results: [BenchResult] = []
            for kind in ["efd", "futex"] {
                for count in counts {
                    let used = Array(channels.prefix(count))
                    let result = try measureFanoutFloor(kind: kind, channels: used)
                    results.append(result)
                    say(result.line + " (worst subscriber)")
                }
            }
            return results
        }
    }

    /// One fan-out floor run: `kind` is `efd` or `futex`, one peer per channel.
    private func measureFanoutFloor(kind: String, channels: [BenchmarkSocket]) throws -> BenchResult {
        let page = try FanoutFloorPage.make()
        var eventfds: [Int32] = []
        defer {
            for fd in eventfds { BenchmarkSocket.closeDescriptor(fd) }
            _ = unsafe munmap(page.memory, FanoutFloorPage.size)
            BenchmarkSocket.closeDescriptor(page.fd)
        }
        for channel in channels {
            var descriptors = [page.fd]
            if kind == "efd" {
                eventfds.append(try BenchmarkSocket.makeEventfd())
                descriptors.append(eventfds[eventfds.count - 1])
            }
            try channel.send(Array("fanfloor-\(kind)".utf8))
            try channel.send([0xEF], descriptors: descriptors)
            try expectReply(channel, "ready")
        }
        for channel in channels {
            try request(channel, "begin", expect: "ok")
            try channel.send(Array("fanfloor-run \(fanoutFrames)".utf8))
        }
        let period = 1_000_000_000 / UInt64(max(1, fanoutRate))
        let cpu = BenchmarkSocket.processCPUNanoseconds()
        let start = BenchmarkSocket.monotonicNanoseconds()
        var next = start
        for _ in 0..<fanoutFrames {
            let stamp = BenchmarkSocket.monotonicNanoseconds()
            if kind == "efd" {
                unsafe cfb_store_release_u64(FanoutFloorPage.stamp(page.memory), stamp)
                for fd in eventfds { BenchmarkSocket.eventfdWrite(fd, 1) }
            } else {
                _ = unsafe cfb_futex_publish(FanoutFloorPage.word(page.memory), FanoutFloorPage.stamp(page.memory), stamp)
            }
            next += period
            sleep(until: next)
        }
        let publisherCPU = BenchmarkSocket.processCPUNanoseconds() - cpu
        var reports: [PeerReport] = []
        for channel in channels {
            guard let reply = try channel.receive(timeoutMilliseconds: 60_000) else {
                throw ValidationError("peer went away during the fan-out floor")
            }
            reports.append(try JSONDecoder().decode(PeerReport.self, from: Data(reply)))
        }
        let worst = PeerReport(worstOf: reports)
        return BenchResult(
            transport: Self.fanoutFloorPrefix + "\(kind)-\(channels.count)",
            format: "8B",
            width: 0,
            height: 0,
            rateHz: fanoutRate,
            sentFrames: fanoutFrames,
            seconds: Double(max(worst.lastNanoseconds, start + 1) - start) / 1e9,
            peer: worst,
            publisherCPUNanoseconds: publisherCPU
        )
    }

    /// The fan-out rows read against the floors: each floor's own 1 → N ratios (what the machine allows for the
    /// targets "publisher CPU/frame ≤ 2×, worst p50 ≤ 3×"), and the bus's worst p50 at N over the floors' at N.
    static func fanoutFloorComparisons(_ results: [BenchResult]) -> [String] {
        func rows(_ prefix: String) -> [Int: BenchResult] {
            var rows: [Int: BenchResult] = [:]
            for result in results where result.transport.hasPrefix(prefix) {
                if let count = Int(result.transport.dropFirst(prefix.count)) { rows[count] = result }
            }
            return rows
        }
        var lines: [String] = []
        let bus = rows("fanout-")
        for kind in ["efd", "futex"] {
            let floor = rows(fanoutFloorPrefix + kind + "-")
            guard let one = floor[1], let most = floor.keys.max(), most > 1, let top = floor[most] else { continue }
            var line = String(
                format: "%@%@-%d vs -1: publisher CPU/frame %.2f×, worst subscriber p50 %.2f×",
                fanoutFloorPrefix, kind, most, top.publisherCPU / max(one.publisherCPU, 0.001),
                top.p50 / max(one.p50, 0.001)
            )
            if let busTop = bus[most] {
                line += String(format: "; fanout-%d worst p50 = %.2f× this floor's", most, busTop.p50 / max(top.p50, 0.001))
            }
            lines.append(line)
        }
        return lines
    }
}

/// The page the fan-out floors share: a 32-bit sequence word at offset 0 (the futex floor waits on it), the frame's
/// stamp at offset 8.
enum FanoutFloorPage {
    static let size = 4096

    static func make() throws -> (fd: Int32, memory: UnsafeMutableRawPointer) {
        let fd = unsafe cfb_memfd_create("framebus-bench-fanout-floor", CFB_MFD_CLOEXEC)
        guard fd >= 0 else { throw ValidationError("memfd_create: errno \(errno)") }
        guard ftruncate(fd, off_t(size)) == 0, let memory = map(fd) else {
            BenchmarkSocket.closeDescriptor(fd)
            throw ValidationError("cannot size or map the fan-out floor's page: errno \(errno)")
        }
        return (fd, memory)
    }

    static func map(_ fd: Int32) -> UnsafeMutableRawPointer? {
        let memory = unsafe mmap(nil, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)
        guard let memory, memory != MAP_FAILED else { return nil }
        return unsafe memory
    }

    static func word(_ memory: UnsafeMutableRawPointer) -> UnsafeMutablePointer<UInt32> {
        unsafe memory.assumingMemoryBound(to: UInt32.self)
    }

    static func stamp(_ memory: UnsafeMutableRawPointer) -> UnsafeMutablePointer<UInt64> {
        unsafe (memory + 8).assumingMemoryBound(to: UInt64.self)
    }
}

/// What a peer keeps between `fanfloor-efd`/`fanfloor-futex` and `fanfloor-run`.
struct FanoutFloorPeerState {
    /// The shared page (stamp, and the futex word).
    var memory: UnsafeMutableRawPointer?
    /// The eventfd of the `efd` floor; -1 for the futex floor.
    var eventfd: Int32 = -1
    /// The futex word's value when the page was received: frames are counted from it.
    var seen: UInt32 = 0
}

extension BenchPeer {
    /// `fanfloor-efd` / `fanfloor-futex`: takes the shared page (and for `efd` the eventfd) of the next datagram.
    func receiveFanoutFloor(futex: Bool) throws {
        guard let fds = try channel.receiveDescriptors() else {
            try reply("no descriptors")
            return
        }
        closeFanoutFloor()
        defer { if let page = fds.first { BenchmarkSocket.closeDescriptor(page) } }
        guard fds.count == (futex ? 1 : 2), let memory = FanoutFloorPage.map(fds[0]) else {
            for fd in fds.dropFirst() { BenchmarkSocket.closeDescriptor(fd) }
            try reply("cannot take the fan-out floor's descriptors")
            return
        }
        fanoutFloor.memory = memory
        if !futex { fanoutFloor.eventfd = fds[1] }
        // Nothing is published between this setup and the run, so a plain read is the word's current value.
        fanoutFloor.seen = unsafe FanoutFloorPage.word(memory).pointee
        try reply("ready")
    }

    func closeFanoutFloor() {
        if fanoutFloor.eventfd >= 0 { BenchmarkSocket.closeDescriptor(fanoutFloor.eventfd) }
        if let memory = fanoutFloor.memory { _ = unsafe munmap(memory, FanoutFloorPage.size) }
        fanoutFloor = FanoutFloorPeerState()
    }

    /// `fanfloor-run N`: waits for N wake-ups (at most 30 s each), recording each one-way latency, then reports.
    func runFanoutFloor(_ count: Int) throws {
        var received = 0
        while received < count, let memory = fanoutFloor.memory {
            if fanoutFloor.eventfd < 0 {
                let word = unsafe cfb_futex_wait_change(FanoutFloorPage.word(memory), fanoutFloor.seen, 30_000)
                let now = BenchmarkSocket.monotonicNanoseconds()
                guard word != fanoutFloor.seen else { break }
                let stamp = unsafe cfb_load_acquire_u64(FanoutFloorPage.stamp(memory))
                record(now &- stamp, at: now)
                // Frames published while this process was not yet running count as received, not waited for.
                received += Int(word &- fanoutFloor.seen)
                fanoutFloor.seen = word
            } else {
                var ready = pollfd(fd: fanoutFloor.eventfd, events: Int16(POLLIN), revents: 0)
                guard unsafe poll(&ready, 1, 30_000) == 1 else { break }
                let frames = BenchmarkSocket.eventfdRead(fanoutFloor.eventfd)
                let now = BenchmarkSocket.monotonicNanoseconds()
                guard frames > 0 else { break }
                let stamp = unsafe cfb_load_acquire_u64(FanoutFloorPage.stamp(memory))
                record(now &- stamp, at: now)
                received += Int(clamping: frames)
            }
        }
        // Frames received, slept-through ones included (the histogram has one latency per wake-up).
        lock.withLock { frames = received }
        try reply(try makeReport())
    }
}
