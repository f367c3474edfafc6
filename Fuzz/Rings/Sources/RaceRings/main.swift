// The concurrent-writer harness: a hostile thread rewrites the ring files while the real readers and writers run
// against them, in both directions, for the seconds given as the first argument (FrameBus's `RingFuzzing.race`).
import Foundation
@_spi(Testing) import FrameBus

let seconds = CommandLine.arguments.count > 1 ? Double(CommandLine.arguments[1]) ?? 10 : 10
let rounds = RingFuzzing.race(seconds: seconds)
print("raced \(rounds) rounds of 64 reads and writes per direction in \(seconds) s")
exit(rounds > 0 ? 0 : 1)
