"""Both engines against a real `framebus publish`: a deferred subscriber (HELLO flag bit 1, docs/PROTOCOL.md
section 5.1.1) and a subscriber's own largest frame (section 8.2)."""

import time

import pytest

import framebus
from framebus import _wire

pytestmark = pytest.mark.usefixtures("each_engine")


def events_until_frame_or_end(bus, timeout=60.0):
    """Events up to and including the first Frame or EndOfStream (a FrameBusError raised counts as the end)."""
    seen, deadline = [], time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            event = bus.next_event(timeout=1.0)
        except framebus.FrameBusError as error:
            seen.append(error)
            return seen
        if event is None:
            continue
        seen.append(event)
        if isinstance(event, (framebus.Frame, framebus.EndOfStream)):
            return seen
    return seen


def test_the_hello_says_deferred_only_when_asked():
    formats = [framebus.fourcc("420v")]
    plain = _wire.encode_hello(formats, None)
    deferred = _wire.encode_hello(formats, None, deferred=True)
    flags = lambda hello: int.from_bytes(hello[22:24], "little")
    assert flags(plain) & 2 == 0 and flags(deferred) & 2 == 2


def test_a_deferred_subscriber_gets_frames_once_the_preview_has_its_first(publish):
    publisher = publish("--size", "64x48", "--format", "420v", "--fps", "30")
    with framebus.Subscriber(str(publisher.path), accept=["420v"], deferred=True) as later, \
            framebus.Subscriber(str(publisher.path), accept=["420v"]) as preview:
        first = events_until_frame_or_end(preview)
        assert isinstance(first[-1], framebus.Frame)
        first[-1].release()
        events = events_until_frame_or_end(later)
        assert events and isinstance(events[-1], framebus.Frame), f"the deferred subscriber got {events!r}"
        events[-1].release()


def test_a_frame_larger_than_the_subscriber_accepts_ends_the_stream_before_any_frame(publish):
    publisher = publish("--size", "320x240", "--format", "420v", "--fps", "30")
    with framebus.Subscriber(str(publisher.path), accept=["420v"], largest_frame=(160, 120)) as bus:
        events = events_until_frame_or_end(bus)
        assert events, "neither a frame nor the end came"
        assert not any(isinstance(event, framebus.Frame) for event in events)
    with framebus.Subscriber(str(publisher.path), accept=["420v"], largest_frame=(320, 240)) as bus:
        events = events_until_frame_or_end(bus)
        assert isinstance(events[-1], framebus.Frame)
        events[-1].release()


@pytest.mark.parametrize("wrong", [(0, 10), (10, 70000), "big", (1, 2, 3)])
def test_a_largest_frame_out_of_range_is_an_invalid_argument(publish, wrong):
    publisher = publish("--size", "64x48", "--format", "420v", "--fps", "30")
    with pytest.raises(framebus.FrameBusError):
        framebus.Subscriber(str(publisher.path), accept=["420v"], largest_frame=wrong)
