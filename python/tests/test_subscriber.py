"""The Python subscriber against a real `framebus publish` process."""

import hashlib
import json
import os
import select
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

import framebus
from conftest import ROOT

pytestmark = pytest.mark.usefixtures("each_engine")

CHECKSUMS = json.loads((ROOT / "Corpus" / "checksums.json").read_text())["frames"]


def reference_hashes(fmt: str, names) -> set:
    return {f["sha256"] for f in CHECKSUMS if f["format"] == fmt and f["image"].split("/")[-1] in names}


def packed(frame: framebus.Frame) -> bytes:
    """The frame's planes without row padding, in the reference converter's layout."""
    return b"".join(np.ascontiguousarray(plane).tobytes() for plane in frame.planes)


def frames(subscriber, count, timeout=30.0):
    deadline = time.monotonic() + timeout
    while count and time.monotonic() < deadline:
        event = subscriber.next_event(timeout=1.0)
        if isinstance(event, framebus.Frame):
            count -= 1
            yield event
        elif isinstance(event, framebus.EndOfStream):
            return


@pytest.mark.parametrize("fmt", ["420v", "420f", "x420", "BGRA"])
def test_planes_are_bit_exact_with_the_reference_conversion(publish, kodak, fmt):
    publisher = publish("--images", str(kodak), "--format", fmt, "--fps", "30")
    expected = reference_hashes(fmt, {"kodim01.png", "kodim02.png", "kodim03.png"})
    assert len(expected) == 3
    seen = set()
    with framebus.Subscriber(str(publisher.path), accept=[fmt], queue=4) as bus:
        assert bus.format == fmt
        for frame in frames(bus, 6):
            with frame:
                digest = hashlib.sha256(packed(frame)).hexdigest()
                assert digest in expected, f"frame {frame.sequence} is not bit-exact"
                seen.add(digest)
    assert len(seen) == 3


def test_planes_are_read_only_zero_copy_views(publish):
    publisher = publish("--size", "64x48", "--format", "420v", "--fps", "60")
    with framebus.Subscriber(str(publisher.path), accept=["420v"]) as bus:
        frame = next(frames(bus, 1))
        luma, chroma = frame.planes
        assert luma.shape == (48, 64) and chroma.shape == (24, 32, 2)
        assert luma.strides[0] >= 64 and chroma.strides[1:] == (2, 1)
        assert not luma.flags.writeable and not luma.flags.owndata
        with pytest.raises(ValueError):
            luma[0, 0] = 1
        frame.release()
        with pytest.raises(framebus.FrameBusError):
            frame.planes


def accounted(events):
    """Every sequence between the first and last event is either a frame or inside a drop range, exactly once."""
    covered = []
    for event in events:
        if isinstance(event, framebus.Frame):
            covered.append((event.sequence, event.sequence))
        elif isinstance(event, framebus.Dropped):
            covered.append((event.first, event.last))
    for (_, last), (first, _) in zip(covered, covered[1:]):
        assert first == last + 1, f"gap or overlap between {last} and {first}"


def test_a_consumer_that_holds_its_frames_is_told_out_of_buffers(publish):
    publisher = publish("--size", "64x48", "--fps", "100")
    with framebus.Subscriber(str(publisher.path), accept=["420v"], queue=2) as bus:
        kept, events = [], []
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            event = bus.next_event(timeout=1.0)
            events.append(event)
            if isinstance(event, framebus.Frame):
                kept.append(event)  # never released: this consumer hoards
            if isinstance(event, framebus.Dropped) and event.reason == "outOfBuffers" and event.count > 5:
                break
        assert len(kept) == bus.maximum_held_frames
        drops = [e for e in events if isinstance(e, framebus.Dropped)]
        assert drops and all(d.reason == "outOfBuffers" for d in drops)
        accounted(events)
        for frame in kept:
            frame.release()
        assert next(frames(bus, 1), None) is not None  # released frames make room again


def test_a_slow_latest_only_consumer_sees_late_frames(publish):
    publisher = publish("--size", "64x48", "--fps", "200")
    with framebus.Subscriber(str(publisher.path), accept=["420v"]) as bus:
        events = []
        while not any(isinstance(e, framebus.Dropped) and e.reason == "frameWasLate" for e in events):
            time.sleep(0.05)  # slower than the publisher: frames pile up and the newest wins
            event = bus.next_event(timeout=5.0)
            assert event is not None
            events.append(event)
            if isinstance(event, framebus.Frame):
                event.release()
            assert len(events) < 500
        accounted(events)


def test_frames_a_latest_only_consumer_missed_in_a_row_come_as_one_drop(publish):
    """While the consumer works, every frame but the newest becomes late: they arrive as one frameWasLate drop over
    their range (as the C library's queue merges them), not one event per frame missed."""
    publisher = publish("--size", "64x48", "--fps", "200")
    with framebus.Subscriber(str(publisher.path), accept=["420v"]) as bus:
        events = []
        deadline = time.monotonic() + 30
        while not any(isinstance(e, framebus.Dropped) and e.reason == "frameWasLate" and e.count > 1 for e in events):
            assert time.monotonic() < deadline, events[-20:]
            time.sleep(0.1)  # a publisher at 200 Hz sends several frames meanwhile (as many as we may hold)
            event = bus.next_event(timeout=5.0)
            assert event is not None and not isinstance(event, framebus.EndOfStream), event
            events.append(event)
            if isinstance(event, framebus.Frame):
                event.release()
        accounted(events)


