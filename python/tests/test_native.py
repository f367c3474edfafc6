"""The native engine (the C library's poller under the Python API) against real publishers: `framebus publish`
(protocol version 3) and FrameBusTestPeer's hostile publishers, which write garbage into the rings, abuse the wake
words, send unsealed or overlapping surfaces, or rewrite memory while it is read. Each must end the stream with a
clear reason, never crash, hang or hand out a wrong frame."""

import contextlib
import os
import select
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest

import framebus
from conftest import ROOT
from framebus import _wire

MALFORMED = _wire.ERROR_CODE_VALUES["malformedMessage"]


def peer_executable() -> str:
    candidates = [os.environ.get("FRAMEBUS_TEST_PEER")] + [
        str(ROOT / ".build" / config / "FrameBusTestPeer") for config in ("debug", "release")]
    for candidate in candidates:
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    pytest.skip("no FrameBusTestPeer: run `swift build` first") if not os.environ.get("FRAMEBUS_REQUIRE_ALL") else \
        pytest.fail("no FrameBusTestPeer: run `swift build` first")


class Peer:
    """A FrameBusTestPeer process. Its standard input is its lifeline: closing our end ends it, however the test
    ends."""

    def __init__(self, *arguments: str):
        read, self.lifeline = os.pipe()
        self.process = subprocess.Popen([peer_executable(), *arguments], stdin=read, stdout=subprocess.PIPE,
                                        stderr=subprocess.STDOUT, env={**os.environ, "FRAMEBUS_TEST_LIFELINE": "stdin"})
        os.close(read)
        os.set_blocking(self.process.stdout.fileno(), False)
        self.output = ""

    def wait_for(self, text: str, timeout: float = 60) -> bool:
        deadline = time.monotonic() + timeout
        while text not in self.output:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            ready, _, _ = select.select([self.process.stdout], [], [], left)
            if ready:
                chunk = self.process.stdout.read()
                if not chunk:
                    if self.process.poll() is not None:
                        return text in self.output
                    continue
                self.output += chunk.decode(errors="replace")
        return True

    def stop(self) -> None:
        os.close(self.lifeline)
        try:
            self.process.wait(30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


@pytest.fixture
def peer(tmp_path):
    started = []

    def start(*arguments: str) -> Peer:
        started.append(Peer(*arguments))
        return started[-1]

    yield start
    for each in started:
        each.stop()


def collect(bus, limit: float = 60):
    """Every event until the end of stream (bounded by `limit` seconds); a FrameBusError raised on the way (a
    refused publisher: the typed error comes first, then the end of stream) is kept in the list."""
    events, deadline = [], time.monotonic() + limit
    while time.monotonic() < deadline:
        try:
            event = bus.next_event(timeout=1.0)
        except framebus.FrameBusError as error:
            event = error
        if event is None:
            if bus._finished:
                return events
            continue
        events.append(event)
        if isinstance(event, framebus.EndOfStream):
            return events
    raise AssertionError(f"no end of stream within {limit} s: {events[-5:]}")


def refusal(events) -> framebus.FrameBusError:
    """The typed error the stream ended with (and the end of stream that followed it)."""
    errors = [e for e in events if isinstance(e, framebus.FrameBusError)]
    assert len(errors) == 1, events
    assert isinstance(events[-1], framebus.EndOfStream) and events[-1].reason.startswith("error"), events
    return errors[0]


def test_the_default_engine_is_native_and_speaks_version_3(publish):
    publisher = publish("--size", "64x48", "--format", "420v", "--fps", "60")
    with framebus.Subscriber(str(publisher.path), accept=["420v"], queue=4) as bus:
        assert bus.engine == "native"
        frame = None
        while not isinstance(frame, framebus.Frame):
            frame = bus.next_event(timeout=10)
            assert frame is not None
        frame.release()
        with framebus.Monitor(str(publisher.path)) as monitor:
            versions = {record.version for record in monitor.next_report().subscribers}
    assert versions == {3}


def test_the_python_engine_still_speaks_version_2(publish):
    publisher = publish("--size", "64x48", "--format", "420v", "--fps", "60")
    with framebus.Subscriber(str(publisher.path), accept=["420v"], engine="python") as bus:
        assert bus.engine == "python"
        assert bus.welcome.version == 2
        with framebus.Monitor(str(publisher.path)) as monitor:
            versions = {record.version for record in monitor.next_report().subscribers}
    assert versions == {2}


@pytest.mark.parametrize("scenario", ["tail-jump", "slot-garbage", "unknown-surface"])
def test_garbage_in_the_announce_ring_ends_the_stream_as_a_protocol_violation(peer, tmp_path, scenario):
    path = str(tmp_path / "ring.sock")
    hostile = peer("ring-hostile-publisher", path, scenario)
    assert hostile.wait_for("listening")
    with framebus.Subscriber(path, accept=["420v"], wait=True, timeout=30) as bus:
        events = collect(bus)
    assert not [e for e in events if isinstance(e, framebus.Frame)]
    assert refusal(events).code == "protocolViolation", events
    assert hostile.wait_for("error code="), hostile.output
    assert f"error code={MALFORMED} " in hostile.output, hostile.output


def test_a_ring_slot_that_claims_socket_messages_never_sent_never_overtakes_them(peer, tmp_path):
    path = str(tmp_path / "ahead.sock")
    hostile = peer("ring-hostile-publisher", path, "control-ahead")
    assert hostile.wait_for("listening")
    with framebus.Subscriber(path, accept=["420v"], wait=True, timeout=30) as bus:
        events = collect(bus)
    assert events == [framebus.EndOfStream("stopped", None)], events


@pytest.mark.parametrize("scenario", ["wake-flood", "wake-garbage", "control-garbage"])
def test_a_publisher_abusing_the_wake_words_only_makes_python_look_again(peer, tmp_path, scenario):
    path = str(tmp_path / "wake.sock")
    hostile = peer("ring-hostile-publisher", path, scenario)
    assert hostile.wait_for("listening")
    with framebus.Subscriber(path, accept=["420v"], wait=True, timeout=30) as bus:
        events = collect(bus)
    assert hostile.wait_for("futex=true"), hostile.output
    assert events == [framebus.EndOfStream("stopped", None)], events
    assert hostile.wait_for("done")


def test_a_publisher_without_version_3_is_asked_again_with_version_2(peer, tmp_path):
    path = str(tmp_path / "v2.sock")
    hostile = peer("version2-only-publisher", path)
    assert hostile.wait_for("listening")
    with framebus.Subscriber(path, accept=["420v"], wait=True, timeout=30) as bus:
        events = collect(bus)
    assert events == [framebus.EndOfStream("stopped", None)], events
    assert hostile.wait_for("hello version=2"), hostile.output
    assert "hello version=3" in hostile.output


ENGINES = ["native", "python"]


def hostile(peer, tmp_path, scenario, engine, accept=("420v",), queue=4):
    path = str(tmp_path / "hostile.sock")
    publisher = peer("hostile-publisher", path, scenario)
    assert publisher.wait_for("listening")
    with framebus.Subscriber(path, accept=list(accept), queue=queue, wait=True, timeout=30, engine=engine) as bus:
        events = collect(bus)
    return events, publisher


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("scenario", ["unsealed-surface", "no-write-seal"])
def test_a_surface_without_seals_is_refused(peer, tmp_path, scenario, engine):
    events, publisher = hostile(peer, tmp_path, scenario, engine)
    assert not [e for e in events if isinstance(e, framebus.Frame)]
    error = refusal(events)
    assert error.code == "invalidSurface" and "seal" in error.message, error
    assert publisher.wait_for(f"error code={_wire.ERROR_CODE_VALUES['invalidSurface']}"), publisher.output


@pytest.mark.parametrize("engine", ENGINES)
def test_a_surface_announced_twice_is_a_protocol_violation(peer, tmp_path, engine):
    events, publisher = hostile(peer, tmp_path, "reannounce", engine)
    error = refusal(events)
    assert "already announced" in error.message or "announced while it is live" in error.message, error
    assert publisher.wait_for("error code="), publisher.output


@pytest.mark.parametrize("engine", ENGINES)
def test_a_flood_of_surfaces_is_cut_off(peer, tmp_path, engine):
    events, publisher = hostile(peer, tmp_path, "surface-flood", engine)
    error = refusal(events)
    assert error.code == "invalidSurface" and "surfaces" in error.message, error
    assert publisher.wait_for(f"error code={_wire.ERROR_CODE_VALUES['invalidSurface']}"), publisher.output


@pytest.mark.parametrize("engine", ENGINES)
def test_a_drop_of_every_sequence_number_is_reported_and_the_stream_goes_on(peer, tmp_path, engine):
    # The pure-Python engine, which takes no DMA-BUFs, also says that DMA-BUF frames are the likely reason.
    with pytest.warns(RuntimeWarning, match="DMA-BUF") if engine == "python" else contextlib.nullcontext():
        events, _ = hostile(peer, tmp_path, "drop-everything", engine)
    drops = [e for e in events if isinstance(e, framebus.Dropped)]
    assert drops == [framebus.Dropped("outOfBuffers", 0, 2**64 - 1)], events
    if engine == "native":  # as Swift: the sequence wraps, frame 0 comes, then the end of stream
        assert [e.sequence for e in events if isinstance(e, framebus.Frame)] == [0]
        assert events[-1] == framebus.EndOfStream("stopped", None)
    else:  # the version-2 client refuses a frame whose sequence does not increase
        assert refusal(events).code == "malformedMessage"


@pytest.mark.parametrize("engine", ENGINES)
def test_planes_in_a_memfd_each_are_read_bit_exact(peer, tmp_path, engine):
    events, _ = hostile(peer, tmp_path, "multi-descriptor", engine)
    frames = [e for e in events if isinstance(e, framebus.Frame)]
    assert len(frames) == 1, events
    y, cbcr = frames[0].planes
    assert y.shape == (48, 64) and cbcr.shape == (24, 32, 2)
    assert (y == 0x11).all() and (cbcr == 0x22).all()


def test_memory_rewritten_while_read_gives_wrong_pixels_or_a_decode_error_never_a_crash(peer, tmp_path):
    path = str(tmp_path / "rewrite.sock")
    publisher = peer("hostile-publisher", path, "rewrite")
    assert publisher.wait_for("listening")
    decoded = failed = 0
    deadline = time.monotonic() + 120
    with framebus.Subscriber(path, accept=["&8v0"], wait=True, timeout=30) as bus:
        while decoded + failed < 50 and time.monotonic() < deadline:
            event = bus.next_event(timeout=1.0)
            if isinstance(event, framebus.EndOfStream):
                break
            if isinstance(event, framebus.Frame):
                with event as frame:
                    try:
                        frame.decode()
                        decoded += 1
                    except framebus.FrameBusError as error:
                        assert error.code == "corruptData", error
                        failed += 1
    assert decoded + failed >= 50
    assert failed > 0  # the scribbler overwrote the codec's header: some decodes must have been refused


def dma_buf_device() -> bool:
    return os.path.exists("/dev/dma_heap/system") or os.path.exists("/dev/udmabuf")


@pytest.mark.parametrize("scenario", ["dma-buf", "dma-buf-per-plane"])
def test_a_dma_buf_frame_reaches_python_bit_exact(peer, tmp_path, scenario):
    if not dma_buf_device():
        if os.environ.get("FRAMEBUS_GUEST"):
            pytest.fail("needs /dev/dma_heap/system or /dev/udmabuf in the guest")
        pytest.skip("needs /dev/dma_heap/system or /dev/udmabuf (scripts/guest-run)")
    if scenario == "dma-buf-per-plane" and not os.path.exists("/dev/dma_heap/system"):
        pytest.skip("needs /dev/dma_heap/system")
    events, _ = hostile(peer, tmp_path, scenario, "native")
    frames = [e for e in events if isinstance(e, framebus.Frame)]
    assert len(frames) == 1, events
    y, cbcr = frames[0].planes
    assert (y == 0x11).all() and (cbcr == 0x22).all()


@pytest.mark.parametrize("scenario", ["dma-buf-short", "dma-buf-tiled", "memfd-as-dma-buf", "dma-buf-write-only"])
def test_a_dishonest_dma_buf_surface_is_refused_with_a_reason(peer, tmp_path, scenario):
    if scenario != "memfd-as-dma-buf" and not dma_buf_device():
        if os.environ.get("FRAMEBUS_GUEST"):
            pytest.fail("needs /dev/dma_heap/system or /dev/udmabuf in the guest")
        pytest.skip("needs /dev/dma_heap/system or /dev/udmabuf (scripts/guest-run)")
    events, _ = hostile(peer, tmp_path, scenario, "native")
    assert not [e for e in events if isinstance(e, framebus.Frame)]
    assert refusal(events).code in ("invalidSurface", "protocolViolation"), events


def test_a_dma_buf_surface_sent_to_the_python_engine_is_refused_with_the_reason(peer, tmp_path):
    if not dma_buf_device():
        if os.environ.get("FRAMEBUS_GUEST"):
            pytest.fail("needs /dev/dma_heap/system or /dev/udmabuf in the guest")
        pytest.skip("needs /dev/dma_heap/system or /dev/udmabuf (scripts/guest-run)")
    events, _ = hostile(peer, tmp_path, "dma-buf", "python")
    error = refusal(events)
    assert error.code == "invalidSurface" and "DMA-BUF" in error.message, error


@pytest.mark.parametrize("engine", ENGINES)
def test_frame_after_frame_dropped_for_want_of_buffers_is_explained(peer, tmp_path, engine):
    """What a subscriber that takes no DMA-BUFs sees from a publisher of DMA-BUF frames: only outOfBuffers drops
    (PROTOCOL.md §4.3). It is told the likely reason once, instead of silent drops."""
    path = str(tmp_path / "drops.sock")
    publisher = peer("hostile-publisher", path, "drop-everything")
    assert publisher.wait_for("listening")
    options = {"accepts_dma_buf": False} if engine == "native" else {}
    with framebus.Subscriber(path, accept=["420v"], queue=4, wait=True, timeout=30, engine=engine, **options) as bus:
        with pytest.warns(RuntimeWarning, match="DMA-BUF"):
            collect(bus)


def test_a_publisher_that_sends_more_frames_than_it_granted_is_cut_off(peer, tmp_path):
    path = str(tmp_path / "over.sock")
    publisher = peer("hostile-publisher", path, "over-grant")
    assert publisher.wait_for("listening")
    kept, error = [], None  # a consumer that keeps every frame: its holding is what the grant bounds
    deadline = time.monotonic() + 120
    with framebus.Subscriber(path, accept=["420v"], queue=16, wait=True, timeout=30) as bus:
        while time.monotonic() < deadline:
            try:
                event = bus.next_event(timeout=1.0)
            except framebus.FrameBusError as raised:
                error = raised
                break
            if isinstance(event, framebus.Frame):
                kept.append(event)
            elif isinstance(event, framebus.EndOfStream):
                break
    assert len(kept) == 8  # WELCOME granted 8: eight held, the ninth refused
    assert error is not None and error.code == "protocolViolation" and "maximumHeldFrames 8" in error.message, error
    assert publisher.wait_for(f"error code={MALFORMED}"), publisher.output


def test_a_tiny_compressed_surface_claiming_sixteen_thousand_pixels_square_is_refused(peer, tmp_path):
    events, publisher = hostile(peer, tmp_path, "huge-compressed", "native", accept=("&8v0",))
    assert [e.sequence for e in events if isinstance(e, framebus.Frame)] == [0], events
    assert refusal(events).code == "invalidSurface", events
    assert publisher.wait_for(f"error code={_wire.ERROR_CODE_VALUES['invalidSurface']}"), publisher.output


def test_two_drops_of_two_to_the_sixty_third_frames_are_reported_exactly(peer, tmp_path):
    events, _ = hostile(peer, tmp_path, "drop-overflow", "native")
    half = 2**63 - 1  # Int64.max, twice: the counts are exact in u64
    drops = [e for e in events if isinstance(e, framebus.Dropped)]
    assert drops in ([framebus.Dropped("outOfBuffers", 0, 2 * half - 1)],
                     [framebus.Dropped("outOfBuffers", 0, half - 1),
                      framebus.Dropped("outOfBuffers", half, 2 * half - 1)]), drops
    assert [e.sequence for e in events if isinstance(e, framebus.Frame)] == [2 * half], events
    assert events[-1] == framebus.EndOfStream("stopped", None), events


def test_a_publisher_that_never_reads_our_releases_is_disconnected(peer, tmp_path):
    path = str(tmp_path / "never.sock")
    publisher = peer("hostile-publisher", path, "never-read")
    assert publisher.wait_for("listening")
    with framebus.Subscriber(path, accept=["420v"], wait=True, timeout=30) as bus:  # latest-only
        error, deadline = None, time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                event = bus.next_event(timeout=1.0)
            except framebus.FrameBusError as raised:
                error = raised
                break
            if isinstance(event, framebus.Frame):
                event.release()  # releases at once: what the publisher never reads
            elif isinstance(event, framebus.EndOfStream):
                break
    assert error is not None and error.code == "protocolViolation" and "stopped reading" in error.message, error
    assert publisher.wait_for("closed after"), publisher.output


def test_a_plane_descriptor_smaller_than_its_byte_count_is_refused(peer, tmp_path):
    events, publisher = hostile(peer, tmp_path, "multi-descriptor-short", "native")
    assert not [e for e in events if isinstance(e, framebus.Frame)]
    assert refusal(events).code == "invalidSurface", events
    assert publisher.wait_for(f"error code={_wire.ERROR_CODE_VALUES['invalidSurface']}"), publisher.output


def test_a_publishers_error_reason_reaches_python_without_control_characters(peer, tmp_path):
    events, _ = hostile(peer, tmp_path, "error-reason", "native")
    error = refusal(events)
    text = error.message + events[-1].reason
    assert "pwned" in text and not any(ord(c) < 0x20 or c == "\x7f" for c in text), repr(text)
