"""How the Python subscriber holds frames and owns descriptors: arrays outliving a frame's ``with`` block, the
garbage collector releasing a frame inside the subscriber's lock, and a refused surface's descriptors."""

import fcntl
import os
import socket
import struct
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

import framebus
from framebus import _wire
from conftest import ROOT


def frames(bus, count, timeout=30.0):
    deadline = time.monotonic() + timeout
    while count and time.monotonic() < deadline:
        event = bus.next_event(timeout=1.0)
        if isinstance(event, framebus.Frame):
            count -= 1
            yield event
        elif isinstance(event, framebus.EndOfStream):
            return


def events_for(bus, seconds):
    """Every event within `seconds`."""
    seen, deadline = [], time.monotonic() + seconds
    while time.monotonic() < deadline:
        event = bus.next_event(timeout=0.1)
        if event is not None:
            seen.append(event)
    return seen


@pytest.mark.filterwarnings("ignore:.*arrays of their planes are still alive:RuntimeWarning")
def test_planes_kept_past_the_with_block_keep_their_pixels(publish, kodak):
    # A consumer batching frames for a model keeps each frame's luma plane after its `with` block. The planes must
    # not silently show other frames' pixels: the frames stay held while their planes live (the publisher, out of
    # buffers for us, drops frames instead of reusing them), and go back when the planes go.
    publisher = publish("--images", str(kodak), "--format", "420v", "--fps", "60")
    with framebus.Subscriber(str(publisher.path), accept=["420v"], queue=2) as bus:
        kept = []
        for frame in frames(bus, bus.maximum_held_frames):
            with frame:
                luma = frame.planes[0]
                kept.append((luma, luma.copy(), frame))
        assert len(kept) == bus.maximum_held_frames
        for _, _, frame in kept:
            assert frame.is_released
            with pytest.raises(framebus.FrameBusError):
                frame.planes
        later = events_for(bus, 1.5)  # the publisher goes on at 60 fps over three photographs
        assert not any(isinstance(e, framebus.Frame) for e in later), "a frame came while every hold was kept"
        assert any(isinstance(e, framebus.Dropped) and e.reason == "outOfBuffers" for e in later)
        for index, (luma, snapshot, _) in enumerate(kept):
            assert np.array_equal(luma, snapshot), f"kept plane {index} changed after its frame's with block"
        del kept, luma, frame
        assert next(frames(bus, 1), None) is not None, "letting the planes go did not release their frames"


@pytest.mark.filterwarnings("ignore:.*arrays of their planes are still alive:RuntimeWarning")
def test_a_view_of_a_view_keeps_its_frame_held_and_a_copy_does_not(publish):
    publisher = publish("--size", "64x48", "--format", "420v", "--fps", "60")
    with framebus.Subscriber(str(publisher.path), accept=["420v"], queue=2) as bus:
        limit = bus.maximum_held_frames
        viewed, copies = None, []
        for frame in frames(bus, limit):
            with frame:
                if viewed is None:
                    viewed = frame.planes[1][4:8, :, 0][::2].T  # a view of a view of a view
                else:
                    copies.append(np.array(frame.planes[0]))
        assert viewed is not None and not viewed.flags.writeable and all(c.flags.owndata for c in copies)
        # The copies released their frames: as many new ones can come. Keep them, and the view's frame is the one
        # that keeps the publisher from sending more.
        kept = list(frames(bus, limit - 1))
        assert len(kept) == limit - 1, "frames released by their copies' with blocks did not come back"
        later = events_for(bus, 1.5)
        assert not any(isinstance(e, framebus.Frame) for e in later), "the view did not keep its frame held"
        del viewed
        assert next(frames(bus, 1), None) is not None, "letting the view go did not release its frame"


