"""The Python publisher and codec (through the FrameBus C library) against the Python subscriber."""

import os
import threading
import time

import numpy as np
import pytest

import framebus
from framebus import _native

try:
    _native.library()
    HAVE_LIBRARY = True
except framebus.FrameBusError as error:
    HAVE_LIBRARY = False
    if os.environ.get("FRAMEBUS_REQUIRE_ALL"):
        raise
    pytestmark = pytest.mark.skip(reason=str(error))


def random_frame(fmt, width, height, seed):
    rng = np.random.default_rng(seed)
    if fmt in ("420v", "420f"):
        return [rng.integers(0, 256, (height, width), dtype=np.uint8),
                rng.integers(0, 256, (height // 2, width // 2, 2), dtype=np.uint8)]
    if fmt in ("x420", "xf20"):
        return [(rng.integers(0, 1024, (height, width), dtype=np.uint16) << 6),
                (rng.integers(0, 1024, (height // 2, width // 2, 2), dtype=np.uint16) << 6)]
    return [rng.integers(0, 256, (height, width, 4), dtype=np.uint8)]


def smooth_frame(fmt, width, height, seed):
    """A gradient with a little noise: compressible, as camera frames are."""
    planes = random_frame(fmt, width, height, seed)
    out = []
    for plane in planes:
        ramp = (np.arange(plane.shape[1])[None, :] + np.arange(plane.shape[0])[:, None] + seed)
        if plane.ndim == 3:
            ramp = ramp[:, :, None]
        if plane.dtype == np.uint16:
            out.append((((ramp % 1024) << 6) | (plane & 0x40)).astype(np.uint16))
        else:
            out.append(((ramp % 256) ^ (plane & 1)).astype(np.uint8))
    return out


def publish_while(publisher, frames, stop, interval=0.02):
    def run():
        index = 0
        while not stop.is_set():
            try:
                publisher.publish(*frames[index % len(frames)], presentation_time_ns=index * 33_000_000)
            except framebus.FrameBusError as error:
                if error.code != "outOfBuffers":
                    raise
            index += 1
            time.sleep(interval)
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


@pytest.mark.parametrize("fmt", ["420v", "x420", "BGRA"])
def test_python_publisher_frames_arrive_bit_exact(tmp_path, fmt):
    path = str(tmp_path / "py.sock")
    frames = [random_frame(fmt, 64, 48, seed) for seed in range(4)]
    stop = threading.Event()
    with framebus.Publisher(path, fmt, 64, 48) as publisher:
        thread = publish_while(publisher, frames, stop)
        try:
            with framebus.Subscriber(path, accept=[fmt], queue=2) as bus:
                received = 0
                while received < 6:
                    event = bus.next_event(timeout=10)
                    assert event is not None
                    if isinstance(event, framebus.Frame):
                        with event as frame:
                            index = round(frame.presentation_time * 1000 / 33)
                            # In a comprehension, so no plane outlives the block (a kept plane keeps its frame held).
                            assert all(np.array_equal(got, want)
                                       for got, want in zip(frame.planes, frames[index % len(frames)]))
                        received += 1
        finally:
            stop.set()
            thread.join()


@pytest.mark.parametrize("fmt", ["420v", "x420", "BGRA"])
def test_compressed_frames_decode_bit_exact_whole_and_in_bands(tmp_path, fmt):
    path = str(tmp_path / "pyc.sock")
    compressed = framebus.FORMATS[fmt].compressed_variant
    frames = [smooth_frame(fmt, 320, 240, seed) for seed in range(3)]
    stop = threading.Event()
    with framebus.Publisher(path, fmt, 320, 240, offer=[fmt, compressed]) as publisher:
        thread = publish_while(publisher, frames, stop)
        try:
            with framebus.Subscriber(path, accept=[compressed], queue=2) as bus:
                assert bus.format == compressed
                checked = 0
                while checked < 3:
                    event = bus.next_event(timeout=10)
                    assert event is not None
                    if not isinstance(event, framebus.Frame):
                        continue
                    with event as frame:
                        want = frames[round(frame.presentation_time * 1000 / 33) % len(frames)]
                        assert frame.is_compressed and frame.bytes_used < sum(p.nbytes for p in want)
                        for got, expected in zip(frame.decode(), want):
                            assert np.array_equal(got, expected)
                        rows = []

                        def consume(first_row, planes):
                            rows.append(first_row)
                            height = planes[0].shape[0]
                            assert np.array_equal(planes[0], want[0][first_row:first_row + height])
                        frame.decode_bands(consume, band_rows=64)
                        assert rows[0] == 0 and len(rows) >= 2
                    checked += 1
        finally:
            stop.set()
            thread.join()


def screen_frame(width, height):
    """BGRA with glyph-like marks on a gradient: content where the encoder's two efforts write different bytes."""
    y, x = np.mgrid[0:height, 0:width]
    ink = ((x // 6 + y // 11) % 3 == 0) & (x % 6 < 4) & (y % 11 < 8) & ((x * 5 + y * 3) % 7 < 3)
    frame = np.empty((height, width, 4), dtype=np.uint8)
    for channel in range(4):
        frame[:, :, channel] = np.where(ink, 30 + channel, 230 - y // 40).astype(np.uint8)
    return frame


def first_compressed_frame(publisher, path, planes):
    """Publishes `planes` until a subscriber of the compressed variant has one; its bytes and decoded planes."""
    with framebus.Subscriber(path, accept=["&BGA"], queue=2) as bus:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            event = bus.next_event(timeout=0.05)
            if isinstance(event, framebus.Frame):
                with event as frame:
                    return bytes(frame.compressed_bytes), frame.decode()
            try:
                publisher.publish(*planes)
            except framebus.FrameBusError as error:
                if error.code != "outOfBuffers":
                    raise
    raise AssertionError("no compressed frame arrived")


def test_the_publishers_effort_reaches_its_encoder(tmp_path):
    width, height = 256, 192
    screen = screen_frame(width, height)
    received = {}
    for effort in ("fast", "best"):
        path = str(tmp_path / f"effort-{effort}.sock")
        with framebus.Publisher(path, "BGRA", width, height, offer=["BGRA", "&BGA"], effort=effort) as publisher:
            received[effort] = first_compressed_frame(publisher, path, [screen])
    for effort, (_, decoded) in received.items():
        assert np.array_equal(decoded[0], screen), f"effort {effort}: not bit-exact"
    assert received["best"][0] != received["fast"][0]
    assert len(received["best"][0]) < len(received["fast"][0])
    with pytest.raises(framebus.FrameBusError) as refused:
        framebus.Publisher(str(tmp_path / "bad.sock"), "BGRA", width, height, effort="slow")
    assert refused.value.code == "invalidArgument"


def test_damaged_compressed_bytes_raise_instead_of_crashing():
    fmt = framebus.FORMATS["420v"]
    with pytest.raises(framebus.FrameBusError) as caught:
        planes = random_frame("420v", 64, 48, 0)
        from framebus.subscriber import _native_decode
        garbage = np.frombuffer(os.urandom(4096), dtype=np.uint8)
        _native_decode(garbage, fmt, 64, 48, planes)
    assert caught.value.code in ("corruptData", "unsupportedVersion", "formatMismatch")


@pytest.mark.parametrize("fmt", ["420v", "BGRA"])
def test_frames_written_into_next_buffer_arrive_bit_exact_and_the_planes_lock_after_publishing(tmp_path, fmt):
    path = str(tmp_path / "zero.sock")
    frames = [random_frame(fmt, 64, 48, seed) for seed in range(3)]
    with framebus.Publisher(path, fmt, 64, 48) as publisher:
        with framebus.Subscriber(path, accept=[fmt], queue=4) as bus:
            for index, planes in enumerate(frames):  # one at a time: the publisher may grant a hold of one frame
                with publisher.next_buffer(timeout=10) as frame:
                    assert all(p.flags.writeable for p in frame.planes)
                    for target, source in zip(frame.planes, planes):
                        target[...] = source
                    sequence = publisher.publish(frame, presentation_time_ns=index)
                    assert frame.is_published and not frame.planes[0].flags.writeable
                    with pytest.raises(framebus.FrameBusError):
                        publisher.publish(frame)  # once only
                event = bus.next_event(timeout=30)
                assert isinstance(event, framebus.Frame) and event.sequence == sequence, event
                with event as received:
                    assert all(np.array_equal(got, want) for got, want in zip(received.planes, planes))


def test_a_buffer_left_unpublished_goes_back_to_the_pool(tmp_path):
    path = str(tmp_path / "discard.sock")
    with framebus.Publisher(path, "420v", 64, 48, buffers=(2, 2)) as publisher:
        for _ in range(10):  # more than the pool: each buffer came back
            with publisher.next_buffer() as frame:
                frame.planes[0][...] = 7
        with pytest.raises(RuntimeError):
            with publisher.next_buffer():
                raise RuntimeError("the block failed")
        taken = [publisher.next_buffer(), publisher.next_buffer()]
        with pytest.raises(framebus.FrameBusError) as exhausted:
            publisher.next_buffer()
        assert exhausted.value.code == "outOfBuffers"
        for buffer in taken:
            buffer.discard()
        publisher.next_buffer().discard()
