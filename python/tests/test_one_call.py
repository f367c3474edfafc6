"""The C library's one-call functions for bindings (fb_subscriber_next_event_info, fb_publisher_acquire_buffer_info)
called directly, and the Python paths over them against the two-call paths an older library leaves: the same
frames, the same pixels, the same errors. A Python publisher (the C library's) in this process, subscribers of the
same library; every wait has a time limit."""

import ctypes
import os

import numpy as np
import pytest

import framebus
from framebus import _native

try:
    LIB = _native.library()
except framebus.FrameBusError as error:
    if os.environ.get("FRAMEBUS_REQUIRE_ALL"):
        raise
    pytestmark = pytest.mark.skip(reason=str(error))
    LIB = None

FRAME, INVALID_ARGUMENT, TIMED_OUT, OUT_OF_BUFFERS = 2, 1, 8, 11
SECOND = 1_000_000_000


def raw_subscriber(path: str):
    """A subscriber of the C library, without the Python engine: (handle, the accepted formats kept alive)."""
    options = _native.SubscriberOptions()
    LIB.fb_subscriber_options_init(ctypes.byref(options))
    formats = (ctypes.c_uint32 * 1)(framebus.FORMATS["420v"].code)
    options.path, options.accepted_formats, options.accepted_format_count = path.encode(), formats, 1
    options.queue_depth = 2
    handle, error = ctypes.c_void_p(), _native.Error()
    _native.check(LIB.fb_subscriber_create(ctypes.byref(options), ctypes.byref(handle), ctypes.byref(error)), error)
    return handle.value, formats


def publish_one(publisher, value: int) -> int:
    with publisher.next_buffer(timeout=10) as buffer:
        for plane in buffer.planes:
            plane[...] = value
        return publisher.publish(buffer)


def test_next_event_info_describes_the_frame_as_get_info_does_and_leaves_other_outcomes_alone(tmp_path):
    path = str(tmp_path / "info.sock")
    with framebus.Publisher(path, "420v", 64, 48) as publisher:
        handle, _formats = raw_subscriber(path)
        try:
            event, error = _native.Event(), _native.Error()
            info = _native.FrameInfo()
            # NULL info: refused before anything is waited for (a 10 s limit that must not be used).
            assert LIB.fb_subscriber_next_event_info(handle, 10 * SECOND, ctypes.byref(event), None,
                                                     ctypes.byref(error)) == INVALID_ARGUMENT
            assert b"info is NULL" in error.message
            sequence, frames = None, 0
            for _ in range(200):  # CONNECTED, then the frame (a bounded number of calls, each at most 10 s)
                ctypes.memset(ctypes.byref(info), 0xA5, ctypes.sizeof(info))
                status = LIB.fb_subscriber_next_event_info(handle, 10 * SECOND, ctypes.byref(event),
                                                           ctypes.byref(info), ctypes.byref(error))
                assert status == 0, error.message
                if event.type != FRAME:
                    # Not a frame: *info is left as it was.
                    assert bytes(info) == b"\xa5" * ctypes.sizeof(info)
                    if sequence is None:
                        sequence = publish_one(publisher, 99)
                    continue
                described = _native.FrameInfo()
                _native.check(LIB.fb_frame_get_info(event.frame, ctypes.byref(described), ctypes.byref(error)), error)
                assert bytes(info) == bytes(described)
                assert info.sequence == sequence and (info.width, info.height) == (64, 48)
                luma = ctypes.string_at(info.planes[0].data, info.planes[0].bytes_per_row * info.planes[0].height)
                assert luma == b"\x63" * len(luma)  # 99
                LIB.fb_frame_release(event.frame)
                frames += 1
                break
            assert frames == 1
            # Nothing more comes: timed out, *info untouched.
            ctypes.memset(ctypes.byref(info), 0x5A, ctypes.sizeof(info))
            assert LIB.fb_subscriber_next_event_info(handle, 50_000_000, ctypes.byref(event), ctypes.byref(info),
                                                     ctypes.byref(error)) == TIMED_OUT
            assert bytes(info) == b"\x5a" * ctypes.sizeof(info)
        finally:
            LIB.fb_subscriber_destroy(handle)


