"""`async for event in bus` against a real `framebus publish`: events come without blocking the event loop."""

import asyncio
import time

import pytest

import framebus

pytestmark = pytest.mark.usefixtures("each_engine")


def test_async_for_delivers_frames_while_the_loop_keeps_running(publish):
    publisher = publish("--size", "64x48", "--format", "420v", "--fps", "30")

    async def main():
        ticks = 0
        stop = asyncio.Event()

        async def ticker():
            nonlocal ticks
            while not stop.is_set():
                ticks += 1
                await asyncio.sleep(0.005)

        task = asyncio.create_task(ticker())
        sequences = []
        with framebus.Subscriber(str(publisher.path), accept=["420v"], queue=2) as bus:
            async for event in bus:
                if isinstance(event, framebus.Frame):
                    with event as frame:
                        assert frame.planes[0].shape == (48, 64)
                        sequences.append(frame.sequence)
                    if len(sequences) == 10:
                        break
        stop.set()
        await task
        return sequences, ticks

    started = time.monotonic()
    sequences, ticks = asyncio.run(asyncio.wait_for(main(), 120))
    elapsed = time.monotonic() - started
    assert sequences == sorted(sequences) and len(set(sequences)) == 10
    # 10 frames at 30 fps take about 0.3 s, in which a loop that never blocks ticks every 5 ms: a loop blocked in a
    # wait for frames would tick only between frames (at most 10 times).
    assert ticks > 10 + elapsed * 10, (ticks, elapsed)


def test_async_for_ends_with_the_end_of_stream(publish):
    publisher = publish("--size", "64x48", "--format", "420v", "--fps", "30")

    async def main():
        events = []
        with framebus.Subscriber(str(publisher.path), accept=["420v"]) as bus:
            async for event in bus:
                events.append("Frame" if isinstance(event, framebus.Frame) else type(event).__name__)
                if isinstance(event, framebus.Frame):
                    event.release()
                    if events.count("Frame") == 2:
                        publisher.stop()
        return events

    events = asyncio.run(asyncio.wait_for(main(), 120))
    assert events.count("Frame") >= 2 and events[-1] == "EndOfStream", events
