// One libFuzzer binary for the bus (FrameBusTesting's `RingFuzzing` and `SubscriberProtocolFuzzing` entry points,
// which trap on a broken invariant). The environment picks what a run does, read once before the first input:
//   FUZZ_TARGET=rings|subscriber   the fuzz target (required): what a hostile peer wrote into its ring files, or the
//                                  datagram sequences a hostile publisher sends a subscriber;
//   FUZZ_MAKE_SEEDS=DIRECTORY      writes that target's seed corpus into DIRECTORY and exits;
//   FUZZ_RACE_SECONDS=SECONDS      runs the rings' concurrent-writer harness (a hostile thread rewrites the ring
//                                  files while the real readers and writers run, both directions) and exits.
import Foundation
import FuzzBusTesting

enum Target: String {
    case rings, subscriber

    func run(_ input: [UInt8]) {
        switch self {
        case .rings: _ = RingFuzzing.run(input)
        case .subscriber: SubscriberProtocolFuzzing.run(input)
        }
    }

    var seeds: [[UInt8]] {
        switch self {
        case .rings: RingFuzzing.seeds()
        case .subscriber: SubscriberProtocolFuzzing.seeds()
        }
    }
}

// Written once by LLVMFuzzerInitialize, before libFuzzer calls LLVMFuzzerTestOneInput on the same thread.
nonisolated(unsafe) private var target = Target.rings

private func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("FuzzBus: \(message)\n".utf8))
    exit(2)
}

@_cdecl("LLVMFuzzerInitialize")
public func initialize(
    _ argc: UnsafeMutablePointer<CInt>,
    _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>
) -> CInt {
    // getenv, not ProcessInfo's dictionary: LeakSanitizer would report that dictionary as leaked when exit() ends
    // a seed or race run below while it is still alive.
    func environment(_ name: String) -> String? { getenv(name).map { String(cString: $0) } }
    if let seconds = environment("FUZZ_RACE_SECONDS") {
        guard let seconds = Double(seconds), seconds > 0 else { fail("FUZZ_RACE_SECONDS=\(seconds) is not a duration") }
        let rounds = RingFuzzing.race(seconds: seconds)
        print("raced \(rounds) rounds of 64 reads and writes per direction in \(seconds) s")
        exit(rounds > 0 ? 0 : 1)
    }
    guard let name = environment("FUZZ_TARGET"), let chosen = Target(rawValue: name) else {
        fail("set FUZZ_TARGET to rings or subscriber")
    }
    target = chosen
    if let directory = environment("FUZZ_MAKE_SEEDS") {
        for (index, seed) in chosen.seeds.enumerated() {
            let file = URL(fileURLWithPath: directory).appendingPathComponent("\(name)-seed-\(index)")
            do { try Data(seed).write(to: file) } catch { fail("cannot write \(file.path): \(error)") }
        }
        exit(0)
    }
    return 0
}

@_cdecl("LLVMFuzzerTestOneInput")
public func testOneInput(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    target.run(Array(UnsafeBufferPointer(start: data, count: size)))
    return 0
}
