"""The GStreamer plugin (gstreamer/, libgstframebus.so) with the real gst-launch-1.0, checked bit-exact.

- videotestsrc ! framebussink: a Python subscriber compares every frame it gets with the same videotestsrc frames
  written by filesink (zero-copy through the sink's pool, and the copying path);
- framebus publish -> framebussrc ! filesink: the file's frames against what a Python subscriber of the same
  publisher sees (zero-copy, copied into GStreamer's layout, and compressed frames decoded);
- framebus publish -> framebussrc ! rtpvrawpay ! udpsink -> udpsrc ! rtpvrawdepay ! framebussink -> a Python
  subscriber on the far side;
- gst-inspect-1.0 documents every property.

The tests skip, saying what is missing, when GStreamer's tools or the built plugin are absent, unless
FRAMEBUS_REQUIRE_ALL is set (CI sets it): then they fail. The plugin is looked for in $FRAMEBUS_GST_PLUGIN_DIR,
else gstreamer/build (`make -C gstreamer`).
"""

import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import time
import zlib
from pathlib import Path

import numpy as np
import pytest

from conftest import ROOT

import framebus

PLUGIN_DIR = Path(os.environ.get("FRAMEBUS_GST_PLUGIN_DIR") or ROOT / "gstreamer" / "build")
REQUIRE_ALL = bool(os.environ.get("FRAMEBUS_REQUIRE_ALL"))
FRAME_TIMEOUT = 60  # seconds: generous, the machine running the tests may be loaded


def _missing() -> str | None:
    for tool in ("gst-launch-1.0", "gst-inspect-1.0"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (apt-get install gstreamer1.0-tools gstreamer1.0-plugins-base " \
                   "gstreamer1.0-plugins-good)"
    for element in ("videotestsrc", "videoconvert", "filesink", "fakesink", "identity", "queue", "udpsrc",
                    "udpsink", "rtpvrawpay", "rtpvrawdepay"):
        if subprocess.run(["gst-inspect-1.0", "--exists", element], capture_output=True).returncode != 0:
            return f"GStreamer element {element} is not installed (apt-get install gstreamer1.0-plugins-base " \
                   "gstreamer1.0-plugins-good)"
    if not (PLUGIN_DIR / "libgstframebus.so").exists():
        return f"the GStreamer plugin is not built: no {PLUGIN_DIR}/libgstframebus.so (run gstreamer/ci-build.sh)"
    return None


MISSING = _missing()
if MISSING and not REQUIRE_ALL:
    pytestmark = pytest.mark.skip(reason=f"GStreamer bridge not testable here: {MISSING}")


@pytest.fixture(scope="module")
def gst_env(tmp_path_factory):
    """The environment for gst-launch-1.0: our plugin on GST_PLUGIN_PATH, a registry of our own."""
    if MISSING:
        pytest.fail(f"FRAMEBUS_REQUIRE_ALL is set but {MISSING}")
    env = dict(os.environ)
    env["GST_PLUGIN_PATH"] = os.pathsep.join(filter(None, [str(PLUGIN_DIR), os.environ.get("GST_PLUGIN_PATH")]))
    env["GST_REGISTRY"] = str(tmp_path_factory.mktemp("gst") / "registry.bin")
    env["GST_DEBUG_NO_COLOR"] = "1"
    for element in ("framebussink", "framebussrc"):
        inspect = subprocess.run(["gst-inspect-1.0", element], env=env, capture_output=True, text=True, timeout=120)
        assert inspect.returncode == 0, f"gst-inspect-1.0 {element} failed:\n{inspect.stdout}\n{inspect.stderr}"
    return env


# ---- helpers ---------------------------------------------------------------------------------------------------

def gst_launch(env, pipeline: str, timeout: float = 120) -> str:
    """Runs a pipeline to its end with -m (messages printed); returns its output, failing on a non-zero exit."""
    result = subprocess.run(["gst-launch-1.0", "-m", "-e", *pipeline.split()], env=env, capture_output=True,
                            text=True, timeout=timeout)
    assert result.returncode == 0, f"gst-launch-1.0 {pipeline}\nexit {result.returncode}\n{result.stdout}\n" \
                                   f"{result.stderr}"
    return result.stdout


def gst_start(env, pipeline: str) -> subprocess.Popen:
    return subprocess.Popen(["gst-launch-1.0", "-m", "-e", *pipeline.split()], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


def gst_stop(process: subprocess.Popen, timeout: float = 30, interrupt: bool = True) -> str:
    """Stops a pipeline started with gst_start: SIGINT (with -e, gst-launch-1.0 then sends EOS and ends cleanly),
    or, with interrupt=False, waits for it to end by itself. Killed if it outlives `timeout`. Returns its output."""
    if process.poll() is None and interrupt:
        process.send_signal(signal.SIGINT)
    try:
        output, _ = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        output, _ = process.communicate()
    return output


def element_stats(output: str, name: str) -> dict[str, int]:
    """The counters of the last `name` element message (framebussink-stats, framebussrc-stats) in -m output."""
    lines = [line for line in output.splitlines() if f"{name}," in line]
    assert lines, f"no {name} message in:\n{output}"
    return {key: int(value) for key, value in re.findall(r"([a-z-]+)=\(guint64\)(\d+)", lines[-1])}


def visible_bytes(frame: framebus.Frame) -> bytes:
    """A raw frame's pixels without row padding: exactly GStreamer's default layout for widths divisible by 4."""
    return b"".join(np.ascontiguousarray(plane).tobytes() for plane in frame.planes)


def frame_size(fmt: str, width: int, height: int) -> int:
    return {"NV12": width * height * 3 // 2, "P010_10LE": width * height * 3, "BGRA": width * height * 4}[fmt]


def write_png(path: Path, rgb: np.ndarray) -> None:
    height, width, _ = rgb.shape
    rows = b"".join(b"\x00" + rgb[y].tobytes() for y in range(height))

    def chunk(tag: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data) & 0xFFFFFFFF)

    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
                     + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))


