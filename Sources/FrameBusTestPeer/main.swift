// The peer process the cross-process tests start (never fork a test process: other threads may hold runtime locks).
//
// Usage: FrameBusTestPeer <mode> [arguments...]; each mode reports on its socket or stdout and exits 0 when it ran.
import Foundation

let arguments = Array(CommandLine.arguments.dropFirst())
guard let mode = arguments.first else {
    FileHandle.standardError.write("usage: FrameBusTestPeer <mode> [arguments]\n".data(using: .utf8)!)
    exit(2)
}
let rest = Array(arguments.dropFirst())
switch mode {
case "import-surface":
    exit(runImportSurface(rest))
case "bus-subscriber": exit(runBusSubscriber(rest))
case "bus-publisher": exit(runBusPublisher(rest))
case "hostile-publisher": exit(runHostilePublisher(rest))
case "solid-publisher": exit(runSolidPublisher(rest))
case "bus-hoarder": exit(runBusHoarder(rest))
case "bus-flood": exit(runBusFlood(rest))
case "ring-hostile-subscriber": exit(runRingHostileSubscriber(rest))
case "ring-hostile-publisher": exit(runRingHostilePublisher(rest))
case "version2-only-publisher": exit(runVersionTwoOnlyPublisher(rest))
default:
    FileHandle.standardError.write("FrameBusTestPeer: unknown mode \(mode)\n".data(using: .utf8)!)
    exit(2)
}
