#!/usr/bin/env bash
# Fuzz protocol version 3's rings (docs/PROTOCOL.md §9) with libFuzzer and AddressSanitizer for SECONDS (default
# 60): each input is what a hostile peer wrote into its ring files (tails, heads, slots); both sides' readers run
# over real mapped ring files and feed their state machines.
#
#   Fuzz/Rings/run.sh [SECONDS]
#
# Builds this package (which depends on the main one by path) with `--sanitize=fuzzer,address` into a fresh scratch
# directory, seeds the corpus (MakeRingSeeds), and runs. Exits non-zero on a crash, a failed invariant, an
# out-of-bounds access, a leak or a timeout; the reproducer is left in the work directory it prints.
set -euo pipefail
SECONDS_TO_RUN="${1:-60}"
HERE="$(cd "$(dirname "$0")" && pwd)"
WORK="${FUZZ_RINGS_WORK:-$(mktemp -d /tmp/framebus-fuzz-rings.XXXXXX)}"
SCRATCH="${FUZZ_SCRATCH:-$WORK/build}"
mkdir -p "$WORK/corpus"

echo "building the seed maker and the fuzzer (scratch $SCRATCH)"
swift build --package-path "$HERE" --scratch-path "$SCRATCH/seeds" -c release --product MakeRingSeeds
"$SCRATCH/seeds/release/MakeRingSeeds" "$WORK/corpus"
swift build --package-path "$HERE" --scratch-path "$SCRATCH/fuzz" -c release --sanitize=fuzzer --sanitize=address \
    -Xswiftc -sanitize=fuzzer,address --product FuzzRings

echo "fuzzing for $SECONDS_TO_RUN s in $WORK"
cd "$WORK"
"$SCRATCH/fuzz/release/FuzzRings" -max_total_time="$SECONDS_TO_RUN" -timeout=10 -rss_limit_mb=2048 \
    -max_len=8192 -print_final_stats=1 "$WORK/corpus"
