// Writes the subscriber fuzzer's seed corpus (real sessions) into the directory given as the only argument.
import Foundation
@_spi(Testing) import FrameBus

guard CommandLine.arguments.count == 2 else {
    FileHandle.standardError.write(Data("usage: MakeSubscriberSeeds DIRECTORY\n".utf8))
    exit(2)
}
let directory = URL(fileURLWithPath: CommandLine.arguments[1])
for (index, seed) in SubscriberProtocolFuzzing.seeds().enumerated() {
    try Data(seed).write(to: directory.appendingPathComponent("session-\(index)"))
}
