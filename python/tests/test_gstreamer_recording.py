"""docs/GSTREAMER.md's recording pipeline behind a live publisher, with the real gst-launch-1.0.

A live `videotestsrc is-live=true ! framebussink` publishes; `framebussrc ! videoconvert ! <H.264 encoder> !
h264parse ! mp4mux ! filesink` records from it. framebussrc once gave the first buffers (frames captured before its
pipeline started) the same PTS 0, and the recording then failed in 3 of 7 runs with mp4mux's "Buffer has no PTS".
Each run here must end cleanly with a file holding exactly the frames recorded, and framebussrc's PTS must strictly
increase from its first buffer.

Skips (failing under FRAMEBUS_REQUIRE_ALL) as test_gstreamer.py does when GStreamer or the plugin is missing.
"""

import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from test_gstreamer import MISSING, gst_env, gst_start, gst_stop  # noqa: F401  (gst_env is a fixture)

RUNS = 5
FRAMES = 20


def _encoder() -> str | None:
    """An H.264 encoder GStreamer has: openh264enc (plugins-bad) or x264enc (plugins-ugly)."""
    for element in ("openh264enc", "x264enc"):
        if subprocess.run(["gst-inspect-1.0", "--exists", element], capture_output=True).returncode == 0:
            return element
    return None


ENCODER = None if MISSING else _encoder()


def _live_publisher(gst_env, path: Path) -> subprocess.Popen:
    publisher = gst_start(
        gst_env,
        "videotestsrc is-live=true pattern=ball ! video/x-raw,width=320,height=240,framerate=30/1,format=NV12 ! "
        f"framebussink socket-path={path}",
    )
    deadline = time.monotonic() + 60
    while not path.exists():
        assert publisher.poll() is None, gst_stop(publisher)
        assert time.monotonic() < deadline, "framebussink made no socket in 60 s"
        time.sleep(0.02)
    return publisher


def test_the_first_buffers_of_framebussrc_behind_a_live_publisher_have_increasing_timestamps(gst_env, tmp_path):
    path = tmp_path / "live.sock"
    publisher = _live_publisher(gst_env, path)
    try:
        result = subprocess.run(
            ["gst-launch-1.0", "-v", "framebussrc", f"socket-path={path}", "num-buffers=6", "!", "fakesink",
             "silent=false"],
            env=gst_env, capture_output=True, text=True, timeout=120,
        )
    finally:
        gst_stop(publisher)
    assert result.returncode == 0, result.stdout + result.stderr
    stamps = [
        int(h) * 3_600_000_000_000 + int(m) * 60_000_000_000 + int(s) * 1_000_000_000 + int(ns)
        for h, m, s, ns in re.findall(r"pts: (\d+):(\d+):(\d+)\.(\d+)", result.stdout)
    ]
    assert len(stamps) == 6, result.stdout
    assert all(b > a for a, b in zip(stamps, stamps[1:])), stamps


@pytest.mark.skipif(ENCODER is None and not MISSING, reason="no H.264 encoder (openh264enc or x264enc)")
def test_the_documented_recording_pipeline_works_behind_a_live_publisher(gst_env, tmp_path):
    assert ENCODER is not None, "no H.264 encoder (gstreamer1.0-plugins-bad's openh264enc)"
    if shutil.which("ffprobe") is None:
        pytest.skip("ffprobe is not installed (apt-get install ffmpeg)")
    path = tmp_path / "live.sock"
    publisher = _live_publisher(gst_env, path)
    try:
        for run in range(RUNS):
            output = tmp_path / f"recording-{run}.mp4"
            result = subprocess.run(
                ["gst-launch-1.0", "-e", "framebussrc", f"socket-path={path}", f"num-buffers={FRAMES}", "!",
                 "videoconvert", "!", ENCODER, "!", "h264parse", "!", "mp4mux", "!", "filesink",
                 f"location={output}"],
                env=gst_env, capture_output=True, text=True, timeout=120,
            )
            assert result.returncode == 0 and "no PTS" not in result.stdout + result.stderr, \
                f"run {run}: exit {result.returncode}\n{result.stdout}\n{result.stderr}"
            probe = subprocess.run(
                ["ffprobe", "-v", "error", "-count_frames", "-select_streams", "v:0", "-show_entries",
                 "stream=nb_read_frames", "-of", "csv=p=0", str(output)],
                capture_output=True, text=True, timeout=120,
            )
            assert probe.returncode == 0, probe.stderr
            assert int(probe.stdout.strip()) == FRAMES, f"run {run}: {probe.stdout} {probe.stderr}"
    finally:
        gst_stop(publisher)
