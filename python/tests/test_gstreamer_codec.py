"""framebusenc / framebusdec and framebussrc's compressed passthrough, with the real gst-launch-1.0, bit-exact.

- videotestsrc ! framebusenc ! framebusdec: every byte of every frame back, in the five FrameBus formats (and BGRx),
  timestamps and durations passed through;
- videotestsrc ! tee (raw frames to a file) ! framebusenc ! rtpgstpay ! udpsink -> udpsrc ! rtpgstdepay !
  framebusdec ! framebussink -> a Python subscriber: each frame it gets is one of the frames sent, byte for byte;
- the same into a file and back (gdppay / gdpdepay: matroskamux takes only the codecs it knows, docs/GSTREAMER.md);
- damaged, truncated, foreign and mismatched payloads into framebusdec: dropped with a warning (or an error with
  max-errors=0), never a crash, and every frame that does come out is exact;
- framebus publish --compressed -> framebussrc ! (passthrough) the publisher's own compressed bytes, which
  framebusdec decodes bit-exact, also after crossing RTP.

Skips (saying what is missing) without GStreamer or the built plugin, unless FRAMEBUS_REQUIRE_ALL is set.
"""

import os
import random
import re
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest

from conftest import ROOT
from test_gstreamer import (FRAME_TIMEOUT, PLUGIN_DIR, REQUIRE_ALL, collect, distinct_frames, element_stats,
                            free_udp_port, frame_size, gst_launch, gst_start, gst_stop, images)

import framebus

ELEMENTS = ("videotestsrc", "filesink", "filesrc", "fakesink", "tee", "queue", "udpsrc", "udpsink", "rtpgstpay",
            "rtpgstdepay", "gdppay", "gdpdepay", "multifilesrc", "multifilesink")


def _missing() -> str | None:
    for tool in ("gst-launch-1.0", "gst-inspect-1.0"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (apt-get install gstreamer1.0-tools)"
    for element in ELEMENTS:
        if subprocess.run(["gst-inspect-1.0", "--exists", element], capture_output=True).returncode != 0:
            return f"GStreamer element {element} is not installed (apt-get install gstreamer1.0-plugins-base " \
                   "gstreamer1.0-plugins-good gstreamer1.0-plugins-bad)"
    if not (PLUGIN_DIR / "libgstframebus.so").exists():
        return f"the GStreamer plugin is not built: no {PLUGIN_DIR}/libgstframebus.so (run gstreamer/ci-build.sh)"
    return None


MISSING = _missing()
if MISSING and not REQUIRE_ALL:
    pytestmark = pytest.mark.skip(reason=f"GStreamer codec elements not testable here: {MISSING}")

FORMATS = {  # GStreamer format -> (FrameBus base format, compressed caps format)
    "NV12": ("420v", "&8v0"),
    "P010_10LE": ("x420", "&xv0"),
    "BGRA": ("BGRA", "&BGA"),
    "BGRx": ("BGRA", "&BGA"),
}


@pytest.fixture(scope="module")
def gst_env(tmp_path_factory):
    if MISSING:
        pytest.fail(f"FRAMEBUS_REQUIRE_ALL is set but {MISSING}")
    env = dict(os.environ)
    env["GST_PLUGIN_PATH"] = os.pathsep.join(filter(None, [str(PLUGIN_DIR), os.environ.get("GST_PLUGIN_PATH")]))
    env["GST_REGISTRY"] = str(tmp_path_factory.mktemp("gst") / "registry.bin")
    env["GST_DEBUG_NO_COLOR"] = "1"
    for element in ("framebusenc", "framebusdec", "framebussink", "framebussrc"):
        inspect = subprocess.run(["gst-inspect-1.0", element], env=env, capture_output=True, text=True, timeout=120)
        assert inspect.returncode == 0, f"gst-inspect-1.0 {element} failed:\n{inspect.stdout}\n{inspect.stderr}"
    return env


def compressed_caps(fmt: str, width: int, height: int, rate: str | None = "30/1") -> str:
    """Caps for a launch line: '&' is no plain caps character, so the format is quoted."""
    caps = f'video/x-framebus-compressed,format=(string)"{fmt}",width={width},height={height}'
    return caps + (f",framerate={rate}" if rate else "")


def split_frames(data: bytes, size: int) -> list[bytes]:
    assert len(data) % size == 0, f"{len(data)} bytes are no whole number of {size}-byte frames"
    return [data[i:i + size] for i in range(0, len(data), size)]


def reference_frames(env, tmp_path: Path, caps: str, count: int, pattern: str = "ball") -> list[bytes]:
    out = tmp_path / "reference.raw"
    gst_launch(env, f"videotestsrc num-buffers={count} pattern={pattern} ! {caps} ! filesink location={out}")
    return out.read_bytes()


def wait_until_bound(port: int, process: subprocess.Popen) -> None:
    """Returns once something listens on 127.0.0.1:port (binding it ourselves then fails), so the receiver is up
    before anything is sent. Bounded; fails if the receiver exits first."""
    deadline = time.monotonic() + FRAME_TIMEOUT
    while time.monotonic() < deadline:
        assert process.poll() is None, f"the receiver exited:\n{process.stdout.read()}"
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                return
        time.sleep(0.05)
    pytest.fail(f"nothing bound UDP port {port} within {FRAME_TIMEOUT} s")


# ---- the elements --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("element, properties", [("framebusenc", ["threads", "effort", "stats"]),
                                                  ("framebusdec", ["threads", "stats", "max-errors"]),
                                                  ("framebussrc", ["decode"])])
