"""A Python publisher's unpaced frames/s: zero-copy `next_buffer()` against the copying `publish(arrays)`, as a
same-run ratio.

    python3 python/benchmarks/publish.py [--rounds 3] [--frames 2000] [--size 1920x1080] [--framebus PATH]

A `framebus subscribe` process (latest-only) consumes; each round runs both paths, alternating, each publishing
`--frames` frames of 420v as fast as buffers come free (`next_buffer(timeout=None)`): the copying path copies a
prepared Y and CbCr pair into its buffer (`publish(y, cbcr)`), the zero-copy path writes an 8-byte stamp into the
buffer's Y plane, as a producer that renders into the buffer itself does. Prints frames/s and CPU per frame of
each, and their ratio.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]


def run(publisher, frames: int, zero_copy: bool, planes) -> tuple[float, float]:
    cpu, start = time.process_time(), time.perf_counter()
    for index in range(frames):
        if zero_copy:
            with publisher.next_buffer(timeout=None) as frame:
                frame.planes[0][0, :8] = np.frombuffer(index.to_bytes(8, "little"), np.uint8)
                publisher.publish(frame)
        else:
            while True:
                try:
                    publisher.publish(*planes)
                    break
                except Exception as error:  # outOfBuffers: wait for a release, as next_buffer(timeout=None) does
                    if getattr(error, "code", "") != "outOfBuffers":
                        raise
                    time.sleep(0.0002)
    elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
    return frames / elapsed, cpu / frames * 1e6


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--frames", type=int, default=2000)
    parser.add_argument("--size", default="1920x1080")
    parser.add_argument("--framebus", default=str(ROOT / ".build" / "release" / "framebus"))
    arguments = parser.parse_args()
    os.environ.setdefault("FRAMEBUS_LIBRARY", str(Path(arguments.framebus).resolve().parent / "libFrameBusC.so"))
    import framebus

    width, height = (int(v) for v in arguments.size.split("x"))
    path = str(Path(tempfile.mkdtemp(prefix="framebus-pub-")) / "pub.sock")
    planes = [np.full((height, width), 16, np.uint8), np.full((height // 2, width // 2, 2), 128, np.uint8)]
    with framebus.Publisher(path, "420v", width, height, buffers=(8, 8)) as publisher:
        consumer = subprocess.Popen([arguments.framebus, "subscribe", "--path", path],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 30
            while publisher.statistics["subscriber_count"] < 1:
                if time.monotonic() > deadline:
                    raise RuntimeError("the consumer did not subscribe")
                time.sleep(0.05)
            results = {"copying publish(y, cbcr)": [], "zero-copy next_buffer()": []}
            for _ in range(arguments.rounds):
                results["copying publish(y, cbcr)"].append(run(publisher, arguments.frames // 10, False, planes))
                results["zero-copy next_buffer()"].append(run(publisher, arguments.frames, True, planes))
            for name, values in results.items():
                print(f"{name:26} frames/s median {statistics.median(v[0] for v in values):9.0f}   "
                      f"CPU µs/frame median {statistics.median(v[1] for v in values):8.1f}   "
                      f"(rounds: {', '.join(f'{v[0]:.0f}' for v in values)})")
            ratios = [z[0] / c[0] for c, z in zip(results["copying publish(y, cbcr)"],
                                                    results["zero-copy next_buffer()"])]
            print(f"zero-copy / copying frames/s per round: {', '.join(f'{r:.1f}x' for r in ratios)}")
        finally:
            consumer.terminate()
            consumer.wait(30)


if __name__ == "__main__":
    main()
