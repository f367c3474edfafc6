"""The publisher's holding policy seen from Python (docs/PROTOCOL.md section 7.3): the depth asked for and the depth
granted, and a recorder's queue of 16 on a default `framebus publish`."""

import time

import framebus


def test_a_recorder_asking_for_16_on_a_default_publisher_gets_16_and_holds_a_burst_of_16(publish):
    publisher = publish("--format", "420v", "--size", "64x48", "--fps", "120")
    with framebus.Subscriber(str(publisher.path), accept=["420v"], queue=16, timeout=60, wait=True) as bus:
        assert bus.requested_queue_depth == 16
        assert bus.granted_queue_depth == 16
        assert bus.maximum_held_frames >= 16
        # Hold every frame (a recorder that has not written any yet): 16 frames in a row, none dropped.
        kept, dropped = [], []
        deadline = time.monotonic() + 60
        while len(kept) < 16 and time.monotonic() < deadline:
            event = bus.next_event(timeout=1.0)
            if isinstance(event, framebus.Frame):
                kept.append(event)
            elif isinstance(event, framebus.Dropped):
                dropped.append(event)
            elif isinstance(event, framebus.EndOfStream):
                break
        assert len(kept) == 16, f"{len(kept)} frames, drops {dropped}"
        assert dropped == []
        sequences = [frame.sequence for frame in kept]
        assert sequences == list(range(sequences[0], sequences[0] + 16))
        for frame in kept:
            frame.release()


def test_latest_only_asks_for_1_and_may_hold_3(publish):
    publisher = publish("--format", "420v", "--size", "64x48", "--fps", "30")
    with framebus.Subscriber(str(publisher.path), accept=["420v"], timeout=60, wait=True) as bus:
        assert bus.requested_queue_depth == 1
        assert bus.granted_queue_depth == 1
        assert bus.maximum_held_frames >= 3


def test_a_subscriber_welcomed_before_the_first_frame_can_hold_what_its_welcome_says(publish):
    """`--wait-for-subscriber` publishes nothing before the first subscriber, so the pool has lent no buffer when the
    WELCOME goes out. The limit it states must be the one the publisher keeps: a subscriber holding every frame
    receives exactly that many (before the fix the WELCOME said 18 and the publisher stopped at 6)."""
    publisher = publish("--format", "420v", "--size", "64x48", "--fps", "120", "--buffers", "8",
                        "--wait-for-subscriber")
    with framebus.Subscriber(str(publisher.path), accept=["420v"], queue=16, timeout=60, wait=True) as bus:
        limit = bus.maximum_held_frames
        assert 1 <= limit <= 8
        kept = []
        deadline = time.monotonic() + 60
        while len(kept) < limit and time.monotonic() < deadline:
            event = bus.next_event(timeout=1.0)
            if isinstance(event, framebus.Frame):
                kept.append(event)
            elif isinstance(event, framebus.EndOfStream):
                break
        assert len(kept) == limit, f"WELCOME allowed {limit} held frames, {len(kept)} came"
        for frame in kept:
            frame.release()
