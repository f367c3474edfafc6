import Foundation
import Glibc

/// `bus-flood-as UID PATH [bus-flood options]`: drops to user and group `UID` (the caller must be root), then
/// floods like `bus-flood`: silent connections from a uid the publisher does not allow.
func runBusFloodAsUser(_ arguments: [String]) -> Int32 {
    guard arguments.count >= 2, let uid = UInt32(arguments[0]) else { return 2 }
    guard setgroups(0, nil) == 0, setgid(uid) == 0, setuid(uid) == 0 else {
        emit("cannot become uid \(uid): errno \(errno)")
        return 3
    }
    emit("running as uid \(getuid())")
    return runBusFlood(Array(arguments.dropFirst()))
}
