#!/usr/bin/env bash
# Builds the FrameBus GStreamer plugin, gstreamer/build/libgstframebus.so, which python/tests/test_gstreamer.py and
# python/tests/test_gstreamer_codec.py drive with the real gst-launch-1.0. Paste the body into .ci/run after the Swift tests (which leave .build/debug
# warm), or run it as it is; then run pytest with FRAMEBUS_REQUIRE_ALL=1 so the GStreamer tests cannot skip.
set -euo pipefail
cd "$(dirname "$0")/.."

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends make gcc pkg-config \
    gstreamer1.0-tools gstreamer1.0-plugins-base gstreamer1.0-plugins-good gstreamer1.0-plugins-bad \
    libgstreamer1.0-dev libgstreamer-plugins-base1.0-dev

# The C library the plugin links (libFrameBusC.so), the CLI the tests publish with, and the peer process whose
# hostile publishers they subscribe to.
swift build --product FrameBusC
swift build --product framebus
swift build --product FrameBusTestPeer
make -C gstreamer FRAMEBUS_LIBDIR="$(swift build --show-bin-path)"

# The plugin loads (a registry of its own, so no stale cache hides a broken build).
registry="$(mktemp -d)/registry.bin"
for element in framebussink framebussrc framebusenc framebusdec; do
    GST_PLUGIN_PATH="$PWD/gstreamer/build" GST_REGISTRY="$registry" gst-inspect-1.0 "$element" >/dev/null
done
echo "built gstreamer/build/libgstframebus.so"
# Then: FRAMEBUS_REQUIRE_ALL=1 python3 -m pytest python/tests/test_gstreamer.py python/tests/test_gstreamer_codec.py
