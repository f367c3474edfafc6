// The peer process the cross-process tests start (never fork a test process: other threads may hold runtime locks).
//
// Usage: FrameBusTestPeer <mode> [arguments...]; each mode reports on its socket or stdout and exits 0 when it ran.
import Foundation

// The lifeline: a test starts its peers with FRAMEBUS_TEST_LIFELINE=stdin and one end of a socket pair as standard
// input, holding the only other end. End of file there means the test let go of this peer or its process died, however it
// died: exit then, rather than after a fixed time that a merely slow machine could exceed.
if ProcessInfo.processInfo.environment["FRAMEBUS_TEST_LIFELINE"] == "stdin" {
    let lifeline = Thread {
        var byte: UInt8 = 0
        while true {
            let count = read(0, &byte, 1)
            if count == 0 || (count < 0 && errno != EINTR) { _exit(70) }
        }
    }
    lifeline.name = "lifeline"
    lifeline.start()
}

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
case "bus-flood-as": exit(runBusFloodAsUser(rest))
case "ring-hostile-subscriber": exit(runRingHostileSubscriber(rest))
case "ring-hostile-publisher": exit(runRingHostilePublisher(rest))
case "version2-only-publisher": exit(runVersionTwoOnlyPublisher(rest))
default:
    FileHandle.standardError.write("FrameBusTestPeer: unknown mode \(mode)\n".data(using: .utf8)!)
    exit(2)
}
