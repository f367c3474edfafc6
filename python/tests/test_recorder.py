"""framebus.Recorder (the C library's fb_recorder) against the Python publisher, checked with the real ffmpeg."""

import os
import shutil
import subprocess
import time

import numpy as np
import pytest

import framebus
from framebus import _native

try:
    _native.library()
except framebus.FrameBusError as error:
    if os.environ.get("FRAMEBUS_REQUIRE_ALL"):
        raise
    pytestmark = pytest.mark.skip(reason=str(error))

WIDTH, HEIGHT = 64, 48


def frame(index):
    """Frame `index` of 420v: its index in the first two luma bytes, the rest a pattern of the index."""
    rng = np.random.default_rng(index)
    luma = rng.integers(0, 256, (HEIGHT, WIDTH), dtype=np.uint8)
    luma[0, 0], luma[0, 1] = index & 0xFF, index >> 8
    chroma = rng.integers(0, 256, (HEIGHT // 2, WIDTH // 2, 2), dtype=np.uint8)
    return luma, chroma


def wait_for(condition, timeout=60.0):
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.005)
    return True


@pytest.mark.skipif(shutil.which("ffmpeg") is None and not os.environ.get("FRAMEBUS_REQUIRE_ALL"),
                    reason="needs ffmpeg (apt-get install ffmpeg)")
def test_a_python_recorder_writes_every_frame_ffmpeg_decodes_bit_exact(tmp_path):
    path = str(tmp_path / "bus.sock")
    output = str(tmp_path / "take.mkv")
    count = 40
    with framebus.Publisher(path, format="420v", width=WIDTH, height=HEIGHT) as publisher:
        recorder = framebus.Recorder(path, output, connect_timeout=60, writes_in_flight=3)
        assert wait_for(lambda: publisher.statistics["subscriber_count"] == 1), "the recorder did not connect"
        published = 0
        for index in range(count):
            try:
                publisher.publish(*frame(index), presentation_time_ns=index * 33_333_333)
                published += 1
            except framebus.FrameBusError as error:
                if error.code != "outOfBuffers":
                    raise
                publisher.report_drops("outOfBuffers")
            time.sleep(0.01)
        # Everything published is taken (or counted as dropped) before the stream ends.
        assert wait_for(lambda: recorder.status.frames_accepted + recorder.status.dropped_frames >= count)
    assert recorder.wait(timeout=60), "the recorder did not see the end of the stream"
    final = recorder.stop()
    assert final.closed and final.failure is None, final
    assert final.frames_written == final.frames_accepted, final
    assert final.frames_written + final.dropped_frames == count, final
    assert final.frames_written >= 1
    assert recorder.stop() is final  # idempotent

    decoded = tmp_path / "decoded.nv12"
    subprocess.run(["ffmpeg", "-v", "error", "-i", output, "-fps_mode", "passthrough", "-f", "rawvideo", "-y",
                    str(decoded)], check=True, timeout=120)
    data = decoded.read_bytes()
    frame_size = WIDTH * HEIGHT * 3 // 2
    assert len(data) == final.frames_written * frame_size
    seen = []
    for offset in range(0, len(data), frame_size):
        raw = np.frombuffer(data, dtype=np.uint8, count=frame_size, offset=offset)
        index = int(raw[0]) | int(raw[1]) << 8
        luma, chroma = frame(index)
        assert np.array_equal(raw[:WIDTH * HEIGHT], luma.reshape(-1)), f"frame {index}: luma differs"
        assert np.array_equal(raw[WIDTH * HEIGHT:], chroma.reshape(-1)), f"frame {index}: chroma differs"
        seen.append(index)
    assert seen == sorted(seen) and len(set(seen)) == len(seen), seen


def test_a_recorder_refuses_bad_arguments_and_a_file_it_cannot_create(tmp_path):
    with pytest.raises(framebus.FrameBusError) as refused:
        framebus.Recorder(str(tmp_path / "bus.sock"), str(tmp_path / "take.mkv"), queue_depth=65)
    assert refused.value.code == "invalidArgument"
    with pytest.raises(framebus.FrameBusError) as too_many:
        framebus.Recorder(str(tmp_path / "bus.sock"), str(tmp_path / "take.mkv"), writes_in_flight=17)
    assert too_many.value.code == "invalidArgument" and "writes_in_flight" in str(too_many.value)
    with pytest.raises(framebus.FrameBusError) as uncreatable:
        framebus.Recorder(str(tmp_path / "bus.sock"), str(tmp_path / "missing-directory" / "take.mkv"))
    assert uncreatable.value.code == "systemCall"
