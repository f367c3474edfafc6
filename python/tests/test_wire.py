"""The Python wire code against the example datagrams of docs/PROTOCOL.md, Appendix A (written independently of
the Swift encoder, so these compare two implementations through the document)."""

from fractions import Fraction

import pytest

from framebus import FrameBusError, fourcc
from framebus import _wire


def hexbytes(text: str) -> bytes:
    return bytes.fromhex(" ".join(text.split()))


def test_hello_matches_the_documents_bytes():
    expected = hexbytes("""01 00 00 00 20 00 00 00  53 55 42 46 02 00 01 00  04 00 02 00 00 00 01 00
                           76 30 32 34 30 76 38 26""")
    assert _wire.encode_hello([fourcc("420v"), fourcc("&8v0")], 4, accepts_dmabuf=True) == expected


def test_monitor_hello_matches_the_documents_bytes():
    expected = hexbytes("01 00 00 00 18 00 00 00  53 55 42 46 02 00 00 00  00 00 00 00 01 00 00 00")
    assert _wire.encode_monitor_hello() == expected


def test_release_and_goodbye_match_the_documents_bytes():
    assert _wire.encode_release(12, 7, not_delivered=True) == hexbytes(
        "40 00 00 00 20 00 00 00  0c 00 00 00 00 00 00 00  07 00 00 00 00 00 00 00  01 00 00 00 00 00 00 00")
    assert _wire.encode_goodbye() == hexbytes("41 00 00 00 10 00 00 00  00 00 00 00 00 00 00 00")


WELCOME = hexbytes("""02 00 00 00 38 00 00 00  02 00 00 00 01 00 02 00  76 30 32 34 00 10 00 00
                      ef cd ab 89 67 45 23 01  03 00 00 00 00 00 00 00  4d 00 00 00 00 00 00 00
                      40 00 00 00 00 00 00 00""")


def test_welcome_decodes():
    assert _wire.header(WELCOME) == _wire.WELCOME
    welcome = _wire.decode_welcome(WELCOME)
    assert (welcome.delivery_mode, welcome.queue_depth, welcome.maximum_held_frames) == (0, 1, 2)
    assert welcome.format == fourcc("420v")
    assert (welcome.stream_id, welcome.subscriber_id, welcome.next_sequence) == (0x0123456789ABCDEF, 3, 77)
    assert welcome.maximum_announced_surfaces == 64


SURFACE = hexbytes("""
12 00 00 00 c8 00 00 00  07 00 00 00 00 00 00 00  76 30 32 34 04 00 00 00
02 00 00 00 01 00 02 02  00 00 00 00 00 00 00 00
08 00 00 00 00 00 00 00  04 00 00 00 00 00 00 00
00 00 00 00 00 00 00 00  00 00 00 00 00 00 00 00
00 00 00 00 00 00 00 00  00 00 00 00 00 00 00 00  04 00 00 00 04 00 00 00  02 00 00 00 01 00 00 00
01 00 00 00 00 00 00 00  00 00 00 00 00 00 00 00  04 00 00 00 02 00 00 00  01 00 00 00 02 00 00 00
00 00 00 00 00 00 00 00  00 00 00 00 00 00 00 00  00 00 00 00 00 00 00 00  00 00 00 00 00 00 00 00
00 00 00 00 00 00 00 00  00 00 00 00 00 00 00 00  00 00 00 00 00 00 00 00  00 00 00 00 00 00 00 00""")


def test_surface_decodes():
    surface = _wire.decode_surface(SURFACE)
    assert (surface.surface_id, surface.pixel_format, surface.width, surface.height) == (7, fourcc("420v"), 4, 2)
    assert surface.backing == _wire.BACKING_MEMFD and surface.modifier == 0
    assert surface.descriptor_byte_counts == (8, 4)
    assert surface.planes == (
        _wire.PlaneRecord(0, 0, 4, 4, 2, 1),
        _wire.PlaneRecord(1, 0, 4, 2, 1, 2),
    )


def test_frame_drop_and_end_of_stream_decode():
    frame = _wire.decode_frame(hexbytes("""
        20 00 00 00 50 00 00 00  0c 00 00 00 00 00 00 00  07 00 00 00 00 00 00 00
        fb ff ff ff ff ff ff ff  90 5f 01 00 01 00 00 00  01 00 00 00 00 00 00 00
        3c 00 00 00 01 00 00 00  08 07 06 05 04 03 02 01  0c 00 00 00 00 00 00 00
        03 00 00 00 01 01 01 01"""))
    assert (frame.sequence, frame.surface_id, frame.bytes_used, frame.flags) == (12, 7, 12, 3)
    assert frame.pts == (-5, 90000, 1) and frame.duration == (1, 60, 1)
    assert Fraction(frame.pts[0], frame.pts[1]) == Fraction(-5, 90000)
    assert frame.publish_time == 0x0102030405060708 and frame.attachments == (1, 1, 1, 1)
    assert _wire.decode_drop(hexbytes(
        "21 00 00 00 20 00 00 00  03 00 00 00 00 00 00 00  05 00 00 00 00 00 00 00  02 00 00 00 00 00 00 00"
    )) == (3, 5, "outOfBuffers")
    assert _wire.decode_end_of_stream(hexbytes(
        "30 00 00 00 18 00 00 00  ff ff ff ff ff ff ff ff  00 00 00 00 00 00 00 00")) is None


