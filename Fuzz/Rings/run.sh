#!/usr/bin/env bash
# Fuzz protocol version 3's rings (docs/PROTOCOL.md §9) with libFuzzer and AddressSanitizer for SECONDS (default
# 60): each input is what a hostile peer wrote into its ring files (tails, heads, slots); both sides' readers run
# over real mapped ring files and feed their state machines.
#
#   Fuzz/Rings/run.sh [SECONDS]
#
# Builds Fuzz/Bus (FUZZ_SCRATCH: see Fuzz/Bus/build.sh), seeds the corpus, and runs. Exits non-zero on a crash, a
# failed invariant, an out-of-bounds access, a leak or a timeout; the reproducer is left in the work directory it
# prints.
set -euo pipefail
SECONDS_TO_RUN="${1:-60}"
HERE="$(cd "$(dirname "$0")" && pwd)"
WORK="${FUZZ_RINGS_WORK:-$(mktemp -d /tmp/framebus-fuzz-rings.XXXXXX)}"
mkdir -p "$WORK/corpus"

echo "building the fuzzer"
FUZZER="$("$HERE/../Bus/build.sh")"
FUZZ_TARGET=rings FUZZ_MAKE_SEEDS="$WORK/corpus" "$FUZZER"

echo "fuzzing for $SECONDS_TO_RUN s in $WORK"
cd "$WORK"
FUZZ_TARGET=rings "$FUZZER" -max_total_time="$SECONDS_TO_RUN" -timeout=10 -rss_limit_mb=2048 -max_len=8192 \
    -print_final_stats=1 "$WORK/corpus"