def test_gst_inspect_documents_the_codec_elements(gst_env, element, properties):
    output = subprocess.run(["gst-inspect-1.0", element], env=gst_env, capture_output=True, text=True,
                            timeout=120).stdout
    assert "video/x-framebus-compressed" in output, output
    for name in properties:
        match = re.search(rf"^\s+{re.escape(name)}\s+: (.+)$", output, re.MULTILINE)
        assert match, f"{element} does not list {name}:\n{output}"
        assert len(match.group(1).strip()) > 20, f"{element}'s {name} has no real description: {match.group(1)}"
    plugin = subprocess.run(["gst-inspect-1.0", str(PLUGIN_DIR / "libgstframebus.so")], env=gst_env,
                            capture_output=True, text=True, timeout=120).stdout
    assert re.search(r"Version\s+0\.2\.0", plugin), plugin


def test_enc_effort_best_writes_other_smaller_bytes_that_decode_bit_exact(gst_env, tmp_path):
    """effort=best (fb_codec_options.effort) reaches the codec: on content where the two efforts differ (videotestsrc's
    pinwheel: long runs and edges, like screen content) its frames are other bytes, smaller in all, and framebusdec
    restores every byte either way."""
    width, height, count = 256, 192, 3
    caps = f"video/x-raw,format=BGRA,width={width},height={height},framerate=30/1"
    reference = reference_frames(gst_env, tmp_path, caps, count, pattern="pinwheel")
    encoded = {}
    for effort in ("fast", "best"):
        compressed = tmp_path / f"{effort}.bin"
        gst_launch(gst_env, f"videotestsrc num-buffers={count} pattern=pinwheel ! {caps} ! "
                            f"framebusenc effort={effort} threads=1 ! filesink location={compressed}")
        encoded[effort] = compressed.read_bytes()
        decoded = tmp_path / f"{effort}.raw"
        gst_launch(gst_env, f"videotestsrc num-buffers={count} pattern=pinwheel ! {caps} ! "
                            f"framebusenc effort={effort} ! framebusdec ! {caps} ! filesink location={decoded}")
        assert decoded.read_bytes() == reference, f"effort={effort}: not bit-exact"
    assert encoded["best"] != encoded["fast"]
    assert len(encoded["best"]) < len(encoded["fast"]), {name: len(data) for name, data in encoded.items()}


@pytest.mark.parametrize("fmt, colorimetry", [("NV12", ""), ("NV12", ",colorimetry=1:4:0:0"), ("P010_10LE", ""),
                                              ("BGRA", ""), ("BGRx", "")])
