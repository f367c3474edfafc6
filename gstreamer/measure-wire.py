#!/usr/bin/env python3
"""Bytes on the wire: FrameBus's lossless layout over RTP (framebusenc ! rtpgstpay) against raw RTP (rtpvrawpay).

For each picture and format, the same frames go through both payloaders; their RTP packets are framed with
rtpstreampay (RFC 4571: a 2-byte length before each packet) into a file, which this script reads back to count
packets and bytes exactly. "wire" adds 28 bytes a packet (IPv4 and UDP headers); Ethernet framing is left out.
Run from the repository root after building the plugin (gstreamer/ci-build.sh or `make -C gstreamer`):

    python3 gstreamer/measure-wire.py            # Corpus pictures and videotestsrc patterns, NV12 and BGRA
    python3 gstreamer/measure-wire.py --frames 5

Prints a Markdown table: bytes per frame for each path and the ratio raw / FrameBus.
"""

import argparse
import os
import re
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
UDP_IP_HEADERS = 28

PICTURES = [
    # (label, kind, source)
    ("photo: kodim01 768x512", "photo", "Corpus/kodak/kodim01.png"),
    ("photo: kodim03 768x512", "photo", "Corpus/kodak/kodim03.png"),
    ("photo: astronaut 512x512", "photo", "Corpus/skimage/astronaut.png"),
    ("screen: doc_bzip2_manual 1080p", "screen", "Corpus/synthetic/doc_bzip2_manual_1920x1080.png"),
    ("screen: terminal 1080p", "screen", "Corpus/synthetic/terminal_1920x1080.png"),
    ("screen: ui_windows 1080p", "screen", "Corpus/synthetic/ui_windows_1920x1080.png"),
    ("screen: ui_app_mixed 1080p", "screen", "Corpus/synthetic/ui_app_mixed_1920x1080.png"),
    ("videotestsrc smpte 1280x720", "pattern", "smpte"),
    ("videotestsrc snow 1280x720 (noise)", "pattern", "snow"),
]

# FrameBus format -> (caps format into framebusenc, raw RTP caps path)
FORMATS = {
    "NV12": "videoconvert ! video/x-raw,format=I420 ! rtpvrawpay",  # I420 is NV12's samples, repacked exactly
    "BGRA": "rtpvrawpay",
}


def run(env, pipeline: str) -> str:
    result = subprocess.run(["gst-launch-1.0", "-m", *pipeline.split()], env=env, capture_output=True, text=True,
                            timeout=600)
    if result.returncode != 0:
        sys.exit(f"gst-launch-1.0 {pipeline}\n{result.stdout}\n{result.stderr}")
    return result.stdout


def packets(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    count = total = position = 0
    while position < len(data):
        (length,) = struct.unpack_from(">H", data, position)
        position += 2 + length
        count += 1
        total += length
    if position != len(data):
        sys.exit(f"{path}: not RFC 4571 framing")
    return count, total


def source(kind: str, what: str, fmt: str, frames: int) -> str:
    if kind == "pattern":
        return (f"videotestsrc num-buffers={frames} pattern={what} ! "
                f"video/x-raw,format={fmt},width=1280,height=720,framerate=30/1")
    return (f"filesrc location={ROOT / what} ! pngdec ! videoconvert ! video/x-raw,format={fmt} ! "
            f"imagefreeze num-buffers={frames} ! video/x-raw,framerate=30/1")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=3)
    arguments = parser.parse_args()
    env = dict(os.environ)
    env["GST_PLUGIN_PATH"] = os.pathsep.join(filter(None, [str(ROOT / "gstreamer" / "build"),
                                                           env.get("GST_PLUGIN_PATH")]))
    frames = arguments.frames
    print("| content | format | raw RTP bytes/frame (packets) | FrameBus RTP bytes/frame (packets) | "
          "compressed frame | ratio raw/FrameBus (wire) |")
    print("|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as folder:
        raw_path, compressed_path = Path(folder) / "raw.rtp", Path(folder) / "framebus.rtp"
        for label, kind, what in PICTURES:
            for fmt, raw_payloader in FORMATS.items():
                src = source(kind, what, fmt, frames)
                run(env, f"{src} ! {raw_payloader} ! rtpstreampay ! filesink location={raw_path}")
                output = run(env, f"{src} ! framebusenc ! rtpgstpay ! rtpstreampay ! "
                                  f"filesink location={compressed_path}")
                stats = dict(re.findall(r"(compressed-bytes|frames)=\(guint64\)(\d+)", output))
                assert int(stats["frames"]) == frames, output
                raw_count, raw_bytes = packets(raw_path)
                fb_count, fb_bytes = packets(compressed_path)
                raw_wire = raw_bytes + UDP_IP_HEADERS * raw_count
                fb_wire = fb_bytes + UDP_IP_HEADERS * fb_count
                print(f"| {label} | {fmt} | {raw_wire / frames:,.0f} ({raw_count / frames:,.0f}) | "
                      f"{fb_wire / frames:,.0f} ({fb_count / frames:,.0f}) | "
                      f"{int(stats['compressed-bytes']) / frames:,.0f} | {raw_wire / fb_wire:.2f} |")


if __name__ == "__main__":
    main()
