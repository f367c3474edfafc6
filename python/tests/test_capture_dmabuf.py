"""DMA-BUF frames from a real V4L2 device reach Python bit-exact: `framebus capture --memory mmap` (the device's own
buffers, exported as DMA-BUFs) in the guest kernel with vivid (scripts/guest-run --vivid; `FRAMEBUS_GUEST=1` makes a
missing device a failure). The native engine maps each DMA-BUF with the CPU access bracketed by DMA_BUF_IOCTL_SYNC
(the C library's lock for the frame's life); the pure-Python engine cannot take DMA-BUFs and is told why."""

import os
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest

import framebus
from conftest import framebus_cli


def vivid() -> str:
    device = os.environ.get("FRAMEBUS_V4L2_DEVICE", "/dev/video0")
    if not os.path.exists(device):
        if os.environ.get("FRAMEBUS_GUEST"):
            pytest.fail(f"no {device} in the guest (scripts/guest-run --vivid)")
        pytest.skip(f"needs a V4L2 capture device ({device}): scripts/guest-run --vivid")
    return device


@pytest.fixture
def capture(tmp_path):
    started = []

    def start(*arguments: str) -> tuple[Path, Path]:
        path, dump = tmp_path / "camera.sock", tmp_path / "dump"
        dump.mkdir()
        process = subprocess.Popen([framebus_cli(), "capture", "--device", vivid(), "--path", str(path), "--quiet",
                                    "--memory", "mmap", "--size", "320x180", "--format", "420v",
                                    "--frame-dump", str(dump), *arguments],
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        started.append(process)
        deadline = time.monotonic() + 300  # a guest starts processes slowly
        while not path.exists():
            if process.poll() is not None:
                pytest.fail(f"framebus capture exited: {process.stdout.read().decode(errors='replace')}")
            if time.monotonic() > deadline:
                pytest.fail("framebus capture did not create its socket")
            time.sleep(0.1)
        return path, dump

    yield start
    for process in started:
        process.terminate()
        try:
            process.wait(60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def test_dma_buf_frames_of_a_capture_reach_the_native_engine_bit_exact(capture):
    path, dump = capture()
    checked = 0
    deadline = time.monotonic() + 300
    with framebus.Subscriber(str(path), accept=["420v"], queue=4, timeout=120, wait=True) as bus:
        assert bus.engine == "native"
        while checked < 3 and time.monotonic() < deadline:
            event = bus.next_event(timeout=5)
            if not isinstance(event, framebus.Frame):
                assert not isinstance(event, framebus.EndOfStream), event
                continue
            with event as frame:
                packed = b"".join(np.ascontiguousarray(plane).tobytes() for plane in frame.planes)
                sequence = frame.sequence
            raw = dump / f"{sequence}.raw"
            # The dump is written by the publisher as it publishes: wait for the file to be complete.
            while (not raw.exists() or raw.stat().st_size < len(packed)) and time.monotonic() < deadline:
                time.sleep(0.05)
            assert raw.read_bytes() == packed, f"frame {sequence} differs from what the device wrote"
            checked += 1
    assert checked == 3


def test_the_pure_python_engine_is_told_why_a_dma_buf_capture_sends_it_nothing(capture):
    path, _ = capture()
    with framebus.Subscriber(str(path), accept=["420v"], queue=4, timeout=120, wait=True, engine="python") as bus:
        with pytest.warns(RuntimeWarning, match="DMA-BUF"):
            deadline = time.monotonic() + 300
            while time.monotonic() < deadline and not bus._warned_dma_buf:
                event = bus.next_event(timeout=5)
                assert not isinstance(event, framebus.Frame), "a DMA-BUF frame reached the pure-Python engine"
                assert not isinstance(event, framebus.EndOfStream), event
