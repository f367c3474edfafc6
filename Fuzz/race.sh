#!/usr/bin/env bash
# Decode compressed surfaces while another thread rewrites them, under AddressSanitizer, for SECONDS (default 20).
#
#   Fuzz/race.sh [SECONDS]
#
# Builds the decoder's sources (as Fuzz/run.sh does) with Fuzz/RaceDecoder.swift using
# `swiftc -sanitize=address` and runs it. Exits non-zero on a crash or an out-of-bounds access.
set -euo pipefail
SECONDS_TO_RUN="${1:-20}"
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
WORK="${RACE_WORK:-$(mktemp -d /tmp/framebus-race.XXXXXX)}"
. "$ROOT/Fuzz/stage-decoder.sh"

# RACE_REUSE=1 with a RACE_WORK that already holds a build runs it again (another FRAMEBUS_CODEC_KERNELS tier is
# picked at run time).
if [ "${RACE_REUSE:-0}" = 1 ] && [ -x "$WORK/race-decoder" ]; then
    echo "reusing the race harness in $WORK"
else
echo "building the race harness in $WORK"
KERNELS="$ROOT/Sources/CSurfaceCodecKernels"
# Every kernel tier's file; the decoder runs the best tier this processor has, or the one FRAMEBUS_CODEC_KERNELS
# names (avx2, sse41, portable; docs/BENCHMARKS.md).
mkdir -p "$WORK/kernels"
for source in "$KERNELS"/*.c; do
    clang -O2 -g -fsanitize=address -c -I "$KERNELS/include" "$source" -o "$WORK/kernels/$(basename "$source" .c).o"
done
swiftc -O -g -sanitize=address -parse-as-library -package-name framebus -module-name RaceDecoder -I "$ROOT/Sources/CLZ4" -I "$ROOT/Sources/CZstd" \
    -I "$KERNELS/include" "$WORK"/src/*.swift "$WORK"/kernels/*.o "$ROOT/Fuzz/RaceDecoder.swift" \
    -o "$WORK/race-decoder" 2> "$WORK/build.log" || { cat "$WORK/build.log"; exit 1; }
fi
# RACE_BUILD_ONLY=1 stops here (.ci/run builds while other phases run, then races with RACE_REUSE=1).
if [ "${RACE_BUILD_ONLY:-0}" = 1 ]; then echo "built $WORK/race-decoder"; exit 0; fi
echo "racing for $SECONDS_TO_RUN s"
# Coded literals wherever smaller (not only 6 % smaller, and in any tile): the small surfaces would otherwise have few.
FRAMEBUS_CODEC_CODED_SAVING=0 FRAMEBUS_CODEC_SEQUENCE_SAVING=0 FRAMEBUS_CODEC_CODED_RATIO=1 "$WORK/race-decoder" "$SECONDS_TO_RUN"