def test_enc_dec_round_trip_is_bit_exact_with_timestamps(gst_env, tmp_path, fmt, colorimetry):
    width, height, count = 200, 120, 30  # 200 is no multiple of 64
    caps = f"video/x-raw,format={fmt},width={width},height={height},framerate=30/1{colorimetry}"
    reference = reference_frames(gst_env, tmp_path, caps, count)
    out = tmp_path / "out.raw"
    output = gst_launch(gst_env, f"-v videotestsrc num-buffers={count} pattern=ball ! {caps} ! framebusenc ! "
                                 f"framebusdec ! {caps} ! tee name=t t. ! queue ! filesink location={out} "
                                 f"t. ! queue ! fakesink silent=false")
    assert out.read_bytes() == reference  # every byte of every frame

    # The compressed caps name the FrameBus format; a full-range NV12 stream is 420f's variant.
    expected = "&8f0" if "1:4:0:0" in colorimetry else FORMATS[fmt][1]
    encoded = [line for line in output.splitlines() if "framebusenc0.GstPad:src: caps" in line]
    assert encoded and f'format=(string)"\\{expected}"' in encoded[-1], encoded
    decoded = [line for line in output.splitlines() if "framebusdec0.GstPad:src: caps" in line]
    assert decoded and f"format=(string){fmt}" in decoded[-1], decoded
    if colorimetry:
        assert "colorimetry=(string)1:4:0:0" in decoded[-1], decoded[-1]
    # PTS and durations as videotestsrc gave them: n/30 s, 1/30 s each.
    timings = re.findall(r"fakesink0:sink\) \(\d+ bytes, dts: [^,]+, pts: (\d+):(\d+):(\d+)\.(\d+), "
                         r"duration: 0:00:00\.(\d+)", output)
    assert len(timings) == count, output
    for index, (hours, minutes, seconds, nanoseconds, duration) in enumerate(timings):
        pts = ((int(hours) * 60 + int(minutes)) * 60 + int(seconds)) * 10**9 + int(nanoseconds)
        assert pts == index * 10**9 // 30, f"buffer {index}: pts {pts}"
        assert int(duration) == (index + 1) * 10**9 // 30 - pts, f"buffer {index}: duration {duration}"
    stats = element_stats(output, "framebusenc-stats")
    assert stats["frames"] == count and stats["raw-bytes"] == len(reference)
    assert 0 < stats["compressed-bytes"] < stats["raw-bytes"], stats


def test_encoder_output_does_not_depend_on_its_thread_count(gst_env, tmp_path):
    caps = "video/x-raw,format=BGRA,width=640,height=360,framerate=30/1"
    outputs = []
    for threads in (1, 2, 0):
        out = tmp_path / f"threads{threads}.fbc"
        gst_launch(gst_env, f"videotestsrc num-buffers=4 pattern=smpte ! {caps} ! framebusenc threads={threads} ! "
                            f"filesink location={out}")
        outputs.append(out.read_bytes())
    assert outputs[0] and outputs[0] == outputs[1] == outputs[2]


# ---- through the network and a file --------------------------------------------------------------------------

