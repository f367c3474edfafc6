#!/usr/bin/env bash
# Builds Fuzz/Bus's one libFuzzer binary (release, `-sanitize=fuzzer,address`) and prints its path; build output goes
# to stderr. The scratch directory is $FUZZ_SCRATCH, else a fresh one under /tmp: SwiftPM's incremental state for a
# path dependency goes stale when the main package's files are renamed or removed, so reuse one only within a run
# (.ci/run gives Fuzz/Rings/run.sh, Fuzz/Rings/race.sh and Fuzz/Subscriber/run.sh one, and FrameBus is built once).
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
SCRATCH="${FUZZ_SCRATCH:-$(mktemp -d /tmp/framebus-fuzz-bus.XXXXXX)}"
FLAGS=(--package-path "$HERE" --scratch-path "$SCRATCH" -c release --sanitize=fuzzer --sanitize=address
    -Xswiftc -sanitize=fuzzer,address)
swift build "${FLAGS[@]}" --product FuzzBus >&2
echo "$(swift build "${FLAGS[@]}" --show-bin-path)/FuzzBus"
