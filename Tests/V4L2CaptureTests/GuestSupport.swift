import Foundation
import FrameBus
import Glibc
import TestSupport
import Testing

/// The capture device the guest suite uses: $FRAMEBUS_V4L2_DEVICE, or /dev/video0 (vivid's first node after
/// `modprobe vivid` in the guest kernel; see scripts/guest-run).
let captureDevicePath = ProcessInfo.processInfo.environment["FRAMEBUS_V4L2_DEVICE"] ?? "/dev/video0"
let hasCaptureDevice = access(captureDevicePath, R_OK | W_OK) == 0
/// With FRAMEBUS_REQUIRE_ALL=1 the device tests run even without the device, and fail naming it.
let requireAll = ProcessInfo.processInfo.environment["FRAMEBUS_REQUIRE_ALL"] == "1"
let runsDeviceTests = hasCaptureDevice || requireAll
let noDeviceReason: Comment = "needs \(captureDevicePath) (vivid in a guest kernel: scripts/guest-run); absent here"

/// Fails (under FRAMEBUS_REQUIRE_ALL=1) when the device is missing.
func requireCaptureDevice() throws {
    try #require(hasCaptureDevice, "needs \(captureDevicePath): run this suite in the guest kernel (scripts/guest-run)")
}

/// v4l2-ctl (Debian: v4l-utils), to drive vivid's controls as a user would.
let v4l2ctlPath: String? = ["/usr/bin/v4l2-ctl", "/bin/v4l2-ctl"].first { (path: String) in access(path, X_OK) == 0 }

/// Runs `v4l2-ctl -d DEVICE ARGUMENTS...` and returns its exit status.
func v4l2ctl(_ arguments: [String]) async throws -> Int32? {
    let path = try #require(v4l2ctlPath, "needs v4l2-ctl (apt-get install v4l-utils)")
    let child = try await ChildProcess(URL(fileURLWithPath: path), ["-d", captureDevicePath] + arguments)
    return await child.waitForExit(timeout: 60) ? child.terminationStatus : nil
}
