#!/usr/bin/env bash
# Fuzz the wire protocol and the protocol state machines with libFuzzer and AddressSanitizer for SECONDS
# (default 60).
#
#   Fuzz/Protocol/run.sh [SECONDS]
#
# Builds the wire layer (Sources/FrameBus/Protocol), the publisher's state machine and, once it exists, the
# subscriber's (SUBSCRIBER_SOURCES below) together with Fuzz/Protocol/*.swift using `swiftc -sanitize=fuzzer,address`,
# with stand-ins for swift-log, swift-system and the latency histogram (Fuzz/Protocol/StandIns.swift). Seeds the
# corpus with every message type and with scripted sessions made of real datagrams (Fuzz/Protocol/MakeSeeds.swift),
# and runs. Exits non-zero if the fuzzer finds a crash, a broken invariant (a precondition in FuzzProtocol.swift),
# an out-of-bounds access, a leak or a timeout; the reproducer is left in the work directory it prints.
set -euo pipefail
SECONDS_TO_RUN="${1:-60}"
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
WORK="${FUZZ_WORK:-$(mktemp -d /tmp/framebus-protocol-fuzz.XXXXXX)}"
mkdir -p "$WORK/src" "$WORK/corpus"
BUS="$ROOT/Sources/FrameBus"

# The subscriber's engineer adds the subscriber state machine's file(s) here (paths relative to Sources/FrameBus).
SUBSCRIBER_SOURCES=()

SOURCES=(
    Protocol/WireCoding.swift Protocol/WireMessage.swift Protocol/WireMessage+Encoding.swift
    Protocol/WireMessage+Decoding.swift Protocol/WireMonitorReport.swift Protocol/WireStatus.swift
    Publisher/StateMachine/PublisherStateMachine.swift 'Publisher/StateMachine/States/*.swift'
    'Publisher/StateMachine/Operations/*.swift' 'Publisher/*Policy.swift' FrameBusError.swift Rings/RingLayout.swift
    Internal/LogLimiter.swift Internal/FourCC.swift Internal/Saturating.swift Internal/PeerText.swift
)
# Entries may be globs (quoted above, expanded here inside Sources/FrameBus).
for pattern in "${SOURCES[@]}" "${SUBSCRIBER_SOURCES[@]}"; do
    for file in "$BUS"/$pattern; do
        sed '/^import Logging$/d; /^import PixelBuffers$/d; /^import SampleBuffers$/d; /^import SystemPackage$/d; /^import Histogram$/d' \
            "$file" > "$WORK/src/$(basename "$file")"
    done
done
cp "$ROOT/Fuzz/Protocol/StandIns.swift" "$WORK/src/"

FLAGS=(-parse-as-library -package-name framebus)
# FUZZ_REUSE=1 with a FUZZ_WORK that already holds a build runs it again; FUZZ_BUILD_ONLY=1 stops after the build
# (.ci/run builds while other phases run).
if [ "${FUZZ_REUSE:-0}" = 1 ] && [ -x "$WORK/fuzz-protocol" ]; then
    echo "reusing the fuzzer in $WORK"
else
echo "building seeds and fuzzer in $WORK"
swiftc -O "${FLAGS[@]}" -module-name ProtocolSeeds "$WORK"/src/*.swift "$ROOT/Fuzz/Protocol/MakeSeeds.swift" \
    -o "$WORK/make-seeds"
"$WORK/make-seeds" "$WORK/corpus"
swiftc -O -g -sanitize=fuzzer,address "${FLAGS[@]}" -module-name FuzzProtocol "$WORK"/src/*.swift \
    "$ROOT/Fuzz/Protocol/FuzzProtocol.swift" "$ROOT/Fuzz/Protocol/FuzzSubscriberHook.swift" -o "$WORK/fuzz-protocol"
fi
if [ "${FUZZ_BUILD_ONLY:-0}" = 1 ]; then echo "built $WORK/fuzz-protocol"; exit 0; fi

echo "fuzzing for $SECONDS_TO_RUN s"
cd "$WORK"
"$WORK/fuzz-protocol" -max_total_time="$SECONDS_TO_RUN" -timeout=10 -rss_limit_mb=2048 -max_len=16384 \
    -print_final_stats=1 "$WORK/corpus"

# The subscriber's state machine depends on the pixel-buffer and codec layers, so it is fuzzed by a sibling target
# built with SwiftPM (Fuzz/Subscriber: wire decoder + SubscriberStateMachine + event queue + outbox), for as long.
echo "fuzzing the subscriber's state machine for $SECONDS_TO_RUN s"
"$ROOT/Fuzz/Subscriber/run.sh" "$SECONDS_TO_RUN"