@pytest.fixture
def images(tmp_path):
    """A folder of three small, different PNG pictures (gradients with noise), for `framebus publish --images`."""

    def make(width: int, height: int) -> Path:
        folder = tmp_path / f"images{width}x{height}"
        folder.mkdir()
        rng = np.random.default_rng(9)
        y, x = np.mgrid[0:height, 0:width]
        for index in range(3):
            base = np.stack([(x * (index + 1)) % 256, (y * 3 + index * 40) % 256, (x + y) % 256], axis=-1)
            noise = rng.integers(0, 24, size=(height, width, 3))
            write_png(folder / f"picture{index}.png", ((base + noise) % 256).astype(np.uint8))
        return folder

    return make


def distinct_frames(path: Path, accept: str, count: int) -> set[bytes]:
    """The `count` different pictures a looping `framebus publish --images` sends, as a subscriber sees them."""
    seen: set[bytes] = set()
    with framebus.Subscriber(str(path), accept=[accept], queue=4, wait=True, timeout=FRAME_TIMEOUT) as bus:
        deadline = time.monotonic() + FRAME_TIMEOUT
        while len(seen) < count:
            assert time.monotonic() < deadline, f"saw {len(seen)} of {count} pictures"
            event = bus.next_event(timeout=1)
            assert not isinstance(event, framebus.EndOfStream), f"the publisher ended: {event}"
            if isinstance(event, framebus.Frame):
                with event as frame:
                    seen.add(visible_bytes(frame))
    return seen


def collect(path: Path, accept: str, until, queue: int = 8) -> list[tuple[framebus.Frame, bytes]]:
    """Subscribes (waiting for the socket to appear) and keeps (frame, its pixels) until `until(frames)` or the
    end of the stream. Frames are released at once; their metadata stays readable."""
    frames = []
    with framebus.Subscriber(str(path), accept=[accept], queue=queue, wait=True, timeout=FRAME_TIMEOUT) as bus:
        deadline = time.monotonic() + FRAME_TIMEOUT
        while not until(frames) and time.monotonic() < deadline:
            event = bus.next_event(timeout=1)
            if isinstance(event, framebus.EndOfStream):
                break
            if isinstance(event, framebus.Frame):
                with event as frame:
                    frames.append((frame, visible_bytes(frame)))
    return frames


def free_udp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


# ---- gst-inspect -----------------------------------------------------------------------------------------------

SINK_PROPERTIES = ["socket-path", "compression", "min-buffers", "max-buffers", "max-subscribers", "socket-mode",
                   "timestamp-mode", "stats"]
SOURCE_PROPERTIES = ["socket-path", "accept", "queue-depth", "connect-timeout", "reconnect", "copy", "fd-memory",
                     "decode-threads", "wait-slice", "stats"]


@pytest.mark.parametrize("element, properties", [("framebussink", SINK_PROPERTIES),
                                                  ("framebussrc", SOURCE_PROPERTIES)])