@pytest.mark.parametrize("fmt, accept", [("NV12", "420v"), ("P010_10LE", "x420"), ("BGRA", "BGRA")])
def test_rtp_round_trip_to_a_subscriber_is_bit_exact(gst_env, tmp_path, fmt, accept):
    width, height, wanted = 160, 96, 15
    caps = f"video/x-raw,format={fmt},width={width},height={height},framerate=30/1"
    port = free_udp_port()
    far = tmp_path / "far.sock"
    sent = tmp_path / "sent.raw"
    rtp_caps = "application/x-rtp,media=application,clock-rate=90000,encoding-name=X-GST,payload=96"
    receiver = gst_start(gst_env, f"udpsrc address=127.0.0.1 port={port} buffer-size=16777216 caps={rtp_caps} ! "
                                  f"rtpgstdepay ! framebusdec ! framebussink socket-path={far} sync=false")
    sender = None
    try:
        wait_until_bound(port, receiver)
        # A live source (30 frames a second, every frame different for 30 s) whose raw frames also go to a file
        # through a tee: the far side is compared with what was really sent. It runs until the subscriber on the
        # far side has its frames, however long the far sink's socket takes to appear on a loaded machine.
        sender = gst_start(gst_env, f"videotestsrc is-live=true num-buffers=900 pattern=ball ! {caps} ! tee name=t "
                                    f"t. ! queue ! filesink location={sent} "
                                    f"t. ! queue ! framebusenc ! rtpgstpay ! udpsink host=127.0.0.1 port={port}")
        frames = collect(far, accept, until=lambda frames: len(frames) >= wanted, queue=16)
    finally:
        sender_output = gst_stop(sender) if sender else ""
        receiver_output = gst_stop(receiver)
    assert sender.returncode == 0, sender_output
    originals = split_frames(sent.read_bytes(), frame_size(fmt, width, height))
    assert len(set(originals)) == len(originals)  # every frame different: each is identifiable
    position = {frame: index for index, frame in enumerate(originals)}
    assert len(frames) >= wanted, f"{len(frames)} frames crossed\n{sender_output}\n{receiver_output}"
    indices = []
    for frame, pixels in frames:
        assert (frame.width, frame.height, frame.format) == (width, height, accept)
        assert pixels in position, "a far-side frame is none of the frames sent"
        indices.append(position[pixels])
    assert indices == sorted(set(indices))  # in order, none twice
    # framebusdec decoded straight into the far sink's surfaces (its pool, padded rows and all): no copy there.
    stats = element_stats(receiver_output, "framebussink-stats")
    assert stats["zero-copy"] == stats["published"] >= len(frames) and stats["copied"] == 0, stats


def test_file_round_trip_is_bit_exact(gst_env, tmp_path):
    width, height, count = 320, 240, 40
    caps = f"video/x-raw,format=NV12,width={width},height={height},framerate=25/1"
    sent, stored, back = tmp_path / "sent.raw", tmp_path / "frames.gdp", tmp_path / "back.raw"
    gst_launch(gst_env, f"videotestsrc num-buffers={count} pattern=smpte ! {caps} ! tee name=t "
                        f"t. ! queue ! filesink location={sent} "
                        f"t. ! queue ! framebusenc ! gdppay ! filesink location={stored}")
    output = gst_launch(gst_env, f"filesrc location={stored} ! gdpdepay ! framebusdec ! filesink location={back}")
    assert back.read_bytes() == sent.read_bytes()
    assert len(sent.read_bytes()) == count * frame_size("NV12", width, height)
    assert stored.stat().st_size < len(sent.read_bytes()) // 4  # compressed in the file, test bars compress well
    assert element_stats(output, "framebusdec-stats") == {"frames": count, "corrupt": 0}


def test_srt_round_trip_is_bit_exact(gst_env, tmp_path):
    if subprocess.run(["gst-inspect-1.0", "--exists", "srtsink"], capture_output=True).returncode != 0:
        if REQUIRE_ALL:
            pytest.fail("srtsink is not installed (apt-get install gstreamer1.0-plugins-bad)")
        pytest.skip("srtsink is not installed (apt-get install gstreamer1.0-plugins-bad)")
    width, height, count = 160, 96, 60
    caps = f"video/x-raw,format=NV12,width={width},height={height},framerate=30/1"
    port = free_udp_port()
    sent, received = tmp_path / "sent.raw", tmp_path / "received.raw"
    # SRT carries a byte stream in 1316-byte messages: gdppay frames the buffers (and carries the caps) in it.
    sender = gst_start(gst_env, f"videotestsrc num-buffers={count} pattern=ball ! {caps} ! tee name=t "
                                f"t. ! queue ! filesink location={sent} t. ! queue ! framebusenc ! gdppay ! "
                                f"srtsink uri=srt://127.0.0.1:{port}?mode=listener wait-for-connection=true")
    receiver = gst_start(gst_env, f"srtsrc uri=srt://127.0.0.1:{port}?mode=caller ! gdpdepay ! framebusdec ! "
                                  f"filesink location={received}")
    try:
        sender_output = gst_stop(sender, timeout=FRAME_TIMEOUT, interrupt=False)
    finally:
        receiver_output = gst_stop(receiver)  # SRT has no end of stream: SIGINT, and -e ends the file cleanly
    assert sender.returncode == 0, sender_output
    size = frame_size("NV12", width, height)
    originals = split_frames(sent.read_bytes(), size)
    arrived = split_frames(received.read_bytes(), size)
    assert len(originals) == count
    # SRT is reliable and ordered: the frames that arrived are the first ones sent, every byte (srtsink may close
    # before the last few leave).
    assert len(arrived) >= 10, receiver_output
    assert arrived == originals[:len(arrived)]