# The two scenarios below deadlock on a subscriber whose releases take its lock; each runs in a process of its own,
# with a time limit, so that a deadlock fails the test instead of hanging it.
LOCKED_RELEASE = """
import gc, sys, threading, time
sys.path.insert(0, sys.argv[3])
import framebus
bus = framebus.Subscriber(sys.argv[1], accept=["420v"], queue=2, engine="python")  # the test patches that engine's lock
held = []
deadline = time.monotonic() + 60
while len(held) < bus.maximum_held_frames and time.monotonic() < deadline:
    event = bus.next_event(timeout=1)
    if isinstance(event, framebus.Frame):
        held.append(event)
assert len(held) == bus.maximum_held_frames, held
if sys.argv[2] == "gc":
    # Every frame we may hold sits in a reference cycle, so only the cyclic collector frees them, and it runs
    # inside the subscriber's lock (as it may at any allocation there).
    gc.disable()
    cycle = [held]
    cycle.append(cycle)
    del held, cycle, event
    def release():
        with bus._lock:
            gc.collect()
else:
    # Another thread releases while the socket's lock is taken; the reader waits in next_event meanwhile.
    def release():
        with bus._lock:
            for frame in held:
                frame.release()
            time.sleep(0.2)
releaser = threading.Thread(target=release, daemon=True)
releaser.start()
if sys.argv[2] == "gc":
    releaser.join(timeout=20)
    if releaser.is_alive():
        print("deadlocked", flush=True)
        import os; os._exit(3)
deadline = time.monotonic() + 20
while time.monotonic() < deadline:
    event = bus.next_event(timeout=1)
    if isinstance(event, framebus.Frame):
        print("flowing", flush=True)
        break
else:
    print("stuck", flush=True)
    import os; os._exit(4)
releaser.join(timeout=20)
print("alive" if releaser.is_alive() else "done", flush=True)
import os; os._exit(0)
"""