def test_gst_inspect_documents_every_property(gst_env, element, properties):
    output = subprocess.run(["gst-inspect-1.0", element], env=gst_env, capture_output=True, text=True,
                            timeout=120).stdout
    assert "FrameBus" in output
    assert "NV12" in output and "P010_10LE" in output and "BGRA" in output
    for name in properties:
        match = re.search(rf"^\s+{re.escape(name)}\s+: (.+)$", output, re.MULTILINE)
        assert match, f"{element} does not list {name}:\n{output}"
        assert len(match.group(1).strip()) > 20, f"{element}'s {name} has no real description: {match.group(1)}"


# ---- videotestsrc ! framebussink -------------------------------------------------------------------------------

@pytest.mark.parametrize("fmt, accept, through", [
    ("NV12", "420v", ""),
    ("P010_10LE", "x420", ""),
    ("BGRA", "BGRA", ""),
    ("NV12", "420v", "identity drop-allocation=true !"),  # upstream cannot use the sink's pool: one copy
])
def test_videotestsrc_frames_reach_a_subscriber_bit_exact(gst_env, tmp_path, fmt, accept, through):
    width, height, count = 200, 120, 90  # 200 is no multiple of 64: the surfaces' rows are padded
    caps = f"video/x-raw,format={fmt},width={width},height={height},framerate=30/1"
    reference = tmp_path / "reference.raw"
    gst_launch(gst_env, f"videotestsrc num-buffers={count} pattern=ball ! {caps} ! filesink location={reference}")
    data = reference.read_bytes()
    size = frame_size(fmt, width, height)
    assert len(data) == size * count

    path = tmp_path / "sink.sock"
    pipeline = gst_start(gst_env, f"videotestsrc num-buffers={count} pattern=ball ! {caps} ! {through} "
                                  f"framebussink socket-path={path} timestamp-mode=pts")
    try:
        frames = collect(path, accept, until=lambda frames: False)
    finally:
        output = gst_stop(pipeline, timeout=FRAME_TIMEOUT, interrupt=False)
    assert pipeline.returncode == 0, output

    assert len(frames) >= 10, f"only {len(frames)} frames arrived:\n{output}"
    for frame, pixels in frames:
        assert (frame.width, frame.height, frame.format) == (width, height, accept)
        index = round(frame.presentation_time * 30)  # timestamp-mode=pts: the PTS, n/30 s
        assert frame.presentation_time == pytest.approx(index / 30, abs=1e-9)
        assert 0 <= index < count
        assert pixels == data[index * size:(index + 1) * size], f"frame {index} differs"
    assert len({round(frame.presentation_time * 30) for frame, _ in frames}) == len(frames)

    stats = element_stats(output, "framebussink-stats")
    assert stats["published"] == count - stats["dropped"]
    if through:
        assert stats["copied"] == stats["published"] and stats["zero-copy"] == 0, stats
    else:
        assert stats["zero-copy"] == stats["published"] and stats["copied"] == 0, stats
    # The path is also announced as a message when publishing starts.
    assert f"framebussink-path, zero-copy=(boolean){'false' if through else 'true'}" in output, output


def test_sink_publishes_clock_times_on_clock_monotonic(gst_env, tmp_path):
    path = tmp_path / "clock.sock"
    pipeline = gst_start(gst_env, f"videotestsrc is-live=true num-buffers=60 ! "
                                  f"video/x-raw,format=NV12,width=64,height=48,framerate=30/1 ! "
                                  f"framebussink socket-path={path}")
    try:
        frames = collect(path, "420v", until=lambda frames: len(frames) >= 5)
    finally:
        gst_stop(pipeline, timeout=FRAME_TIMEOUT)
    assert len(frames) >= 5
    for frame, _ in frames:
        # The buffer's clock time, which GStreamer's default system clock keeps on CLOCK_MONOTONIC: at most the
        # moment it reached us, and not long before.
        captured = int(frame.presentation_time * 1_000_000_000)
        assert 0 < frame.received_time_ns - captured < 10_000_000_000
    first, second = frames[0][0], frames[1][0]
    assert second.presentation_time > first.presentation_time


# ---- framebus publish -> framebussrc ---------------------------------------------------------------------------

