#!/usr/bin/env bash
# Fuzz the subscriber's protocol handling (wire decoder + SubscriberStateMachine + event queue + outbox) with
# libFuzzer and AddressSanitizer for SECONDS (default 60).
#
#   Fuzz/Subscriber/run.sh [SECONDS]
#
# Builds Fuzz/Bus (FUZZ_SCRATCH: see Fuzz/Bus/build.sh), seeds the corpus with real sessions, and runs. Exits
# non-zero if the fuzzer finds a crash, a failed invariant, an out-of-bounds access, a leak or a timeout; the
# reproducer is left in the work directory it prints.
set -euo pipefail
SECONDS_TO_RUN="${1:-60}"
HERE="$(cd "$(dirname "$0")" && pwd)"
WORK="${FUZZ_SUBSCRIBER_WORK:-$(mktemp -d /tmp/framebus-fuzz-subscriber.XXXXXX)}"
mkdir -p "$WORK/corpus"

echo "building the fuzzer"
FUZZER="$("$HERE/../Bus/build.sh")"
FUZZ_TARGET=subscriber FUZZ_MAKE_SEEDS="$WORK/corpus" "$FUZZER"

echo "fuzzing for $SECONDS_TO_RUN s in $WORK"
cd "$WORK"
FUZZ_TARGET=subscriber "$FUZZER" -max_total_time="$SECONDS_TO_RUN" -timeout=10 -rss_limit_mb=2048 -max_len=16384 \
    -print_final_stats=1 "$WORK/corpus"