@pytest.mark.parametrize("scenario", ["gc", "thread"])
def test_releasing_inside_the_subscribers_lock_neither_deadlocks_nor_loses_the_release(publish, scenario):
    publisher = publish("--size", "64x48", "--format", "420v", "--fps", "60")
    result = subprocess.run([sys.executable, "-c", LOCKED_RELEASE, str(publisher.path), scenario,
                             str(ROOT / "python")], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.split() == ["flowing", "done"], result.stdout + result.stderr


# ---- a fake publisher that sends a surface the subscriber must refuse ----

FOURCC_420V = framebus.fourcc("420v")
# F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL
F_SEALS_ALL = 0x2 | 0x4 | 0x8 | 0x1


def encode_welcome() -> bytes:
    body = struct.pack("<HHHHIIQQQHHI", _wire.VERSION, 1, 2, 2, FOURCC_420V, _wire.MAXIMUM_MESSAGE_SIZE, 1, 1, 0, 64,
                       0, 0)
    return struct.pack("<HHI", _wire.WELCOME, 0, 8 + len(body)) + body


def encode_surface(byte_count: int) -> bytes:
    """A 4x2 420v surface in one descriptor: Y at 0 (4 bytes a row), CbCr at 8."""
    body = struct.pack("<QIIIHBBQ", 1, FOURCC_420V, 4, 2, _wire.BACKING_MEMFD, 1, 2, 0)
    body += struct.pack("<4Q", byte_count, 0, 0, 0)
    body += struct.pack("<IIQIIII", 0, 0, 0, 4, 4, 2, 1) + struct.pack("<IIQIIII", 0, 0, 8, 4, 2, 1, 2)
    body += bytes(64)
    return struct.pack("<HHI", _wire.SURFACE, 0, 8 + len(body)) + body


def start_fake_publisher(path: str, send_surface_and_frames) -> tuple[socket.socket, threading.Thread, list]:
    """A publisher on a thread that answers HELLO with WELCOME, calls `send_surface_and_frames(connection)`, then
    collects what the subscriber sends until it closes. Returns the listener, the thread and that list."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    listener.bind(path)
    listener.listen(1)
    answers = []

    def serve():
        connection, _ = listener.accept()
        with connection:
            connection.settimeout(20)
            connection.recv(4096)  # HELLO
            connection.send(encode_welcome())
            send_surface_and_frames(connection)
            try:
                while True:
                    data = connection.recv(4096)
                    if not data:
                        break
                    answers.append(data)
            except OSError:
                pass

    server = threading.Thread(target=serve, daemon=True)
    server.start()
    return listener, server, answers


def send_memfd(connection: socket.socket, message: bytes, memfd: int) -> None:
    connection.sendmsg([message], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, struct.pack("i", memfd))])
    os.close(memfd)


def test_a_refused_surfaces_descriptor_is_closed_exactly_once(tmp_path, monkeypatch):
    def unsealed_surface(connection):
        memfd = os.memfd_create("fake-unsealed", os.MFD_CLOEXEC)  # no seals: the subscriber must refuse it
        os.ftruncate(memfd, 12)
        send_memfd(connection, encode_surface(12), memfd)

    path = str(tmp_path / "fake.sock")
    listener, server, answers = start_fake_publisher(path, unsealed_surface)
    closes = []
    real_close = os.close
    test_thread = threading.get_ident()

    def counting_close(fd):
        # Only the subscriber's closes, made on this thread: the fake publisher's thread closes its own copy of the
        # memfd after sending it, at a moment that races with the patch.
        if threading.get_ident() != test_thread:
            return real_close(fd)
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            target = None  # not open: a second close of a number already closed
        closes.append((fd, target))
        return real_close(fd)

    try:
        bus = framebus.Subscriber(path, accept=["420v"], queue=2, engine="python")
        monkeypatch.setattr(os, "close", counting_close)
        with pytest.raises(framebus.FrameBusError) as refused:
            bus.next_event(timeout=20)
        monkeypatch.undo()
        assert refused.value.code == "invalidSurface" and "seals" in refused.value.message
        bus.close()
        server.join(timeout=20)
    finally:
        listener.close()
    memfd_closes = [fd for fd, target in closes if target and "fake-unsealed" in target]
    assert len(memfd_closes) == 1, closes
    assert all(target is not None for _, target in closes), f"a descriptor was closed twice: {closes}"
    codes = [_wire.decode_error(a)[0] for a in answers if _wire.header(a) == _wire.ERROR]
    assert codes[:1] == ["invalidSurface"], answers


def test_a_stream_stalled_by_arrays_of_released_frames_says_why(publish):
    publisher = publish("--size", "64x48", "--format", "420v", "--fps", "60")
    with framebus.Subscriber(str(publisher.path), accept=["420v"], queue=2) as bus:
        kept = []
        for frame in frames(bus, bus.maximum_held_frames):
            with frame:
                kept.append(frame.planes[0])  # the classic slip: a plane variable that outlives its block
        with pytest.warns(RuntimeWarning, match="arrays of their planes are still alive"):
            assert not any(isinstance(e, framebus.Frame) for e in events_for(bus, 1.0))


# ---- a fake publisher whose surface is a sparse memfd: the subscriber reads only memory the publisher committed ----

def encode_frame(sequence: int, bytes_used: int) -> bytes:
    body = struct.pack("<QQqiIqiIQQI", sequence, 1, 0, 0, 0, 0, 0, 0, 0, bytes_used, 0) + bytes(4)
    return struct.pack("<HHI", _wire.FRAME, 0, 8 + len(body)) + body


@pytest.mark.parametrize("written", [0, 12])
def test_a_frame_over_memory_the_publisher_never_committed_is_refused(tmp_path, written):
    """PROTOCOL.md §5.7: a memfd is sparse until written, and reading a hole would commit memory on the subscriber's
    account. A surface of 64 KiB of which nothing was written is refused at its first frame (ERROR invalidSurface);
    the same surface with the frame's 12 bytes written is delivered."""
    def sparse_surface_and_a_frame(connection):
        memfd = os.memfd_create("fake-sparse", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
        os.ftruncate(memfd, 65536)
        if written:
            os.pwrite(memfd, bytes(range(1, written + 1)), 0)
        fcntl.fcntl(memfd, fcntl.F_ADD_SEALS, F_SEALS_ALL)
        send_memfd(connection, encode_surface(65536), memfd)
        connection.send(encode_frame(1, 12))

    path = str(tmp_path / f"sparse-{written}.sock")
    listener, server, answers = start_fake_publisher(path, sparse_surface_and_a_frame)
    try:
        bus = framebus.Subscriber(path, accept=["420v"], queue=2, engine="python")
        if written:
            frame = bus.next_event(timeout=20)
            assert isinstance(frame, framebus.Frame) and frame.sequence == 1
            assert bytes(frame.planes[0].ravel()) == bytes(range(1, 9))
            frame.release()
        else:
            with pytest.raises(framebus.FrameBusError) as refused:
                bus.next_event(timeout=20)
            assert refused.value.code == "invalidSurface" and "committed 0" in refused.value.message
        bus.close()
        server.join(timeout=20)
        assert not server.is_alive()
    finally:
        listener.close()
    codes = [_wire.decode_error(a)[0] for a in answers if _wire.header(a) == _wire.ERROR]
    assert codes == ([] if written else ["invalidSurface"]), answers
