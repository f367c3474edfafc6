"""What a latest-only Python subscriber pays for the frames it is too slow to take: its drop events.

    python3 python/benchmarks/drops.py [--frames 300] [--work-us 2000] [--rounds 3] [--fps 0] [--package DIR]...
        [--engines native,python,bare] [--framebus PATH]

Starts a release `framebus publish --size 320x180 --fps FPS` (0, the default: unpaced, a late frame for every few
microseconds of the consumer's work) and, for each engine and each package directory given (default: this checkout's; give two,
say a copy of an older version and this one, to compare them), a consumer process: a latest-only
`framebus.Subscriber` that takes `--frames` frames (after 20 of warm-up), busy for `--work-us` microseconds of its
own after each, as an analysis of the picture would be (`bare`: no package, the C library through ctypes alone, its
cost for the same events; latest-only too). It prints, per consumer, the drop events and the frames
they report per frame taken, and the CPU its thread spent in `next_event` (frames, drops and the frames' release)
per frame taken and per drop event. Consumers run one after the other, alternating, `--rounds` times; a loaded
machine spreads every figure: read the figures of one round against each other.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

CONSUMER = r"""
import ctypes, json, sys, time
import framebus
from framebus import _native
path, engine, frames, work_ns = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]) * 1000
cpu = time.thread_time_ns
taken = drop_events = dropped = 0
spent = spent_drops = 0
reasons = {}
warm = 20

def work():
    end = cpu() + work_ns
    while cpu() < end:  # the consumer's own work on the frame
        pass

def count_drop(elapsed, reason, frames_dropped):
    global spent, spent_drops, drop_events, dropped
    if taken >= warm:
        spent += elapsed
        spent_drops += elapsed
        drop_events += 1
        dropped += frames_dropped
        reasons[reason] = reasons.get(reason, 0) + 1

if engine == "bare":  # the C library alone, through ctypes: what any Python consumer of it pays at least
    lib = _native.library()
    options = _native.SubscriberOptions()
    lib.fb_subscriber_options_init(ctypes.byref(options))
    formats = (ctypes.c_uint32 * 1)(framebus.FORMATS["420v"].code)
    options.path, options.accepted_formats, options.accepted_format_count = path.encode(), formats, 1
    options.queue_depth = 0  # latest-only
    handle, error = ctypes.c_void_p(), _native.Error()
    _native.check(lib.fb_subscriber_create(ctypes.byref(options), ctypes.byref(handle), ctypes.byref(error)), error)
    event, info = _native.Event(), _native.FrameInfo()
    call, release, handle = lib.fb_subscriber_next_event_info, lib.fb_frame_release, handle.value
    refs = (ctypes.byref(event), ctypes.byref(info), ctypes.byref(error))
    while taken < frames + warm:
        before = cpu()
        if call(handle, 5_000_000_000, *refs) != 0:
            sys.exit(f"fb_subscriber_next_event_info: {error.message}")
        if event.type == 2:
            release(event.frame)
            after = cpu()
            taken += 1
            if taken > warm:
                spent += after - before
            work()
        elif event.type == 3:
            count_drop(cpu() - before, event.drop.reason, event.drop.last_sequence - event.drop.first_sequence + 1)
    lib.fb_subscriber_destroy(handle)
else:
    with framebus.Subscriber(path, accept=["420v"], queue=None, wait=True, timeout=30, engine=engine) as bus:
        engine = bus.engine
        while taken < frames + warm:
            before = cpu()
            event = bus.next_event(5)
            if isinstance(event, framebus.Frame):
                event.release()
                after = cpu()
                taken += 1
                if taken > warm:
                    spent += after - before
                work()
            elif isinstance(event, framebus.Dropped):
                count_drop(cpu() - before, event.reason, event.count)
            elif event is None or isinstance(event, framebus.EndOfStream):
                sys.exit(f"no frame: {event}")
print(json.dumps({"engine": engine, "taken": frames, "drop_events": drop_events, "dropped": dropped,
                  "cpu_ns": spent, "drop_cpu_ns": spent_drops, "reasons": reasons}))