def test_acquire_buffer_info_describes_the_buffer_as_get_info_does_and_writes_nothing_on_failure(tmp_path):
    path = str(tmp_path / "acquire.sock")
    with framebus.Publisher(path, "420v", 64, 48, buffers=(2, 2)) as publisher:
        handle, error = publisher._handle, _native.Error()
        buffer, info = ctypes.c_void_p(), _native.BufferInfo()
        assert LIB.fb_publisher_acquire_buffer_info(handle, 0, ctypes.byref(buffer), None,
                                                    ctypes.byref(error)) == INVALID_ARGUMENT
        taken = []
        for _ in range(2):  # the whole pool: a NULL info took nothing
            _native.check(LIB.fb_publisher_acquire_buffer_info(handle, SECOND, ctypes.byref(buffer),
                                                               ctypes.byref(info), ctypes.byref(error)), error)
            described = _native.BufferInfo()
            _native.check(LIB.fb_buffer_get_info(buffer, ctypes.byref(described), ctypes.byref(error)), error)
            assert bytes(info) == bytes(described) and info.width == 64 and info.plane_count == 2
            taken.append(buffer.value)
        buffer.value = 12345
        ctypes.memset(ctypes.byref(info), 0xA5, ctypes.sizeof(info))
        assert LIB.fb_publisher_acquire_buffer_info(handle, 0, ctypes.byref(buffer), ctypes.byref(info),
                                                    ctypes.byref(error)) == OUT_OF_BUFFERS
        assert LIB.fb_publisher_acquire_buffer_info(handle, 20_000_000, ctypes.byref(buffer), ctypes.byref(info),
                                                    ctypes.byref(error)) == TIMED_OUT
        assert buffer.value == 12345 and bytes(info) == b"\xa5" * ctypes.sizeof(info)
        for each in taken:
            LIB.fb_buffer_discard(each)


@pytest.mark.parametrize("one_call", [True, False], ids=["one call", "an older library's two calls"])
def test_frames_published_and_received_are_bit_exact_through_either_path(tmp_path, monkeypatch, one_call):
    if not one_call:  # as with a library before the one-call functions
        real = _native.has
        monkeypatch.setattr(_native, "has", lambda lib, name: False if name.endswith("_info") else real(lib, name))
    path = str(tmp_path / "either.sock")
    rng = np.random.default_rng(7)
    frames = [[rng.integers(0, 256, (48, 64), np.uint8), rng.integers(0, 256, (24, 32, 2), np.uint8)]
              for _ in range(5)]
    with framebus.Publisher(path, "420v", 64, 48, buffers=(2, 2)) as publisher:
        assert (publisher._acquire_info is not None) == one_call
        with framebus.Subscriber(path, accept=["420v"], queue=2, engine="native") as bus:
            assert (bus._next_info is not None) == one_call
            kept = []
            for index, planes in enumerate(frames):  # more frames than buffers: each buffer is handed out again
                with publisher.next_buffer(timeout=10) as buffer:
                    assert all(plane.flags.writeable for plane in buffer.planes)
                    for target, source in zip(buffer.planes, planes):
                        target[...] = source
                    sequence = publisher.publish(buffer, presentation_time_ns=index * 1000)
                    kept.append(buffer.planes)
                event = bus.next_event(timeout=10)
                while not isinstance(event, framebus.Frame):
                    assert event is not None and not isinstance(event, framebus.EndOfStream), event
                    event = bus.next_event(timeout=10)
                with event as frame:
                    assert frame.sequence == sequence and frame.format == "420v"
                    assert (frame.width, frame.height, frame.bytes_used) == (64, 48, 64 * 48 * 3 // 2)
                    assert frame.presentation_time * 1_000_000_000 == index * 1000
                    assert frame.received_time_ns >= frame.publish_time_ns > 0
                    assert all(np.array_equal(got, want) for got, want in zip(frame.planes, planes))
            # Arrays of published buffers stay read-only, even once their buffer was handed out again.
            assert not any(plane.flags.writeable for planes in kept for plane in planes)
            with pytest.raises(ValueError):
                kept[0][0][0, 0] = 1
