// Writes the ring fuzzer's seed corpus into the directory given as the first argument.
import Foundation
@_spi(Testing) import FrameBus

let directory = CommandLine.arguments.count > 1 ? CommandLine.arguments[1] : "."
for (index, seed) in RingFuzzing.seeds().enumerated() {
    FileManager.default.createFile(atPath: "\(directory)/seed-\(index)", contents: Data(seed))
}