"""

CONVERT = r"""
import json, sys, timeit
from framebus import _native, _poller
subscriber = _poller.NativeSubscriber.__new__(_poller.NativeSubscriber)
event = subscriber._event = _native.Event()
subscriber._drop = _native.Drop.from_buffer(event, _native.Event.payload.offset)
subscriber._accepts_dma_buf, subscriber._next_info = True, None
event.type, event.drop.reason, event.drop.first_sequence, event.drop.last_sequence = _poller.EVENT_DROP, 1, 5, 9
convert = subscriber._convert
assert convert().last == 9
count = 100_000
print(json.dumps({"ns": min(timeit.repeat(convert, number=count, repeat=5)) / count * 1e9}))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--frames", type=int, default=300)
    parser.add_argument("--work-us", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--fps", default="0", help="the publisher's rate (0: unpaced)")
    parser.add_argument("--package", action="append", help="a directory holding the framebus package")
    parser.add_argument("--engines", default="native,python,bare")
    parser.add_argument("--framebus", default=str(ROOT / ".build" / "release" / "framebus"))
    parser.add_argument("--convert", action="store_true", help="time the Python part of a native drop event")
    arguments = parser.parse_args()
    packages = arguments.package or [str(ROOT / "python")]
    if arguments.convert:
        times: dict[str, list[float]] = {}
        for round_index in range(arguments.rounds):
            for package in packages:
                output = subprocess.run([sys.executable, "-c", CONVERT], env={**os.environ, "PYTHONPATH": package},
                                        capture_output=True, text=True, timeout=300, check=True)
                times.setdefault(package, []).append(json.loads(output.stdout)["ns"])
                print(f"round {round_index + 1} {package}: {times[package][-1]:.0f} ns per drop event", flush=True)
        for package, values in times.items():
            print(f"median {package}: {statistics.median(values):.0f} ns per drop event")
        return
    with tempfile.TemporaryDirectory() as directory:
        path = os.path.join(directory, "drops.sock")
        publisher = subprocess.Popen([arguments.framebus, "publish", "--path", path, "--quiet", "--size", "320x180",
                                      "--fps", arguments.fps], stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + 30
            while not os.path.exists(path):
                if publisher.poll() is not None or time.monotonic() > deadline:
                    sys.exit("framebus publish did not start")
                time.sleep(0.05)
            results: dict[tuple[str, str], list[dict]] = {}
            for round_index in range(arguments.rounds):
                for engine in arguments.engines.split(","):
                    for package in packages:
                        output = subprocess.run(
                            [sys.executable, "-c", CONSUMER, path, engine, str(arguments.frames),
                             str(arguments.work_us)],
                            env={**os.environ, "PYTHONPATH": package}, capture_output=True, text=True, timeout=300)
                        if output.returncode != 0:
                            sys.exit(f"consumer {engine} {package} failed: {output.stderr}")
                        result = json.loads(output.stdout)
                        results.setdefault((engine, package), []).append(result)
                        print(f"round {round_index + 1} {engine:6} {package}: {describe(result)}", flush=True)
            print("medians:")
            for (engine, package), rounds in results.items():
                median = {key: statistics.median(r[key] for r in rounds) for key in ("drop_events", "dropped",
                                                                                       "cpu_ns", "drop_cpu_ns")}
                print(f"  {engine:6} {package}: {describe({**rounds[0], **median})}")
        finally:
            publisher.terminate()
            publisher.wait(30)


def describe(result: dict) -> str:
    taken = result["taken"]
    events = max(result["drop_events"], 1)
    return (f"{result['drop_events'] / taken:.2f} drop events and {result['dropped'] / taken:.1f} frames dropped "
            f"per frame taken; next_event CPU {result['cpu_ns'] / taken / 1000:.1f} us per frame taken "
            f"of which drop events {result['drop_cpu_ns'] / events / 1000:.1f} us each; {result['reasons']}")


if __name__ == "__main__":
    main()
