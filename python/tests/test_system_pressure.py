"""The publisher's system pressure in Python, on both engines, against a real publisher whose pressure really changes:
FrameBusTestPeer's ``bus-publisher --bus-pressure`` runs the reference publisher's pressure monitor on its real cost,
with a policy in which only the bus factor counts and any cost is serious. It waits for a subscriber, then publishes
64x48 frames of 20 ms; a subscriber that asks sees nominal (no frame yet), then serious with the bus factor, through
STATUS on the real socket."""

import asyncio
import time

import pytest

import framebus
from test_native import Peer

pytestmark = pytest.mark.usefixtures("each_engine")

TIMEOUT = 60  # seconds: the monitor samples once per 2 s window at nominal; the machine may be loaded


@pytest.fixture
def pressure_publisher(tmp_path):
    path = tmp_path / "pressure.sock"
    peer = Peer("bus-publisher", str(path), "--size", "64x48", "--fps", "50", "--wait-for-subscriber",
                "--bus-pressure")
    assert peer.wait_for("listening"), peer.output
    yield path
    peer.stop()


def pressure_events(bus, until, deadline: float):
    """The SystemPressure events of `bus` (frames released, drops skipped) until `until(event)` or the deadline."""
    seen = []
    while time.monotonic() < deadline:
        event = bus.next_event(timeout=max(0.0, deadline - time.monotonic()))
        if isinstance(event, framebus.Frame):
            event.release()
        elif isinstance(event, framebus.SystemPressure):
            seen.append(event)
            if until(event):
                break
        elif event is None or isinstance(event, framebus.EndOfStream):
            break
    return seen


def test_a_subscriber_that_asks_gets_the_first_state_then_each_change(pressure_publisher):
    with framebus.Subscriber(str(pressure_publisher), accept=["420v"], system_pressure_events=True) as bus:
        seen = pressure_events(bus, lambda event: event.level == "serious", time.monotonic() + TIMEOUT)
        assert len(seen) >= 2, seen
        assert seen[0].level == "nominal" and seen[0].factors == (), seen
        last = seen[-1]
        assert last.level == "serious" and last.factors == ("bus",), seen
        assert last.cost is not None and last.cost > 0, last
        assert last.frame_duration_ns == 20_000_000, last
        assert last.frames_shed == 0, last
        assert bus.system_pressure == last
        # Each event is a change of level or factors.
        for previous, following in zip(seen, seen[1:]):
            assert (previous.level, previous.factors) != (following.level, following.factors), seen


def test_a_subscriber_that_does_not_ask_sees_frames_and_drops_only(pressure_publisher):
    # The default: the HELLO does not ask for STATUS, so an application written before SystemPressure existed never
    # meets one. The publisher reaches serious within a few seconds of frames: 300 frames (6 s) span that.
    with framebus.Subscriber(str(pressure_publisher), accept=["420v"], queue=4) as bus:
        frames = 0
        deadline = time.monotonic() + TIMEOUT
        while frames < 300 and time.monotonic() < deadline:
            event = bus.next_event(timeout=max(0.0, deadline - time.monotonic()))
            assert isinstance(event, (framebus.Frame, framebus.Dropped)), event
            if isinstance(event, framebus.Frame):
                event.release()
                frames += 1
        assert frames == 300
        assert bus.system_pressure is None


def test_async_for_yields_the_pressure_changes_too(pressure_publisher):
    async def main():
        seen = []
        with framebus.Subscriber(str(pressure_publisher), accept=["420v"], system_pressure_events=True) as bus:
            async for event in bus:
                if isinstance(event, framebus.Frame):
                    event.release()
                elif isinstance(event, framebus.SystemPressure):
                    seen.append(event)
                    if event.level == "serious":
                        break
        return seen

    seen = asyncio.run(asyncio.wait_for(main(), TIMEOUT))
    assert [event.level for event in seen][0] == "nominal", seen
    assert seen[-1].level == "serious" and seen[-1].factors == ("bus",), seen


def test_the_python_engine_asks_again_without_the_flag_when_an_older_publisher_refuses_it(tmp_path):
    # A publisher older than the HELLO's wantsStatus bit (docs/PROTOCOL.md section 5.1) answers it with ERROR
    # malformedMessage; the subscriber connects again at once without it and is served as before. The publisher
    # here is a socket on a thread that plays that older publisher's handshake.
    import socket
    import struct
    import threading

    from framebus import _wire
    from test_holding import encode_welcome

    path = str(tmp_path / "older.sock")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    listener.bind(path)
    listener.listen(2)
    listener.settimeout(TIMEOUT)
    flags = []

    def serve():
        for answer in (_wire.encode_error("malformedMessage", "HELLO flags 0x4"), encode_welcome()):
            connection, _ = listener.accept()
            with connection:
                connection.settimeout(TIMEOUT)
                hello = connection.recv(4096)
                flags.append(struct.unpack_from("<H", hello, 22)[0])
                connection.send(answer)
                if answer[:2] != b"\x03\x00":
                    connection.shutdown(socket.SHUT_WR)  # then end of stream

    server = threading.Thread(target=serve, daemon=True)
    server.start()
    try:
        with framebus.Subscriber(path, accept=["420v"], engine="python", system_pressure_events=True) as bus:
            assert bus.next_event(timeout=TIMEOUT) == framebus.EndOfStream("closed", None)
            assert bus.system_pressure is None
    finally:
        server.join(TIMEOUT)
        listener.close()
    assert flags == [_wire.HELLO_WANTS_STATUS, 0], flags
