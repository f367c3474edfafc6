# The V4L2 capture suites' guest command and checks, shared by scripts/v4l2-guest-tests (a boot of its own) and
# scripts/device-tests --with-v4l2 (one boot for the DMA-BUF and the V4L2 suites, as .ci/run does). Sourced, not run.
#   1. V4L2CaptureDeviceTests on vivid as loaded (single-planar): both memory modes (MMAP + EXPBUF, and memfds
#      imported through udmabuf), --memory auto, buffers returned by hoarding and killed subscribers, and capture's
#      adapt mode: the frame rate lowered under the publisher's real cost and restored at nominal;
#   2. vivid reloaded with `multiplanar=2` (a V4L2_CAP_VIDEO_CAPTURE_MPLANE device), V4L2MultiplanarTests: NV12M and
#      single-plane NV12 on the multi-planar API, both memory modes;
#   3. V4L2CaptureUnplugTests (which unregisters vivid's nodes, so it runs last).
# The guest must have loaded vivid (scripts/guest-run --vivid) and have v4l2-ctl (v4l-utils).

# The shell commands that run the three suites in the guest with the test bundle $1 (for `sh -c`).
v4l2_guest_commands() {
    local bundle="$1"
    cat <<COMMANDS
    up() { cut -d' ' -f1 /proc/uptime; }
    echo "v4l2-guest-tests: command started at \$(up) s guest uptime"
    '$bundle' --testing-library swift-testing --filter V4L2CaptureDeviceTests || exit 1
    echo "v4l2-guest-tests: single-planar suite done at \$(up) s"
    /sbin/modprobe -r vivid && /sbin/modprobe vivid multiplanar=2 || { echo 'v4l2-guest-tests: reloading vivid failed'; exit 1; }
    '$bundle' --testing-library swift-testing --filter V4L2MultiplanarTests || exit 1
    echo "v4l2-guest-tests: multi-planar suite done at \$(up) s"
    '$bundle' --testing-library swift-testing --filter V4L2CaptureUnplugTests || exit 1
    echo "v4l2-guest-tests: unplug suite done at \$(up) s"
COMMANDS
}

# Checks the guest's output (colour codes removed) for the three suites' closing lines and no skip; returns 1 with a
# message otherwise.
v4l2_check() {
    local plain="$1"
    grep -q "Test run with 9 tests in 1 suite passed" <<<"$plain" || { echo "v4l2-guest-tests: expected 9 device tests" >&2; return 1; }
    grep -q "Test run with 2 tests in 1 suite passed" <<<"$plain" || { echo "v4l2-guest-tests: expected 2 multi-planar tests" >&2; return 1; }
    grep -q "Test run with 1 test in 1 suite passed" <<<"$plain" || { echo "v4l2-guest-tests: expected the unplug test" >&2; return 1; }
    if grep -q " skipped" <<<"$plain"; then echo "v4l2-guest-tests: a test skipped" >&2; return 1; fi
    return 0
}
