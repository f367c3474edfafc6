#!/usr/bin/env bash
# Fuzz the subscriber's protocol handling (wire decoder + SubscriberStateMachine + event queue + outbox) with
# libFuzzer and AddressSanitizer for SECONDS (default 60).
#
#   Fuzz/Subscriber/run.sh [SECONDS]
#
# Builds this package (which depends on the main one by path) with `--sanitize=fuzzer,address` into a fresh
# scratch directory, seeds the corpus with real sessions (MakeSubscriberSeeds), and runs. Exits non-zero if the
# fuzzer finds a crash, a failed invariant, an out-of-bounds access, a leak or a timeout; the reproducer is left in
# the work directory it prints.
set -euo pipefail
SECONDS_TO_RUN="${1:-60}"
HERE="$(cd "$(dirname "$0")" && pwd)"
WORK="${FUZZ_SUBSCRIBER_WORK:-$(mktemp -d /tmp/framebus-fuzz-subscriber.XXXXXX)}"
# A fresh build directory by default: SwiftPM's incremental state for a path dependency goes stale when the main
# package's files are renamed or removed. Set FUZZ_SCRATCH to reuse one.
SCRATCH="${FUZZ_SCRATCH:-$WORK/build}"
mkdir -p "$WORK/corpus"

echo "building the seed maker and the fuzzer (scratch $SCRATCH)"
swift build --package-path "$HERE" --scratch-path "$SCRATCH/seeds" -c release --product MakeSubscriberSeeds
"$SCRATCH/seeds/release/MakeSubscriberSeeds" "$WORK/corpus"
# --sanitize links libFuzzer's main(); -Xswiftc makes sure every Swift module (FrameBus above all), not only this
# package's own target, is instrumented for coverage (SwiftPM does not always pass --sanitize to path dependencies).
swift build --package-path "$HERE" --scratch-path "$SCRATCH/fuzz" -c release --sanitize=fuzzer --sanitize=address \
    -Xswiftc -sanitize=fuzzer,address --product FuzzSubscriber

echo "fuzzing for $SECONDS_TO_RUN s in $WORK"
cd "$WORK"
"$SCRATCH/fuzz/release/FuzzSubscriber" -max_total_time="$SECONDS_TO_RUN" -timeout=10 -rss_limit_mb=2048 \
    -max_len=16384 -print_final_stats=1 "$WORK/corpus"
