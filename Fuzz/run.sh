#!/usr/bin/env bash
# Fuzz the compressed-surface decoder with libFuzzer and AddressSanitizer for SECONDS (default 60).
#
#   Fuzz/run.sh [SECONDS]
#
# Builds the decoder's sources (Sources/SurfaceCompression, without the pixel-buffer layer, and the C kernels
# of Sources/CSurfaceCodecKernels) together with Fuzz/FuzzDecoder.swift using `swiftc -sanitize=fuzzer,address`, seeds the corpus with valid surfaces of
# every format and tile mode (Fuzz/MakeSeeds.swift), and runs. Exits non-zero if the fuzzer finds a crash,
# an out-of-bounds access, a leak or a timeout; the reproducer is left in the work directory it prints.
set -euo pipefail
SECONDS_TO_RUN="${1:-60}"
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
WORK="${FUZZ_WORK:-$(mktemp -d /tmp/framebus-fuzz.XXXXXX)}"
mkdir -p "$WORK/corpus"
. "$ROOT/Fuzz/stage-decoder.sh"

CLZ4="-I $ROOT/Sources/CLZ4 -I $ROOT/Sources/CZstd"
KERNELS="-I $ROOT/Sources/CSurfaceCodecKernels/include"
# FUZZ_REUSE=1 with a FUZZ_WORK that already holds a build runs it again (a second run with another
# FRAMEBUS_CODEC_KERNELS tier needs no new build: the tier is picked at run time).
if [ "${FUZZ_REUSE:-0}" = 1 ] && [ -x "$WORK/fuzz-decoder" ]; then
    echo "reusing the fuzzer in $WORK"
else
echo "building seeds and fuzzer in $WORK"
# Every kernel tier's file (kernels.c: AVX2; kernels_sse41.c; kernels_neon.c, empty on x86-64). The decoder runs
# the best tier this processor has; FRAMEBUS_CODEC_KERNELS=sse41|portable|... picks another (docs/BENCHMARKS.md).
mkdir -p "$WORK/plain" "$WORK/asan"
for source in "$ROOT"/Sources/CSurfaceCodecKernels/*.c; do
    name="$(basename "$source" .c)"
    clang -O2 -g -c $KERNELS "$source" -o "$WORK/plain/$name.o"
    clang -O2 -g -fsanitize=address,fuzzer-no-link -c $KERNELS "$source" -o "$WORK/asan/$name.o"
done
swiftc -O -module-name FuzzSeeds -package-name framebus -parse-as-library $CLZ4 $KERNELS "$WORK"/src/*.swift "$WORK"/plain/*.o \
    "$ROOT/Fuzz/MakeSeeds.swift" -o "$WORK/make-seeds"
# Coded literals and coded sequences wherever smaller (not only 6 % or 3 % smaller, and in any tile): the small seeds
# would otherwise have none.
FRAMEBUS_CODEC_CODED_SAVING=0 FRAMEBUS_CODEC_SEQUENCE_SAVING=0 FRAMEBUS_CODEC_CODED_RATIO=1 "$WORK/make-seeds" "$WORK/corpus"
swiftc -O -g -sanitize=fuzzer,address -parse-as-library -package-name framebus -module-name FuzzDecoder $CLZ4 $KERNELS \
    "$WORK"/src/*.swift "$WORK"/asan/*.o "$ROOT/Fuzz/FuzzDecoder.swift" -o "$WORK/fuzz-decoder"
fi

# FUZZ_BUILD_ONLY=1 stops here (.ci/run builds while other phases run, then fuzzes with FUZZ_REUSE=1).
if [ "${FUZZ_BUILD_ONLY:-0}" = 1 ]; then echo "built $WORK/fuzz-decoder"; exit 0; fi
echo "fuzzing for $SECONDS_TO_RUN s"
cd "$WORK"
"$WORK/fuzz-decoder" -max_total_time="$SECONDS_TO_RUN" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
    -print_final_stats=1 "$WORK/corpus"
