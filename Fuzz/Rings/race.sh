#!/usr/bin/env bash
# Protocol version 3's rings under AddressSanitizer with a concurrent hostile writer, for SECONDS (default 20): a
# thread rewrites every counter and slot of the ring files while the real readers and writers of both sides run
# against them (publisher → subscriber and back).
#
#   Fuzz/Rings/race.sh [SECONDS]
#
# Runs in Fuzz/Bus's binary (FUZZ_SCRATCH: see Fuzz/Bus/build.sh). Exits non-zero on a crash, a failed
# precondition or an out-of-bounds access.
set -euo pipefail
SECONDS_TO_RUN="${1:-20}"
HERE="$(cd "$(dirname "$0")" && pwd)"

echo "building the ring race harness"
FUZZER="$("$HERE/../Bus/build.sh")"
echo "racing for $SECONDS_TO_RUN s"
FUZZ_RACE_SECONDS="$SECONDS_TO_RUN" "$FUZZER"