# ---- hostile input ---------------------------------------------------------------------------------------------

def encode_to_files(env, folder: Path, caps: str, count: int, pattern: str = "ball") -> list[bytes]:
    folder.mkdir()
    gst_launch(env, f"videotestsrc num-buffers={count} pattern={pattern} ! {caps} ! framebusenc ! "
                    f"multifilesink location={folder}/f%05d.fbc")
    return [(folder / f"f{index:05d}.fbc").read_bytes() for index in range(count)]


def decode_files(env, folder: Path, frames: list[bytes], caps: str, out: Path, options: str = ""):
    for index, data in enumerate(frames):
        (folder / f"g{index:05d}.fbc").write_bytes(data)
    return subprocess.run(["gst-launch-1.0", "-m", "multifilesrc", f"location={folder}/g%05d.fbc", f"caps={caps}",
                           "!", "framebusdec", *options.split(), "!", "filesink", f"location={out}"], env=env,
                          capture_output=True, text=True, timeout=FRAME_TIMEOUT * 2)


def test_damaged_payloads_are_dropped_with_a_warning_and_good_frames_stay_exact(gst_env, tmp_path):
    width, height, count = 64, 48, 8
    caps = f"video/x-raw,format=NV12,width={width},height={height},framerate=30/1"
    reference = split_frames(reference_frames(gst_env, tmp_path, caps, count), frame_size("NV12", width, height))
    good = encode_to_files(gst_env, tmp_path / "good", caps, count)
    other_size = encode_to_files(gst_env, tmp_path / "other",
                                 "video/x-raw,format=NV12,width=66,height=48,framerate=30/1", 1)[0]
    bgra = encode_to_files(gst_env, tmp_path / "bgra",
                           f"video/x-raw,format=BGRA,width={width},height={height},framerate=30/1", 1)[0]
    flipped = bytearray(good[1])
    flipped[len(flipped) - 3] ^= 0x40  # inside the last payload: its checksum no longer matches
    header = bytearray(good[4])
    header[12] ^= 0x02  # the width in the header (the header checksum catches it; so does the caps check)
    frames = [
        good[0],
        bytes(flipped),
        good[2][:len(good[2]) // 2],         # truncated
        random.Random(3).randbytes(len(good[3])),  # noise
        bytes(header),
        other_size,                          # a valid frame of another size than the caps say
        bgra,                                # a valid frame of another format
        b"FBSC",                             # shorter than a header
    ]
    folder = tmp_path / "mixed"
    folder.mkdir()
    out = tmp_path / "out.raw"
    compressed = compressed_caps("&8v0", width, height)
    result = decode_files(gst_env, folder, frames, compressed, out)
    assert result.returncode == 0, result.stdout + result.stderr  # not a crash (negative), not an error (1)
    assert out.read_bytes() == reference[0], "the one intact frame did not come out exact (or others came out)"
    assert element_stats(result.stdout, "framebusdec-stats") == {"frames": 1, "corrupt": 7}
    assert result.stdout.count("WARNING: from element /GstPipeline:pipeline0/GstFramebusDec:framebusdec0: "
                               "A damaged compressed frame was dropped") == 7, result.stdout

    # max-errors=0: the first damaged frame is a GStreamer error (exit status 1), still no crash.
    strict = decode_files(gst_env, folder, frames, compressed, tmp_path / "strict.raw", "max-errors=0")
    assert strict.returncode == 1, strict.stdout + strict.stderr
    assert "ERROR: from element /GstPipeline:pipeline0/GstFramebusDec:framebusdec0: A damaged compressed frame " \
           "was dropped" in strict.stdout + strict.stderr


@pytest.mark.parametrize("fmt", ["NV12", "P010_10LE", "BGRA"])
def test_random_damage_never_crashes_and_never_gives_a_wrong_frame(gst_env, tmp_path, fmt):
    width, height = 96, 64
    caps = f"video/x-raw,format={fmt},width={width},height={height},framerate=30/1"
    original = reference_frames(gst_env, tmp_path, caps, 1, pattern="snow")
    encoded = encode_to_files(gst_env, tmp_path / "one", caps, 1, pattern="snow")[0]
    rng = random.Random(16)
    damaged = []
    for _ in range(120):
        data = bytearray(encoded)
        kind = rng.randrange(3)
        if kind == 0:      # flip bits here and there
            for _ in range(rng.randint(1, 4)):
                data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
        elif kind == 1:    # cut short
            data = data[:rng.randrange(len(data))] or bytearray(b"\0")
        else:              # overwrite a run with noise
            start = rng.randrange(len(data))
            data[start:start + rng.randint(1, 64)] = rng.randbytes(rng.randint(1, 64))
        damaged.append(bytes(data))
    folder = tmp_path / "damaged"
    folder.mkdir()
    out = tmp_path / "out.raw"
    result = decode_files(gst_env, folder, damaged, compressed_caps(FORMATS[fmt][1], width, height), out)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    stats = element_stats(result.stdout, "framebusdec-stats")
    assert stats["frames"] + stats["corrupt"] == len(damaged), stats
    assert stats["corrupt"] > len(damaged) // 2, stats  # the checksums catch nearly everything
    # Whatever decoded (damage in bytes nobody reads) decoded to the original, every byte.
    for frame in split_frames(out.read_bytes(), len(original)):
        assert frame == original


# ---- framebussrc passes compressed frames through ---------------------------------------------------------------

def compressed_pictures(path: Path, accept: str, count: int) -> set[bytes]:
    """The `count` different compressed frames a looping `framebus publish --images --compressed` sends."""
    seen: set[bytes] = set()
    with framebus.Subscriber(str(path), accept=[accept], queue=4, wait=True, timeout=FRAME_TIMEOUT) as bus:
        deadline = time.monotonic() + FRAME_TIMEOUT
        while len(seen) < count:
            assert time.monotonic() < deadline, f"saw {len(seen)} of {count} compressed pictures"
            event = bus.next_event(timeout=1)
            assert not isinstance(event, framebus.EndOfStream), f"the publisher ended: {event}"
            if isinstance(event, framebus.Frame):
                with event as frame:
                    seen.add(bytes(frame.compressed_bytes))
    return seen


@pytest.mark.parametrize("publish_format, fmt, compressed", [("420v", "NV12", "&8v0"), ("BGRA", "BGRA", "&BGA")])
def test_framebussrc_passes_the_publishers_compressed_bytes_through(gst_env, tmp_path, publish, images,
                                                                    publish_format, fmt, compressed):
    width, height, count = 160, 96, 9
    publisher = publish("--format", publish_format, "--images", str(images(width, height)), "--fps", "20",
                        "--compressed")
    pictures = distinct_frames(publisher.path, publish_format, 3)
    encoded = compressed_pictures(publisher.path, compressed, 3)

    # Downstream takes only the compressed caps: the publisher's bytes leave as they are, one file per frame.
    folder = tmp_path / "passed"
    folder.mkdir()
    output = gst_launch(gst_env, f"framebussrc socket-path={publisher.path} num-buffers={count} ! "
                                 f"{compressed_caps(compressed, width, height, rate=None)} ! "
                                 f"multifilesink location={folder}/g%05d.fbc", timeout=FRAME_TIMEOUT * 2)
    passed = [(folder / f"g{index:05d}.fbc").read_bytes() for index in range(count)]
    for index, data in enumerate(passed):
        assert data in encoded, f"frame {index} is not the publisher's compressed bytes"
    stats = element_stats(output, "framebussrc-stats")
    assert stats["passed-through"] == count and stats["decoded"] == 0, stats

    # And framebusdec turns them into the published pictures, bit-exact.
    out = tmp_path / "decoded.raw"
    result = subprocess.run(["gst-launch-1.0", "-m", "multifilesrc", f"location={folder}/g%05d.fbc",
                             f"caps={compressed_caps(compressed, width, height)}", "!", "framebusdec", "!",
                             "filesink", f"location={out}"], env=gst_env, capture_output=True, text=True,
                            timeout=FRAME_TIMEOUT * 2)
    assert result.returncode == 0, result.stdout + result.stderr
    decoded = split_frames(out.read_bytes(), frame_size(fmt, width, height))
    assert len(decoded) == count
    for frame in decoded:
        assert frame in pictures

    # framebussrc ! framebusdec: passed through, decoded by the element (not by the source).
    output = gst_launch(gst_env, f"framebussrc socket-path={publisher.path} num-buffers={count} ! framebusdec ! "
                                 f"filesink location={out}", timeout=FRAME_TIMEOUT * 2)
    assert element_stats(output, "framebussrc-stats")["passed-through"] == count
    assert element_stats(output, "framebusdec-stats") == {"frames": count, "corrupt": 0}
    assert all(frame in pictures for frame in split_frames(out.read_bytes(), frame_size(fmt, width, height)))


def test_compressed_frames_cross_rtp_without_being_decoded_on_the_way(gst_env, tmp_path, publish, images):
    width, height = 160, 96
    publisher = publish("--format", "420v", "--images", str(images(width, height)), "--fps", "10", "--compressed")
    pictures = distinct_frames(publisher.path, "420v", 3)
    port = free_udp_port()
    far = tmp_path / "far.sock"
    rtp_caps = "application/x-rtp,media=application,clock-rate=90000,encoding-name=X-GST,payload=96"
    receiver = gst_start(gst_env, f"udpsrc address=127.0.0.1 port={port} buffer-size=16777216 caps={rtp_caps} ! "
                                  f"rtpgstdepay ! framebusdec ! framebussink socket-path={far} sync=false")
    sender = None
    try:
        wait_until_bound(port, receiver)
        # decode=false: rtpgstpay takes anything, so without it the source would decode (raw first).
        sender = gst_start(gst_env, f"framebussrc socket-path={publisher.path} accept=&8v0 decode=false ! "
                                    f"rtpgstpay config-interval=1 ! udpsink host=127.0.0.1 port={port}")
        frames = collect(far, "420v", until=lambda frames: len(frames) >= 9)
    finally:
        sender_output = gst_stop(sender) if sender else ""
        receiver_output = gst_stop(receiver)
    assert len(frames) >= 9, f"{len(frames)} frames crossed\n{sender_output}\n{receiver_output}"
    for _, pixels in frames:
        assert pixels in pictures
    assert len({pixels for _, pixels in frames}) == 3
    stats = element_stats(sender_output, "framebussrc-stats")
    assert stats["passed-through"] == stats["frames"] > 0 and stats["decoded"] == 0, stats


def test_a_hostile_publishers_compressed_frame_passes_through_and_is_dropped_by_framebusdec(gst_env, tmp_path):
    from test_gstreamer import hostile_publisher

    # The peer announces an honest compressed surface, sends a frame whose 64 bytes are no compressed frame, then a
    # 16384x16384 compressed surface in 4 KiB (refused: the subscription ends).
    path = tmp_path / "hostile.sock"
    peer = hostile_publisher(path, "huge-compressed")
    try:
        result = subprocess.run(["gst-launch-1.0", "-m", "framebussrc", f"socket-path={path}", "accept=&8v0", "!",
                                 "framebusdec", "!", "fakesink"], env=gst_env, capture_output=True, text=True,
                                timeout=FRAME_TIMEOUT)
    finally:
        peer.kill()
        peer.wait()
    output = result.stdout + result.stderr
    assert result.returncode == 1, output  # the source's error, not a crash
    assert "WARNING: from element /GstPipeline:pipeline0/GstFramebusDec:framebusdec0: A damaged compressed frame " \
           "was dropped" in output, output
    assert "ERROR: from element /GstPipeline:pipeline0/GstFramebusSrc:framebussrc0: The subscription ended" \
        in output, output