@pytest.mark.parametrize("publish_format, caps_format, accept, width, options, path_taken", [
    # 192 = 3 x 64: the surface has GStreamer's layout. 12 frames are more than the publisher lets this
    # subscriber hold, so zero-copy all the way also shows that freed buffers release their frames.
    ("420v", "NV12", "420v", 192, "", "zero-copy"),
    ("420v", "NV12", "420v", 192, "copy=true", "copied"),
    ("420v", "NV12", "420v", 160, "", "copied"),     # padded rows, and filesink cannot read video meta
    # 160 x 4 bytes is a multiple of 64; the streaming thread asks for a short slice while it waits
    ("BGRA", "BGRA", "BGRA", 160, "wait-slice=100", "zero-copy"),
    ("x420", "P010_10LE", "x420", 192, "", "zero-copy"),
    ("420v", "NV12", "&8v0", 160, "", "decoded"),    # compressed frames, decoded by the source
])
def test_framebussrc_writes_the_publishers_frames_bit_exact(gst_env, tmp_path, publish, images,
                                                            publish_format, caps_format, accept, width,
                                                            options, path_taken):
    height = 96
    publisher = publish("--format", publish_format, "--images", str(images(width, height)), "--fps", "20",
                        "--compressed")
    pictures = distinct_frames(publisher.path, publish_format, 3)
    assert len(pictures) == 3

    out = tmp_path / "out.raw"
    count = 12
    output = gst_launch(gst_env, f"framebussrc socket-path={publisher.path} accept=\"{accept}\" {options} "
                                 f"num-buffers={count} ! "
                                 f"video/x-raw,format={caps_format},width={width},height={height} ! "
                                 f"filesink location={out}", timeout=FRAME_TIMEOUT * 2)
    data = out.read_bytes()
    size = frame_size(caps_format, width, height)
    assert len(data) == size * count
    written = [data[i * size:(i + 1) * size] for i in range(count)]
    for index, frame in enumerate(written):
        assert frame in pictures, f"frame {index} is none of the published pictures"
    assert len(set(written)) == 3  # the pictures loop: all of them passed through

    stats = element_stats(output, "framebussrc-stats")
    assert stats["frames"] == count
    assert stats[path_taken] == count, stats


def test_framebussrc_reports_drops_as_discont_and_gaps(gst_env, tmp_path, publish, images):
    # A queue that never drains in time: `identity sleep-time` holds each buffer 200 ms while the publisher sends
    # 20 frames per second, so the latest-only subscriber loses frames (frameWasLate) between buffers.
    publisher = publish("--format", "420v", "--images", str(images(64, 48)), "--fps", "20")
    output = gst_launch(gst_env, f"-v framebussrc socket-path={publisher.path} num-buffers=6 ! "
                                 f"identity sleep-time=200000 ! fakesink sync=false silent=false",
                        timeout=FRAME_TIMEOUT * 2)
    stats = element_stats(output, "framebussrc-stats")
    assert stats["dropped-frame-was-late"] > 0, stats
    assert stats["discontinuities"] > 0 and stats["gaps"] > 0, stats
    # What fakesink saw: GAP events, and DISCONT buffers after the first (which is always DISCONT).
    seen = [line for line in output.splitlines() if "fakesink0" in line and "last-message" in line]
    assert any("type: gap" in line for line in seen), "\n".join(seen)
    assert sum("chain" in line and "discont" in line for line in seen) >= 2, "\n".join(seen)


# ---- through the network and back ------------------------------------------------------------------------------

@pytest.mark.parametrize("fmt, sampling, to_rtp, from_rtp", [
    # BGRA travels as it is.
    ("BGRA", "BGRA", "", ""),
    # NV12 (the camera format) travels as I420, which RTP carries: videoconvert only moves the chroma samples
    # between one interleaved plane and two, so the round trip is exact.
    ("420v", "YCbCr-4:2:0", "videoconvert ! video/x-raw,format=I420 !",
     "videoconvert ! video/x-raw,format=NV12 !"),
])
def test_frames_leave_through_rtp_and_arrive_bit_exact_on_the_far_side(gst_env, tmp_path, publish, images, fmt,
                                                                       sampling, to_rtp, from_rtp):
    width, height = 160, 96
    publisher = publish("--format", fmt, "--images", str(images(width, height)), "--fps", "10")
    pictures = distinct_frames(publisher.path, fmt, 3)

    port = free_udp_port()
    far = tmp_path / "far.sock"
    rtp_caps = (f"application/x-rtp,media=video,clock-rate=90000,encoding-name=RAW,sampling={sampling},"
                f"depth=(string)8,width=(string){width},height=(string){height},colorimetry=BT709-2,payload=96")
    receiver = gst_start(gst_env, f"udpsrc address=127.0.0.1 port={port} buffer-size=8388608 caps={rtp_caps} ! "
                                  f"rtpvrawdepay ! {from_rtp} framebussink socket-path={far} sync=false")
    sender = None
    try:
        # The receiver's sink creates its socket once caps arrive: start sending, then subscribe on the far side.
        sender = gst_start(gst_env, f"framebussrc socket-path={publisher.path} ! {to_rtp} rtpvrawpay ! "
                                    f"udpsink host=127.0.0.1 port={port}")
        frames = collect(far, fmt, until=lambda frames: len(frames) >= 9)
    finally:
        sender_output = gst_stop(sender) if sender else ""
        receiver_output = gst_stop(receiver)
    assert len(frames) >= 9, f"{len(frames)} frames crossed\n{sender_output}\n{receiver_output}"
    for index, (frame, pixels) in enumerate(frames):
        assert (frame.width, frame.height, frame.format) == (width, height, fmt)
        assert pixels in pictures, f"far-side frame {index} is none of the published pictures"
    assert len({pixels for _, pixels in frames}) == 3


