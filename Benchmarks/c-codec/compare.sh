#!/usr/bin/env bash
# Decodes the same frames through two builds of libFrameBusC.so (OLD_LIBDIR, NEW_LIBDIR: directories holding one),
# alternately in one session, ROUNDS rounds per size, and prints every run and the median CPU time per frame of
# each with the ratio old/new.
#
#   Benchmarks/c-codec/compare.sh OLD_LIBDIR NEW_LIBDIR [ROUNDS] [FRAMES_1080P] [FORMAT]
#
# Build the benchmark first: make -C Benchmarks/c-codec FRAMEBUS_LIBDIR=NEW_LIBDIR
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
old="${1:?OLD_LIBDIR}"
new="${2:?NEW_LIBDIR}"
rounds="${3:-5}"
frames="${4:-200}"
format="${5:-420v}"
binary="$here/build/c-codec-decode"
[ -x "$binary" ] || { echo "compare.sh: build $binary first (make -C Benchmarks/c-codec)" >&2; exit 1; }

median() { sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

for size in 1920x1080 3840x2160; do
    count=$frames
    [ "$size" = 3840x2160 ] && count=$((frames / 4))
    : > "/tmp/c-codec-old.$$"
    : > "/tmp/c-codec-new.$$"
    for round in $(seq "$rounds"); do
        for which in old new; do
            dir=$old
            [ "$which" = new ] && dir=$new
            line="$(LD_LIBRARY_PATH="$dir" "$binary" "$format" "$size" "$count")"
            echo "$which round $round: $line"
            echo "$line" | sed -n 's/.* cpu_us=\([0-9.]*\) .*/\1/p' >> "/tmp/c-codec-$which.$$"
        done
    done
    o="$(median < "/tmp/c-codec-old.$$")"
    n="$(median < "/tmp/c-codec-new.$$")"
    echo "$format $size: median CPU per decode old ${o} us, new ${n} us, old/new $(echo "scale=3; $o / $n" | bc)"
    rm -f "/tmp/c-codec-old.$$" "/tmp/c-codec-new.$$"
done
