#!/usr/bin/env bash
# Protocol version 3's rings under AddressSanitizer with a concurrent hostile writer, for SECONDS (default 20): a
# thread rewrites every counter and slot of the ring files while the real readers and writers of both sides run
# against them (publisher → subscriber and back).
#
#   Fuzz/Rings/race.sh [SECONDS]
#
# Exits non-zero on a crash, a failed precondition or an out-of-bounds access.
set -euo pipefail
SECONDS_TO_RUN="${1:-20}"
HERE="$(cd "$(dirname "$0")" && pwd)"
WORK="${RACE_RINGS_WORK:-$(mktemp -d /tmp/framebus-race-rings.XXXXXX)}"
SCRATCH="${FUZZ_SCRATCH:-$WORK/build}"

echo "building the ring race harness (scratch $SCRATCH)"
swift build --package-path "$HERE" --scratch-path "$SCRATCH/race" -c release --sanitize=address \
    -Xswiftc -sanitize=address --product RaceRings
echo "racing for $SECONDS_TO_RUN s"
"$SCRATCH/race/release/RaceRings" "$SECONDS_TO_RUN"