# ---- colour, compression, back-pressure, unlock, latency -------------------------------------------------------

@pytest.mark.parametrize("colorimetry, chroma_site, accept, codes", [
    ("bt2020", "mpeg2", "420v", (4, 1, 4, 1)),   # BT.2020 primaries, its (BT.709) curve, BT.2020 matrix, left
    ("1:3:5:1", "jpeg", "420f", (1, 1, 1, 2)),   # full range (so 420f), BT.709 throughout, centre siting
])
def test_colorimetry_becomes_attachments_and_comes_back_as_caps(gst_env, tmp_path, colorimetry, chroma_site,
                                                                accept, codes):
    path = tmp_path / "colour.sock"
    caps = (f"video/x-raw,format=NV12,width=64,height=48,framerate=30/1,colorimetry={colorimetry},"
            f"chroma-site={chroma_site}")
    pipeline = gst_start(gst_env, f"videotestsrc is-live=true num-buffers=150 ! {caps} ! framebussink "
                                  f"socket-path={path}")
    try:
        frames = collect(path, accept, until=lambda frames: len(frames) >= 3)
        assert frames, "no frame arrived"
        for frame, _ in frames:
            assert frame.format == accept
            assert (frame.color_primaries, frame.transfer_function, frame.ycbcr_matrix,
                    frame.chroma_location) == codes
        # And back: framebussrc's caps carry the same colorimetry.
        output = gst_launch(gst_env, f"-v framebussrc socket-path={path} num-buffers=3 ! fakesink")
    finally:
        gst_stop(pipeline)
    caps_lines = [line for line in output.splitlines() if "framebussrc0.GstPad:src: caps" in line]
    assert caps_lines, output
    expected = "bt2020" if colorimetry == "bt2020" else "1:3:5:1"
    assert f"colorimetry=(string){expected}" in caps_lines[-1], caps_lines[-1]
    assert f"chroma-site=(string){chroma_site}" in caps_lines[-1], caps_lines[-1]


