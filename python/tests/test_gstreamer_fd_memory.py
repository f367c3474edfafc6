"""framebussrc fd-memory=true: frames leave as descriptor-backed GStreamer memory (GstFdMemory for memfds,
GstDmaBufMemory for DMA-BUFs), so downstream can import a frame by its descriptor instead of copying it.

- framebus publish -> framebussrc fd-memory=true ! filesink: bit-exact, every frame as fd memory;
- a surface with a memfd per plane -> videoconvert: one fd memory per plane, the video meta's offsets follow them;
- downstream's view, from a real appsink in the system Python's GStreamer bindings (gi, GstAllocators): every
  memory is fd memory whose descriptor is a sealed, read-only memfd, and its bytes are the frame's.

Skipped like test_gstreamer.py (unless FRAMEBUS_REQUIRE_ALL is set); the appsink check also needs
/usr/bin/python3 with python3-gi and gir1.2-gst-plugins-base-1.0.
"""

import subprocess
import textwrap

import pytest

from test_gstreamer import (FRAME_TIMEOUT, MISSING, REQUIRE_ALL, distinct_frames, element_stats, frame_size,
                            gst_env, gst_launch, hostile_publisher, images)

__all__ = ["gst_env", "images"]  # fixtures, imported for pytest

if MISSING and not REQUIRE_ALL:
    pytestmark = pytest.mark.skip(reason=f"GStreamer bridge not testable here: {MISSING}")


def test_fd_memory_frames_reach_filesink_bit_exact(gst_env, tmp_path, publish, images):
    width, height, count = 192, 96, 12  # 192 = 3 x 64: GStreamer's own layout, which filesink can read
    publisher = publish("--format", "420v", "--images", str(images(width, height)), "--fps", "20")
    pictures = distinct_frames(publisher.path, "420v", 3)
    out = tmp_path / "out.raw"
    output = gst_launch(gst_env, f"framebussrc socket-path={publisher.path} accept=420v fd-memory=true "
                                 f"num-buffers={count} ! video/x-raw,format=NV12,width={width},height={height} ! "
                                 f"filesink location={out}", timeout=FRAME_TIMEOUT * 2)
    data = out.read_bytes()
    size = frame_size("NV12", width, height)
    assert len(data) == size * count
    for index in range(count):
        assert data[index * size:(index + 1) * size] in pictures, f"frame {index} is none of the pictures"
    stats = element_stats(output, "framebussrc-stats")
    assert stats["frames"] == count
    assert stats["zero-copy"] == count and stats["fd-memory"] == count, stats


def test_a_memfd_per_plane_becomes_one_fd_memory_per_plane(gst_env, tmp_path):
    path = tmp_path / "planes.sock"
    peer = hostile_publisher(path, "multi-descriptor")  # 64x48 NV12, Y bytes 0x11 and CbCr 0x22, two memfds
    out = tmp_path / "out.i420"
    try:
        output = gst_launch(gst_env, f"framebussrc socket-path={path} accept=420v fd-memory=true num-buffers=1 ! "
                                     f"videoconvert ! video/x-raw,format=I420 ! filesink location={out}")
    finally:
        peer.kill()
        peer.wait()
    assert out.read_bytes() == b"\x11" * (64 * 48) + b"\x22" * (32 * 24 * 2)
    stats = element_stats(output, "framebussrc-stats")
    assert stats["fd-memory"] == 1, stats


APPSINK_CHECK = textwrap.dedent("""
    import fcntl, mmap, os, sys
    import gi
    gi.require_version("Gst", "1.0")
    gi.require_version("GstAllocators", "1.0")
    from gi.repository import Gst, GstAllocators
    Gst.init(None)
    pipeline = Gst.parse_launch(
        f"framebussrc socket-path={sys.argv[1]} accept=420v fd-memory=true ! "
        "appsink name=sink sync=false max-buffers=1 drop=true")
    sink = pipeline.get_by_name("sink")
    pipeline.set_state(Gst.State.PLAYING)
    F_GET_SEALS = 1034
    found = 0
    for index in range(60):
        sample = sink.emit("try-pull-sample", 60 * Gst.SECOND)
        assert sample is not None, "no frame"
        buffer = sample.get_buffer()
        for m in range(buffer.n_memory()):
            memory = buffer.get_memory(m)  # (peek_memory's would be copied by the bindings, into system memory)
            if not GstAllocators.is_fd_memory(memory):
                # The source copies a frame while downstream (this script) still holds the previous one: its
                # held-frame budget. Those are ordinary memory by design.
                print("memory fd=0", flush=True)
                continue
            found += 1
            fd = GstAllocators.fd_memory_get_fd(memory)
            flags = fcntl.fcntl(fd, fcntl.F_GETFL)
            seals = fcntl.fcntl(fd, F_GET_SEALS)
            ok, info = memory.map(Gst.MapFlags.READ)
            assert ok
            mapped = bytes(info.data)
            memory.unmap(info)
            with mmap.mmap(fd, os.fstat(fd).st_size, mmap.MAP_SHARED, mmap.PROT_READ) as own:
                start = memory.offset
                same = own[start:start + len(mapped)] == mapped
            print(f"memory fd=1 dmabuf={int(GstAllocators.is_dmabuf_memory(memory))} "
                  f"readonly={int(flags & os.O_ACCMODE == os.O_RDONLY)} "
                  f"sealed={int(seals & 6 == 6 and seals & 24 != 0)} same={int(same)} size={len(mapped)}",
                  flush=True)
            del memory
        del buffer, sample
        if found >= 3:
            break
    pipeline.set_state(Gst.State.NULL)
""")


def test_downstream_gets_fd_memory_it_can_map_itself(gst_env, tmp_path, publish, images):
    check = subprocess.run(["/usr/bin/python3", "-c", "import gi; gi.require_version('GstAllocators', '1.0')"],
                           capture_output=True)
    if check.returncode != 0:
        message = "/usr/bin/python3 lacks python3-gi or gir1.2-gst-plugins-base-1.0"
        if REQUIRE_ALL:
            pytest.fail(f"FRAMEBUS_REQUIRE_ALL is set but {message}")
        pytest.skip(message)
    publisher = publish("--format", "420v", "--size", "192x96", "--fps", "20")
    result = subprocess.run(["/usr/bin/python3", "-c", APPSINK_CHECK, str(publisher.path)], env=gst_env,
                            capture_output=True, text=True, timeout=FRAME_TIMEOUT * 2)
    assert result.returncode == 0, f"{result.stdout}\n{result.stderr}"
    lines = [line for line in result.stdout.splitlines() if line.startswith("memory fd=1")]
    assert len(lines) == 3, result.stdout  # one memory per frame: both planes live in one memfd
    size = frame_size("NV12", 192, 96)
    for line in lines:
        fields = dict(part.split("=") for part in line.split()[1:])
        assert fields["fd"] == "1" and fields["dmabuf"] == "0", line
        assert fields["readonly"] == "1" and fields["sealed"] == "1" and fields["same"] == "1", line
        assert int(fields["size"]) >= size, line
