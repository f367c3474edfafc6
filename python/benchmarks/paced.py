"""Where a paced frame's latency goes in Python: the same publisher, four consumers of the same C library, as
same-run figures.

    python3 python/benchmarks/paced.py [--rates 100,1000] [--frames 300] [--rounds 3] [--framebus PATH]

Starts a release `framebus publish --size 1920x1080 --fps RATE` and, alternating in each round, takes `--frames`
frames (after 20 of warm-up) with:

- `c`: a C program (Benchmarks/c-subscriber's c-subscriber-latency, built here): fb_subscriber_next_event, the
  clock, fb_frame_get_info, fb_frame_release;
- `python-bare`: this interpreter with nothing but ctypes: fb_subscriber_next_event_info, the clock, then
  fb_frame_release (no package objects: what any Python consumer of the library pays);
- `python-package`: `framebus.Subscriber.next_event` and `Frame.release` on the main thread;
- `python-package-thread`: the same on a second thread while the main thread blocks in a socket's `recv`, as
  `framebus bench bus`'s Python peer does (the interpreter's lock is handed between threads only if the main
  thread wants it: it should not).

Each prints its p50 one-way latency (publisher's send to the frame in hand, CLOCK_MONOTONIC) and the consumer
process's CPU per frame. Every consumer is a process of its own, started fresh. A loaded machine spreads every
figure: read the figures of one round against each other.
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

ROOT = Path(__file__).resolve().parents[2]

CONSUMER = r"""
import ctypes, os, socket, statistics, sys, threading, time
import framebus
from framebus import _native
path, kind, frames = sys.argv[1], sys.argv[2], int(sys.argv[3])
clock, MONOTONIC = time.clock_gettime_ns, time.CLOCK_MONOTONIC
latencies = []

def bare():
    lib = _native.library()
    options = _native.SubscriberOptions()
    lib.fb_subscriber_options_init(ctypes.byref(options))
    formats = (ctypes.c_uint32 * 1)(framebus.FORMATS["420v"].code)
    options.path, options.accepted_formats, options.accepted_format_count = path.encode(), formats, 1
    handle, error = ctypes.c_void_p(), _native.Error()
    _native.check(lib.fb_subscriber_create(ctypes.byref(options), ctypes.byref(handle), ctypes.byref(error)), error)
    handle = handle.value
    event, info = _native.Event(), _native.FrameInfo()
    call, release = lib.fb_subscriber_next_event_info, lib.fb_frame_release
    refs = (ctypes.byref(event), ctypes.byref(info), ctypes.byref(error))
    seen = 0
    while len(latencies) < frames:
        status = call(handle, 5_000_000_000, *refs)
        now = clock(MONOTONIC)
        if status != 0:
            sys.exit(f"fb_subscriber_next_event_info: {error.message}")
        if event.type == 2:
            seen += 1
            if seen == 20:
                begin()
            elif seen > 20:
                latencies.append(now - info.publish_time_ns)
            release(event.frame)

def package():
    seen = 0
    with framebus.Subscriber(path, accept=["420v"], timeout=10) as bus:
        while len(latencies) < frames:
            event = bus.next_event(5.0)
            if isinstance(event, framebus.Frame):
                seen += 1
                if seen == 20:
                    begin()
                elif seen > 20:
                    latencies.append(event.received_time_ns - event.publish_time_ns)
                event.release()
            elif event is None or isinstance(event, framebus.EndOfStream):
                sys.exit(f"no frame: {event}")

cpu = [0]
def begin():
    cpu[0] = time.process_time_ns()

if kind == "python-bare":
    bare()
elif kind == "python-package":
    package()
else:
    a, b = socket.socketpair()
    thread = threading.Thread(target=lambda: (package(), a.send(b"x")))
    thread.start()
    b.recv(1)  # the main thread blocks here, as the bench peer's does in its control socket
    thread.join()
used = time.process_time_ns() - cpu[0]
print(f"p50 {statistics.median(latencies) / 1e3:.1f} cpu {used / len(latencies) / 1e3:.1f}")
"""


def run_c(program: Path, path: Path, frames: int) -> tuple[float, float]:
    result = subprocess.run([str(program), str(path), str(frames)], capture_output=True, text=True, timeout=600)
    words = result.stdout.split()
    if result.returncode != 0 or "p50" not in words:
        raise RuntimeError(f"c-subscriber-latency failed: {result.stderr[-300:]}")
    return float(words[words.index("p50") + 1]), float(words[words.index("CPU") + 1])


def run_python(kind: str, path: Path, frames: int, env) -> tuple[float, float]:
    result = subprocess.run([sys.executable, "-c", CONSUMER, str(path), kind, str(frames)], capture_output=True,
                            text=True, timeout=600, env=env)
    words = result.stdout.split()
    if result.returncode != 0 or "p50" not in words:
        raise RuntimeError(f"{kind} failed: {result.stderr[-300:]}")
    return float(words[1]), float(words[3])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rates", default="100,1000")
    parser.add_argument("--frames", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--framebus", default=str(ROOT / ".build" / "release" / "framebus"))
    arguments = parser.parse_args()
    build = Path(arguments.framebus).resolve().parent
    env = {**os.environ, "FRAMEBUS_LIBRARY": os.environ.get("FRAMEBUS_LIBRARY", str(build / "libFrameBusC.so"))}
    scratch = Path(tempfile.mkdtemp(prefix="framebus-paced-"))
    subprocess.run(["make", "-s", "-C", str(ROOT / "Benchmarks" / "c-subscriber"), f"BUILD_DIR={scratch}",
                    f"FRAMEBUS_LIBDIR={build}"], check=True)
    program = scratch / "c-subscriber-latency"
    kinds = ["c", "python-bare", "python-package", "python-package-thread"]
    for rate in (int(r) for r in arguments.rates.split(",")):
        path = scratch / f"paced-{rate}.sock"
        publisher = subprocess.Popen([arguments.framebus, "publish", "--path", str(path), "--quiet", "--size",
                                      "1920x1080", "--fps", str(rate)])
        try:
            deadline = time.monotonic() + 60
            while not path.exists():
                if time.monotonic() > deadline:
                    raise RuntimeError("no publisher socket")
                time.sleep(0.05)
            figures: dict[str, list[tuple[float, float]]] = {kind: [] for kind in kinds}
            for _ in range(arguments.rounds):
                for kind in kinds:
                    figures[kind].append(run_c(program, path, arguments.frames) if kind == "c" else
                                         run_python(kind, path, arguments.frames, env))
            print(f"{rate} Hz, {arguments.frames} frames per consumer, {arguments.rounds} rounds: "
                  "p50 µs [per round], CPU µs per frame [per round]")
            for kind, values in figures.items():
                print(f"  {kind:22} p50 {statistics.median(v[0] for v in values):7.1f} "
                      f"[{', '.join(f'{v[0]:.1f}' for v in values)}]   CPU {statistics.median(v[1] for v in values):7.1f} "
                      f"[{', '.join(f'{v[1]:.1f}' for v in values)}]", flush=True)
        finally:
            publisher.terminate()
            publisher.wait(30)


if __name__ == "__main__":
    main()