def test_monitor_report_decodes():
    report = _wire.decode_monitor_report(hexbytes("""
        50 00 00 00 88 00 00 00  e8 03 00 00 00 00 00 00  58 02 00 00 00 00 00 00
        01 00 01 00 00 00 00 00  02 00 00 00 00 00 00 00
        03 00 00 00 00 00 00 00  92 10 00 00 e8 03 00 00  76 30 32 34 00 00 01 00
        4e 02 00 00 00 00 00 00  00 10 00 00 00 00 00 00  01 00 00 00 00 00 00 00
        02 00 00 00 00 00 00 00  00 00 00 00 00 00 00 00  01 00 00 00 00 00 00 00
        dc 05 00 00 00 00 00 00  28 23 00 00 00 00 00 00  02 00 00 00 00 00 00 00"""))
    assert (report.time_ns, report.published, report.subscriber_count, report.dropped_at_source) == (1000, 600, 1, 2)
    (record,) = report.subscribers
    assert (record.subscriber_id, record.process_id, record.user_id) == (3, 4242, 1000)
    assert (record.delivered, record.bytes_delivered, record.dropped_late, record.dropped_out_of_buffers) == (
        590, 4096, 1, 2)
    assert (record.held, record.hold_time_p50_ns, record.hold_time_p99_ns, record.version) == (1, 1500, 9000, 2)


def test_a_monitor_report_repeating_a_subscriber_id_is_malformed():
    header = bytearray(hexbytes("""
        50 00 00 00 e8 00 00 00  e8 03 00 00 00 00 00 00  58 02 00 00 00 00 00 00
        02 00 02 00 00 00 00 00  00 00 00 00 00 00 00 00"""))
    record = bytearray(96)
    record[0:8] = (3).to_bytes(8, "little")
    for second_id, accepted in ((4, True), (3, False), (2, False)):
        second = bytearray(record)
        second[0:8] = second_id.to_bytes(8, "little")
        data = bytes(header + record + second)
        if accepted:
            ids = [r.subscriber_id for r in _wire.decode_monitor_report(data).subscribers]
            assert ids == [3, 4]
        else:
            with pytest.raises(FrameBusError) as caught:
                _wire.decode_monitor_report(data)
            assert caught.value.code == "malformedMessage", second_id


@pytest.mark.parametrize("mutate, why", [
    (lambda b: b[:-1], "short"),
    (lambda b: b[:2] + b"\x01\x00" + b[4:], "header reserved"),
    (lambda b: b[:4] + (999).to_bytes(4, "little") + b[8:], "length"),
])
def test_a_broken_header_is_malformed(mutate, why):
    with pytest.raises(FrameBusError) as caught:
        data = mutate(WELCOME)
        _wire.header(data)
        _wire.decode_welcome(data)
    assert caught.value.code == "malformedMessage", why


def test_hostile_drop_ranges_are_checked_not_trusted():
    def drop(first, last, reason=2, reserved=0):
        return (b"\x21\x00\x00\x00\x20\x00\x00\x00" + first.to_bytes(8, "little") + last.to_bytes(8, "little")
                + reason.to_bytes(4, "little") + reserved.to_bytes(4, "little"))
    first, last, _ = _wire.decode_drop(drop(0, 2**64 - 1))
    assert last - first + 1 == 2**64  # Python integers: no overflow, the whole range is reported
    for bad in (drop(5, 4), drop(1, 1, reason=9), drop(1, 1, reserved=1)):
        with pytest.raises(FrameBusError):
            _wire.decode_drop(bad)


def test_surface_planes_outside_their_descriptor_are_refused():
    data = bytearray(SURFACE)
    data[40:48] = (7).to_bytes(8, "little")  # descriptor 0 now holds 7 bytes; plane 0 needs 8
    with pytest.raises(FrameBusError) as caught:
        _wire.decode_surface(bytes(data))
    assert caught.value.code == "malformedMessage"


def status(level=2, factors=0x11, cost=1250, duration=(1, 30, 1), made=7, shed=3) -> bytes:
    """A STATUS datagram (docs/PROTOCOL.md section 5.13), packed here from the table, not by the decoder's code."""
    import struct
    return struct.pack("<HHIHHIqiIQQ", 0x0060, 0, 48, level, factors, cost, *duration, made, shed)


def test_status_decodes_and_ignores_unknown_factor_bits():
    message = _wire.decode_status(status(factors=0x11 | 0x8000))
    assert (message.level, message.factors, message.cost) == ("serious", ("cpu", "bus"), 1.25)
    assert message.frame_duration == (1, 30, 1) and (message.time, message.frames_shed) == (7, 3)
    assert _wire.decode_status(status(level=0, factors=0, cost=0xFFFFFFFF)).cost is None


@pytest.mark.parametrize("data, why", [
    (status(level=5), "level above shutdown"),
    (status(duration=(1, 30, 0x20)), "unknown time flags"),
    (status(duration=(1, 0, 1)), "a valid time without a timescale"),
    (status()[:40], "short"),
])
def test_a_hostile_status_is_malformed(data, why):
    with pytest.raises(FrameBusError) as raised:
        if len(data) != 48:
            _wire.header(data)
        _wire.decode_status(data)
    assert raised.value.code == "malformedMessage", why


def test_drop_reason_four_only_for_a_subscriber_that_asked():
    drop = hexbytes("""21 00 00 00 20 00 00 00  03 00 00 00 00 00 00 00
                       05 00 00 00 00 00 00 00  04 00 00 00 00 00 00 00""")
    assert _wire.decode_drop(drop, wants_status=True) == (3, 5, "workFellBehind")
    with pytest.raises(FrameBusError):
        _wire.decode_drop(drop)