def test_sink_publishes_only_the_compressed_variant_and_the_source_decodes_it(gst_env, tmp_path):
    width, height, count = 200, 120, 60
    caps = f"video/x-raw,format=NV12,width={width},height={height},framerate=30/1"
    reference = tmp_path / "reference.raw"
    gst_launch(gst_env, f"videotestsrc num-buffers={count} pattern=ball ! {caps} ! filesink location={reference}")
    size = frame_size("NV12", width, height)
    data = reference.read_bytes()
    expected = {data[i * size:(i + 1) * size]: i for i in range(count)}

    path = tmp_path / "compressed.sock"
    out = tmp_path / "out.raw"
    receiver = gst_start(gst_env, f"framebussrc socket-path={path} connect-timeout={FRAME_TIMEOUT * 10**9} ! "
                                  f"filesink location={out}")
    sender = gst_start(gst_env, f"videotestsrc num-buffers={count} pattern=ball ! {caps} ! framebussink "
                                f"socket-path={path} compression=only")
    sender_output = gst_stop(sender, timeout=FRAME_TIMEOUT, interrupt=False)
    receiver_output = gst_stop(receiver, timeout=FRAME_TIMEOUT, interrupt=False)  # EOS when the sink stops
    assert sender.returncode == 0 and receiver.returncode == 0, f"{sender_output}\n{receiver_output}"

    written = out.read_bytes()
    assert len(written) % size == 0
    frames = [written[i * size:(i + 1) * size] for i in range(len(written) // size)]
    assert len(frames) >= 10, receiver_output
    indices = []
    for position, frame in enumerate(frames):
        assert frame in expected, f"decoded frame {position} is none of videotestsrc's frames"
        indices.append(expected[frame])
    assert indices == sorted(indices)
    stats = element_stats(receiver_output, "framebussrc-stats")
    assert stats["decoded"] == len(frames) and stats["zero-copy"] == 0, stats
    sink_stats = element_stats(sender_output, "framebussink-stats")
    assert sink_stats["conversions"] > 0, sink_stats  # the publisher encoded frames for the subscriber


def test_a_hoarding_subscriber_gets_drops_and_the_pipeline_goes_on(gst_env, tmp_path):
    # A subscriber that never releases may hold only its share of the pool; beyond it the publisher drops frames
    # for that subscriber alone (outOfBuffers), while the sink keeps publishing every frame, zero-copy.
    path = tmp_path / "held.sock"
    count = 60
    pipeline = gst_start(gst_env, f"videotestsrc num-buffers={count} ! "
                                  f"video/x-raw,format=NV12,width=64,height=48,framerate=30/1 ! "
                                  f"framebussink socket-path={path} min-buffers=2 max-buffers=4 max-subscribers=1")
    held, drops = [], []
    with framebus.Subscriber(str(path), accept=["420v"], queue=8, wait=True, timeout=FRAME_TIMEOUT) as bus:
        deadline = time.monotonic() + FRAME_TIMEOUT
        while time.monotonic() < deadline:
            event = bus.next_event(timeout=1)
            if isinstance(event, framebus.EndOfStream):
                break
            if isinstance(event, framebus.Frame):
                held.append(event)  # never released while the pipeline runs
            elif isinstance(event, framebus.Dropped):
                drops.append(event)
        output = gst_stop(pipeline, timeout=FRAME_TIMEOUT, interrupt=False)
        held_count = len(held)
        held.clear()
    assert pipeline.returncode == 0, output  # the pipeline ran to its end
    assert 0 < held_count <= 2  # its share: (max-buffers - 2) / max-subscribers
    assert any(drop.reason == "outOfBuffers" for drop in drops), drops
    stats = element_stats(output, "framebussink-stats")
    assert stats["published"] == count and stats["zero-copy"] == count and stats["dropped"] == 0, stats
    assert stats["subscriber-drops"] > 0, stats


def test_sink_falls_back_to_ordinary_memory_when_upstream_holds_every_surface(gst_env, tmp_path):
    # A queue of 8 in front of a sink whose pool has 4 surfaces, rendering 4 frames a second: upstream waits for
    # a surface, then gets ordinary memory (after 200 ms) instead of stalling; the sink copies those frames into
    # a surface if one is free by then, and reports them lost otherwise. Every frame that arrives is exact.
    width, height, count = 200, 120, 16
    caps = f"video/x-raw,format=NV12,width={width},height={height},framerate=4/1"
    reference = tmp_path / "reference.raw"
    gst_launch(gst_env, f"videotestsrc num-buffers={count} pattern=ball ! {caps} ! filesink location={reference}")
    data = reference.read_bytes()
    size = frame_size("NV12", width, height)

    path = tmp_path / "queued.sock"
    pipeline = gst_start(gst_env, f"videotestsrc num-buffers={count} pattern=ball ! {caps} ! "
                                  f"queue max-size-buffers=8 ! framebussink socket-path={path} min-buffers=2 "
                                  f"max-buffers=4 timestamp-mode=pts")
    try:
        frames = collect(path, "420v", until=lambda frames: False, queue=1)
    finally:
        output = gst_stop(pipeline, timeout=FRAME_TIMEOUT, interrupt=False)
    assert pipeline.returncode == 0, output
    stats = element_stats(output, "framebussink-stats")
    assert stats["published"] + stats["dropped"] == count, stats
    assert stats["zero-copy"] > 0 and stats["copied"] + stats["dropped"] > 0, stats
    assert frames
    for frame, pixels in frames:
        index = round(frame.presentation_time * 4)
        assert pixels == data[index * size:(index + 1) * size], f"frame {index} differs"


def test_framebussrc_waiting_for_a_publisher_stops_when_interrupted(gst_env, tmp_path):
    # No publisher ever appears; with reconnect the source keeps waiting inside create(). Stopping the pipeline
    # must interrupt that wait (unlock -> fb_subscriber_interrupt), or gst-launch-1.0 never exits.
    pipeline = gst_start(gst_env, f"framebussrc socket-path={tmp_path / 'nobody.sock'} reconnect=true "
                                  f"connect-timeout=200000000 ! fakesink")
    time.sleep(2)
    assert pipeline.poll() is None, pipeline.stdout.read()
    output = gst_stop(pipeline, timeout=FRAME_TIMEOUT)
    assert pipeline.returncode == 0, output
    assert "Got EOS from element" in output, output


def test_framebussrc_reconnects_to_a_restarted_publisher(gst_env, tmp_path, images):
    from conftest import PublisherProcess

    path = tmp_path / "restart.sock"
    folder = str(images(64, 48))
    first = PublisherProcess(path, "--format", "420v", "--images", folder, "--fps", "20")
    pipeline = gst_start(gst_env, f"framebussrc socket-path={path} reconnect=true num-buffers=50 ! fakesink")
    second = None
    try:
        time.sleep(1)
        first.stop()
        second = PublisherProcess(path, "--format", "420v", "--images", folder, "--fps", "20")
        output = gst_stop(pipeline, timeout=FRAME_TIMEOUT, interrupt=False)
    finally:
        first.stop()
        if second:
            second.stop()
        if pipeline.poll() is None:
            gst_stop(pipeline)
    assert pipeline.returncode == 0, output
    stats = element_stats(output, "framebussrc-stats")
    assert stats["frames"] == 50, stats
    assert stats["discontinuities"] >= 1, stats  # the first frame from the new publisher


def test_framebussrc_reports_its_latency(gst_env, publish, images):
    publisher = publish("--format", "420v", "--images", str(images(64, 48)), "--fps", "30")
    env = dict(gst_env, GST_DEBUG="framebus:5")
    result = subprocess.run(["gst-launch-1.0", "-m", "framebussrc", f"socket-path={publisher.path}",
                             "num-buffers=30", "!", "fakesink", "sync=true"], env=env, capture_output=True,
                            text=True, timeout=FRAME_TIMEOUT * 2)
    assert result.returncode == 0, result.stdout + result.stderr
    stats = element_stats(result.stdout, "framebussrc-stats")
    assert stats["latency"] > 0, stats  # frames arrive after their capture time
    answered = re.findall(r"latency: live, min (\d+):(\d+):(\d+)\.(\d+)", result.stderr)
    assert answered, "the latency query was never answered by framebussrc"
    # The pipeline asked again once frames showed the real latency (framebussrc posts a latency message).
    assert any(int(h) * 3600 + int(m) * 60 + int(s) + int(ns) > 0 for h, m, s, ns in answered), answered


# ---- hostile and unusual publishers ----------------------------------------------------------------------------

def peer_binary() -> str:
    """FrameBusTestPeer, the package's peer process with its hostile-publisher scenarios."""
    candidates = [os.environ.get("FRAMEBUS_TEST_PEER")] + [
        str(ROOT / ".build" / config / "FrameBusTestPeer") for config in ("debug", "release")
    ]
    for candidate in candidates:
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    pytest.fail("no FrameBusTestPeer: run `swift build` first or set FRAMEBUS_TEST_PEER")


def hostile_publisher(path: Path, scenario: str) -> subprocess.Popen:
    peer = subprocess.Popen([peer_binary(), "hostile-publisher", str(path), scenario], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    assert peer.stdout.readline().strip() == "listening"
    return peer


def test_framebussrc_wraps_a_surface_made_of_one_memfd_per_plane(gst_env, tmp_path):
    # Planes in different descriptors cannot be one GstMemory: the buffer gets one memory per plane, and the
    # video meta's offsets follow them. The peer fills Y with 0x11 and CbCr with 0x22 (64x48 NV12).
    path = tmp_path / "planes.sock"
    peer = hostile_publisher(path, "multi-descriptor")
    out = tmp_path / "out.i420"
    try:
        output = gst_launch(gst_env, f"framebussrc socket-path={path} accept=420v num-buffers=1 ! videoconvert ! "
                                     f"video/x-raw,format=I420 ! filesink location={out}")
    finally:
        peer.kill()
        peer.wait()
    assert out.read_bytes() == b"\x11" * (64 * 48) + b"\x22" * (32 * 24 * 2)
    stats = element_stats(output, "framebussrc-stats")
    assert stats["zero-copy"] == 1, stats  # videoconvert reads video meta: wrapped, not copied


def pressure_publisher(path: Path) -> subprocess.Popen:
    """FrameBusTestPeer's bus-publisher --bus-pressure: a real publisher whose real pressure monitor measures its
    real cost against a policy in which only the bus factor counts and any cost is serious. It waits for a subscriber,
    then publishes 64x48 frames of 20 ms; subscribers that ask see nominal, then serious with the bus factor. Its
    standard input is its lifeline: it exits when we close our end."""
    peer = subprocess.Popen([peer_binary(), "bus-publisher", str(path), "--size", "64x48", "--fps", "50",
                             "--wait-for-subscriber", "--bus-pressure"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env={**os.environ, "FRAMEBUS_TEST_LIFELINE": "stdin"})
    assert peer.stdout.readline().strip() == "listening"
    return peer


def test_framebussrc_posts_the_publishers_system_pressure_on_the_bus(gst_env, tmp_path):
    # gst-launch-1.0 -m prints every element message; the first pressure message comes right after connecting
    # (nominal: no frame published yet), the next when the publisher's monitor finds its cost serious.
    import queue
    import threading
    path = tmp_path / "pressure.sock"
    peer = pressure_publisher(path)
    launch = subprocess.Popen(["gst-launch-1.0", "-m", "-e", "framebussrc", f"socket-path={path}", "accept=420v",
                               "!", "fakesink"], env=gst_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True)
    lines: queue.Queue = queue.Queue()
    reader = threading.Thread(target=lambda: [lines.put(line) for line in launch.stdout] + [lines.put(None)],
                              daemon=True)
    reader.start()
    messages, output = [], []
    deadline = time.monotonic() + FRAME_TIMEOUT
    try:
        while time.monotonic() < deadline:
            try:
                line = lines.get(timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                break
            if line is None:
                break
            output.append(line)
            if "framebussrc-system-pressure," in line:
                messages.append(dict(re.findall(r"([a-z-]+)=\((?:string|double|guint64)\)\"?([^,;\"]*)", line)))
                if messages[-1].get("level") == "serious":
                    break
    finally:
        launch.send_signal(signal.SIGINT)  # -e: an end of stream, then it exits
        try:
            launch.wait(30)
        except subprocess.TimeoutExpired:
            launch.kill()
            launch.wait()
        peer.stdin.close()
        peer.kill()
        peer.wait()
    text = "".join(output)
    assert len(messages) >= 2, text
    assert messages[0]["level"] == "nominal" and messages[0]["factors"] == "", text
    assert messages[-1]["level"] == "serious" and messages[-1]["factors"] == "bus", text
    assert float(messages[-1]["cost"]) > 0, text
    assert messages[-1]["frame-duration"] == "20000000", text
    assert messages[-1]["frames-shed"] == "0", text


@pytest.mark.parametrize("scenario, accept", [
    ("unsealed-surface", "420v"),   # a memfd others could shrink: refused before it is mapped
    ("huge-compressed", "&8v0"),    # a 16384x16384 compressed surface in 4 KiB (and damaged compressed data)
    ("reannounce", "420v"),         # a surface id announced twice
    ("surface-flood", "420v"),      # more surfaces than the subscriber keeps
])
def test_framebussrc_stops_with_an_error_on_a_hostile_publisher(gst_env, tmp_path, scenario, accept):
    path = tmp_path / "hostile.sock"
    peer = hostile_publisher(path, scenario)
    try:
        result = subprocess.run(["gst-launch-1.0", "framebussrc", f"socket-path={path}", f"accept={accept}", "!",
                                 "fakesink"], env=gst_env, capture_output=True, text=True, timeout=FRAME_TIMEOUT)
    finally:
        peer.kill()
        peer.wait()
    # A GStreamer error (exit status 1), not a crash (a negative status is a signal).
    assert result.returncode == 1, result.stdout + result.stderr
    assert "ERROR: from element /GstPipeline:pipeline0/GstFramebusSrc:framebussrc0: The subscription ended" \
        in result.stdout + result.stderr, result.stdout + result.stderr


def test_framebussrc_counts_a_drop_of_every_sequence_without_overflow(gst_env, tmp_path):
    path = tmp_path / "drops.sock"
    peer = hostile_publisher(path, "drop-everything")  # DROP 0...2^64-1, then a frame and the end of stream
    try:
        output = gst_launch(gst_env, f"framebussrc socket-path={path} accept=420v ! fakesink")
    finally:
        peer.kill()
        peer.wait()
    stats = element_stats(output, "framebussrc-stats")
    assert stats["dropped-out-of-buffers"] == 2**64 - 1, stats  # saturated, not wrapped