def test_a_latest_only_consumer_that_spends_time_on_each_drop_still_gets_frames(publish):
    """A consumer slower than the stream that works a while after every event, drops included: the frame behind a
    drop it took is promised (not replaced while it handles the drop), so about every other event is a frame. Before,
    each drop took long enough for the frame behind it to be replaced behind a new drop: it got almost only drops."""
    # 60 Hz: three frames come while the consumer works, fewer than the frames it may hold, so the pure-Python
    # engine (which reads its socket only when asked for an event) is not also sent outOfBuffers drops.
    publisher = publish("--size", "64x48", "--fps", "60")
    with framebus.Subscriber(str(publisher.path), accept=["420v"]) as bus:
        events = []
        while len(events) < 40:
            event = bus.next_event(timeout=5.0)
            assert event is not None and not isinstance(event, framebus.EndOfStream), event
            events.append(event)
            if isinstance(event, framebus.Frame):
                event.release()
            time.sleep(0.05)  # the consumer's work, after a drop as after a frame
        frames_taken = sum(isinstance(e, framebus.Frame) for e in events)
        assert frames_taken >= 10, [type(e).__name__ for e in events]
        accounted(events)


def test_the_end_of_stream_ends_iteration(publish):
    publisher = publish("--size", "64x48", "--fps", "30")
    with framebus.Subscriber(str(publisher.path), accept=["420v"]) as bus:
        assert next(frames(bus, 1), None) is not None
        publisher.stop()
        events = list(bus)
        assert isinstance(events[-1], framebus.EndOfStream) and events[-1].reason == "stopped"


def held_by(monitor, pid, want, timeout=20.0):
    """Waits for the publisher's monitor report to show `want` frames held by process `pid` (None: not connected;
    "some": at least one; an int: at least that many, as a report may predate the last frames taken)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        report = monitor.next_report()
        records = [r for r in report.subscribers if r.process_id == pid]
        held = records[0].held if records else None
        if held == want or (want == "some" and held) or (isinstance(want, int) and held is not None and held >= want):
            return held
    raise AssertionError(f"process {pid} never held {want} frames")


def next_kind(bus, kinds, seconds):
    """The first event of one of `kinds` within `seconds`, or None; other events are collected and returned too."""
    others, deadline = [], time.monotonic() + seconds
    while time.monotonic() < deadline:
        event = bus.next_event(timeout=0.1)
        if isinstance(event, kinds):
            return event, others
        if event is not None:
            others.append(event)
    return None, others


def test_a_kept_plane_keeps_its_frame_held(publish):
    # A consumer that keeps a slice of a plane (as one batching frames for a model would) and drops the frame
    # object must keep the frame held. With the subscriber's whole holding limit in use (the kept slice plus
    # frames kept on purpose) the publisher can send nothing but outOfBuffers drops; when the slice goes, the
    # frame is released and frames flow again.
    publisher = publish("--size", "64x48", "--fps", "60")
    with framebus.Subscriber(str(publisher.path), accept=["420v"], queue=2) as bus:
        frame = next(frames(bus, 1))
        luma = frame.planes[0][8:16]
        snapshot = luma.copy()
        del frame  # no gc.collect(): frames and their planes form no cycle, so nothing waits for the collector
        others = list(frames(bus, bus.maximum_held_frames - 1))  # kept: now every frame we may hold is taken
        assert len(others) == bus.maximum_held_frames - 1
        arrived, events = next_kind(bus, framebus.Frame, 2.0)
        assert arrived is None, "a frame arrived although the kept slice should pin its frame"
        assert any(isinstance(e, framebus.Dropped) and e.reason == "outOfBuffers" for e in events)
        assert np.array_equal(luma, snapshot)
        del luma
        arrived, _ = next_kind(bus, framebus.Frame, 10.0)
        assert arrived is not None, "dropping the last view of the plane did not release the frame"


HOARDER = """
import sys, time
sys.path.insert(0, sys.argv[2])
import framebus
bus = framebus.Subscriber(sys.argv[1], accept=["420v"], queue=4)
kept = []
deadline = time.monotonic() + 60
while len(kept) < bus.maximum_held_frames and time.monotonic() < deadline:
    event = bus.next_event(timeout=1)
    if isinstance(event, framebus.Frame):
        kept.append(event)
print("holding", len(kept), flush=True)
time.sleep(600)
"""


def test_a_consumer_killed_with_sigkill_releases_its_frames(publish):
    publisher = publish("--size", "64x48", "--fps", "60")
    with framebus.Monitor(str(publisher.path)) as monitor:
        child = subprocess.Popen([sys.executable, "-c", HOARDER, str(publisher.path), str(ROOT / "python")],
                                 stdout=subprocess.PIPE)
        try:
            ready, _, _ = select.select([child.stdout], [], [], 90)
            assert ready, "the hoarding child never started holding"
            line = child.stdout.readline().split()
            assert line[:1] == [b"holding"] and int(line[1]) >= 1
            assert held_by(monitor, child.pid, int(line[1])) >= int(line[1])
            child.send_signal(signal.SIGKILL)
            child.wait()
            assert held_by(monitor, child.pid, None) is None  # gone, and everything it held with it
            report = monitor.next_report()
            assert sum(r.held for r in report.subscribers) == 0
        finally:
            if child.poll() is None:
                child.kill()


def test_the_readme_example_runs(publish):
    publisher = publish("--size", "320x240", "--fps", "30")
    output = subprocess.run(
        [sys.executable, str(ROOT / "python" / "examples" / "luma.py"), str(publisher.path), "5"],
        env={**os.environ, "PYTHONPATH": str(ROOT / "python")}, capture_output=True, text=True, timeout=60,
    )
    assert output.returncode == 0, output.stderr
    lines = [line for line in output.stdout.splitlines() if line.startswith("frame ")]
    assert lines and "mean luma" in lines[0] and "histogram" in lines[0]
