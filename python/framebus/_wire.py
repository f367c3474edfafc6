"""The subscriber's half of the FrameBus wire protocol, version 2 (docs/PROTOCOL.md).

Every decoder validates every field of a datagram from the publisher before anything uses it: the publisher is
a peer, and peers may be hostile. Python integers do not overflow, so range checks are all that is needed.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from .errors import FrameBusError

VERSION = 2
MAGIC = 0x46425553  # 'FBUS' as a FourCC
MAXIMUM_MESSAGE_SIZE = 4096
MAXIMUM_DESCRIPTORS = 4
MAXIMUM_PLANES = 4
MAXIMUM_BYTE_COUNT = 1 << 32
MAXIMUM_DIMENSION = 65536
MAXIMUM_QUEUE_DEPTH = 64

HELLO, WELCOME, ERROR = 0x0001, 0x0002, 0x0003
SURFACE_V1, RETIRE_SURFACE, SURFACE = 0x0010, 0x0011, 0x0012
FRAME, DROP, END_OF_STREAM = 0x0020, 0x0021, 0x0030
RELEASE, GOODBYE, MONITOR_REPORT = 0x0040, 0x0041, 0x0050
STATUS = 0x0060

ERROR_CODES = {
    1: "unsupportedVersion",
    2: "noCommonFormat",
    3: "tooManySubscribers",
    4: "notPermitted",
    5: "malformedMessage",
    6: "invalidRequest",
    7: "shuttingDown",
    8: "invalidSurface",
    9: "tooSlow",
    10: "handshakeTimeout",
}
ERROR_CODE_VALUES = {name: code for code, name in ERROR_CODES.items()}

DROP_REASONS = {1: "frameWasLate", 2: "outOfBuffers", 3: "discontinuity"}
# Only to a subscriber whose HELLO set wantsStatus (docs/PROTOCOL.md section 5.8); malformed for any other.
DROP_WORK_FELL_BEHIND = 4
HELLO_WANTS_STATUS = 4
PRESSURE_LEVELS = ("nominal", "fair", "serious", "critical", "shutdown")
PRESSURE_FACTORS = ("cpu", "memory", "io", "thermal", "bus")  # bits 0...4
UNKNOWN_COST = 0xFFFFFFFF
BACKING_MEMFD, BACKING_DMABUF = 1, 2
RELEASE_NOT_DELIVERED = 1

_HEADER = struct.Struct("<HHI")


def _malformed(why: str) -> FrameBusError:
    return FrameBusError("malformedMessage", why)


def header(data: bytes) -> int:
    """Checks the common header against the datagram and returns the message type."""
    if len(data) < _HEADER.size:
        raise _malformed(f"a datagram of {len(data)} bytes is shorter than the header")
    kind, reserved, length = _HEADER.unpack_from(data)
    if reserved != 0:
        raise _malformed("header reserved field is not 0")
    if length != len(data):
        raise _malformed(f"header length {length} but the datagram has {len(data)} bytes")
    return kind


def _expect_size(data: bytes, size: int, name: str) -> None:
    if len(data) != size:
        raise _malformed(f"{name} of {len(data)} bytes, expected {size}")


# --- subscriber → publisher -----------------------------------------------------------------------------------


def encode_hello(formats: list[int], queue_depth: int | None, accepts_dmabuf: bool = False,
                 deferred: bool = False, wants_status: bool = False) -> bytes:
    if not 1 <= len(formats) <= 16:
        raise ValueError("a subscriber accepts 1 to 16 formats")
    mode, depth = (0, 1) if queue_depth is None else (1, queue_depth)
    if not 1 <= depth <= MAXIMUM_QUEUE_DEPTH:
        raise ValueError(f"queue depth {depth} is outside 1...{MAXIMUM_QUEUE_DEPTH}")
    length = 24 + 4 * len(formats)
    body = struct.pack("<IHHHHHH", MAGIC, VERSION, mode, depth, len(formats), 0,
                       (1 if accepts_dmabuf else 0) | (2 if deferred else 0)
                       | (HELLO_WANTS_STATUS if wants_status else 0))
    return _HEADER.pack(HELLO, 0, length) + body + struct.pack(f"<{len(formats)}I", *formats)


def encode_release(sequence: int, surface_id: int, not_delivered: bool = False) -> bytes:
    return _HEADER.pack(RELEASE, 0, 32) + struct.pack(
        "<QQII", sequence, surface_id, RELEASE_NOT_DELIVERED if not_delivered else 0, 0
    )


def encode_goodbye() -> bytes:
    return _HEADER.pack(GOODBYE, 0, 16) + struct.pack("<II", 0, 0)


def encode_error(code: str, reason: str) -> bytes:
    text = reason.encode("utf-8")[:1024]
    return _HEADER.pack(ERROR, 0, 12 + len(text)) + struct.pack("<HH", ERROR_CODE_VALUES[code], len(text)) + text


# --- publisher → subscriber -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Welcome:
    version: int
    delivery_mode: int
    queue_depth: int
    maximum_held_frames: int
    format: int
    stream_id: int
    subscriber_id: int
    next_sequence: int
    maximum_announced_surfaces: int


def decode_welcome(data: bytes) -> Welcome:
    _expect_size(data, 56, "WELCOME")
    (version, mode, depth, held, fmt, max_size, stream, sub, nxt, surfaces, kind, reserved) = struct.unpack_from(
        "<HHHHIIQQQHHI", data, 8
    )
    if version != VERSION:
        raise _malformed(f"WELCOME of version {version} answers a version-2 HELLO")
    if kind != 0 or reserved != 0:
        raise _malformed("WELCOME kind/reserved")
    if mode not in (0, 1) or (mode == 0 and depth != 1) or not 1 <= depth <= MAXIMUM_QUEUE_DEPTH:
        raise _malformed(f"WELCOME delivery mode {mode} with depth {depth}")
    if held < 1 or fmt == 0 or max_size != MAXIMUM_MESSAGE_SIZE or surfaces < held + 1:
        raise _malformed("WELCOME grants out of range")
    return Welcome(version, mode, depth, held, fmt, stream, sub, nxt, surfaces)


def decode_error(data: bytes) -> tuple[str, str]:
    if len(data) < 12:
        raise _malformed("ERROR shorter than 12 bytes")
    code, length = struct.unpack_from("<HH", data, 8)
    if length > 1024 or len(data) != 12 + length:
        raise _malformed("ERROR reason length")
    reason = bytes(data[12:]).decode("utf-8", errors="replace")
    return ERROR_CODES.get(code, f"unknown({code})"), reason


@dataclass(frozen=True)
class PlaneRecord:
    descriptor_index: int
    offset: int
    bytes_per_row: int
    width: int
    height: int
    bytes_per_element: int


@dataclass(frozen=True)
class SurfaceMessage:
    surface_id: int
    pixel_format: int
    width: int
    height: int
    backing: int
    modifier: int
    descriptor_byte_counts: tuple[int, ...]
    planes: tuple[PlaneRecord, ...]


def decode_surface(data: bytes) -> SurfaceMessage:
    _expect_size(data, 200, "SURFACE")
    surface_id, fmt, width, height, backing, descriptors, plane_count, modifier = struct.unpack_from(
        "<QIIIHBBQ", data, 8
    )
    counts = struct.unpack_from("<4Q", data, 40)
    if surface_id == 0:
        raise _malformed("SURFACE id 0")
    if not (1 <= width <= MAXIMUM_DIMENSION and 1 <= height <= MAXIMUM_DIMENSION):
        raise _malformed(f"SURFACE size {width}x{height}")
    if backing not in (BACKING_MEMFD, BACKING_DMABUF):
        raise _malformed(f"SURFACE backing {backing}")
    if not 1 <= descriptors <= MAXIMUM_DESCRIPTORS or plane_count > MAXIMUM_PLANES:
        raise _malformed(f"SURFACE with {descriptors} descriptors and {plane_count} planes")
    if plane_count == 0 and descriptors != 1:
        raise _malformed("an opaque SURFACE has exactly one descriptor")
    if backing == BACKING_MEMFD and modifier != 0:
        raise _malformed("a memfd SURFACE has the linear modifier")
    if modifier == 0x00FFFFFFFFFFFFFF:
        raise _malformed("SURFACE modifier is DRM_FORMAT_MOD_INVALID")
    for index, count in enumerate(counts):
        if index < descriptors and not 1 <= count <= MAXIMUM_BYTE_COUNT:
            raise _malformed(f"SURFACE descriptor {index} byte count {count}")
        if index >= descriptors and count != 0:
            raise _malformed(f"SURFACE unused descriptor {index} byte count is not 0")
    planes = []
    used = set()
    for index in range(MAXIMUM_PLANES):
        record = struct.unpack_from("<IIQIIII", data, 72 + 32 * index)
        if index >= plane_count:
            if any(record):
                raise _malformed(f"SURFACE unused plane record {index} is not zero")
            continue
        d, reserved, offset, bpr, w, h, bpe = record
        if d >= descriptors or reserved != 0:
            raise _malformed(f"SURFACE plane {index} descriptor {d}")
        if not (1 <= w <= MAXIMUM_DIMENSION and 1 <= h <= MAXIMUM_DIMENSION and 1 <= bpe <= 16):
            raise _malformed(f"SURFACE plane {index} geometry")
        if bpr < w * bpe or offset + bpr * h > counts[d]:
            raise _malformed(f"SURFACE plane {index} lies outside descriptor {d}")
        used.add(d)
        planes.append(PlaneRecord(d, offset, bpr, w, h, bpe))
    if plane_count and len(used) != descriptors:
        raise _malformed("SURFACE has a descriptor that holds no plane")
    return SurfaceMessage(surface_id, fmt, width, height, backing, modifier, counts[:descriptors], tuple(planes))


def decode_retire(data: bytes) -> int:
    _expect_size(data, 16, "RETIRE_SURFACE")
    (surface_id,) = struct.unpack_from("<Q", data, 8)
    if surface_id == 0:
        raise _malformed("RETIRE_SURFACE id 0")
    return surface_id


@dataclass(frozen=True)
class FrameMessage:
    sequence: int
    surface_id: int
    pts: tuple[int, int, int]
    duration: tuple[int, int, int]
    publish_time: int
    bytes_used: int
    flags: int
    attachments: tuple[int, int, int, int]


def _check_time(value: tuple[int, int, int], name: str) -> None:
    _, timescale, flags = value
    if flags & ~0x1F:
        raise _malformed(f"FRAME {name} flags 0x{flags:x}")
    if flags & 1 and timescale <= 0:
        raise _malformed(f"FRAME {name} timescale {timescale}")


def decode_frame(data: bytes) -> FrameMessage:
    _expect_size(data, 80, "FRAME")
    seq, sid, pv, pts_scale, pts_flags, dv, d_scale, d_flags, publish, used, flags = struct.unpack_from(
        "<QQqiIqiIQQI", data, 8
    )
    attachments = tuple(data[76:80])
    if sid == 0:
        raise _malformed("FRAME surface id 0")
    if used > MAXIMUM_BYTE_COUNT or flags & ~0x3:
        raise _malformed("FRAME bytesUsed or flags out of range")
    pts, duration = (pv, pts_scale, pts_flags), (dv, d_scale, d_flags)
    _check_time(pts, "pts")
    _check_time(duration, "duration")
    return FrameMessage(seq, sid, pts, duration, publish, used, flags, attachments)  # type: ignore[arg-type]


def decode_drop(data: bytes, wants_status: bool = False) -> tuple[int, int, str]:
    _expect_size(data, 32, "DROP")
    first, last, reason, reserved = struct.unpack_from("<QQII", data, 8)
    if wants_status and reason == DROP_WORK_FELL_BEHIND and last >= first and reserved == 0:
        return first, last, "workFellBehind"
    if last < first or reason not in DROP_REASONS or reserved != 0:
        raise _malformed(f"DROP {first}...{last} reason {reason}")
    return first, last, DROP_REASONS[reason]


@dataclass(frozen=True)
class StatusMessage:
    level: str
    factors: tuple[str, ...]
    cost: float | None
    frame_duration: tuple[int, int, int]
    time: int
    frames_shed: int


def decode_status(data: bytes) -> StatusMessage:
    """STATUS (docs/PROTOCOL.md section 5.13), 48 bytes: a level above shutdown, or a frame duration of unknown
    flags or a valid one without a positive timescale, is malformed; unknown factor bits are ignored."""
    _expect_size(data, 48, "STATUS")
    level, factors, cost, value, timescale, flags, made, shed = struct.unpack_from("<HHIqiIQQ", data, 8)
    if level >= len(PRESSURE_LEVELS):
        raise _malformed(f"STATUS level {level}")
    duration = (value, timescale, flags)
    if flags & ~0x1F or (flags & 1 and timescale <= 0):
        raise _malformed(f"STATUS frameDuration flags 0x{flags:x} timescale {timescale}")
    names = tuple(name for bit, name in enumerate(PRESSURE_FACTORS) if factors & (1 << bit))
    return StatusMessage(PRESSURE_LEVELS[level], names, None if cost == UNKNOWN_COST else cost / 1000, duration,
                         made, shed)


def decode_end_of_stream(data: bytes) -> int | None:
    _expect_size(data, 24, "END_OF_STREAM")
    last, _reason, reserved = struct.unpack_from("<QII", data, 8)
    if reserved != 0:
        raise _malformed("END_OF_STREAM reserved")
    return None if last == 0xFFFFFFFFFFFFFFFF else last


def encode_monitor_hello() -> bytes:
    return _HEADER.pack(HELLO, 0, 24) + struct.pack("<IHHHHHH", MAGIC, VERSION, 0, 0, 0, 1, 0)


def decode_monitor_welcome(data: bytes) -> int:
    """A monitor's WELCOME: every grant 0, kind 1. Returns the stream id."""
    _expect_size(data, 56, "WELCOME")
    version, mode, depth, held, fmt, max_size, stream, _sub, _next, surfaces, kind, reserved = struct.unpack_from(
        "<HHHHIIQQQHHI", data, 8
    )
    if version != VERSION or kind != 1 or reserved != 0 or any((mode, depth, held, fmt, surfaces)):
        raise _malformed("a monitor's WELCOME grants nothing and has kind 1")
    if max_size != MAXIMUM_MESSAGE_SIZE:
        raise _malformed("WELCOME maximumMessageSize")
    return stream


@dataclass(frozen=True)
class SubscriberRecord:
    subscriber_id: int
    process_id: int
    user_id: int
    format: int
    delivery_mode: int
    queue_depth: int
    delivered: int
    bytes_delivered: int
    dropped_late: int
    dropped_out_of_buffers: int
    dropped_discontinuity: int
    held: int
    queued: int
    hold_time_p50_ns: int
    hold_time_p99_ns: int
    version: int


@dataclass(frozen=True)
class MonitorReport:
    time_ns: int
    published: int
    subscriber_count: int
    dropped_at_source: int
    subscribers: tuple[SubscriberRecord, ...]


def decode_monitor_report(data: bytes) -> MonitorReport:
    if len(data) < 40:
        raise _malformed("MONITOR_REPORT shorter than 40 bytes")
    time_ns, published, count, records, reserved, dropped = struct.unpack_from("<QQHHIQ", data, 8)
    if reserved != 0 or records > 32 or records > count or len(data) != 40 + 96 * records:
        raise _malformed("MONITOR_REPORT counts")
    subscribers = []
    for index in range(records):
        fields = struct.unpack_from("<QiIIHHQQQQQIIQQHHI", data, 40 + 96 * index)
        if fields[-1] != 0 or fields[-2] != 0:
            raise _malformed("MONITOR_REPORT record reserved")
        if subscribers and fields[0] <= subscribers[-1].subscriber_id:
            # Each id once, in increasing order (PROTOCOL.md §5.12): a repeated id would make a table keyed by id
            # silently lose a row.
            raise _malformed("MONITOR_REPORT records not in increasing subscriberID order")
        subscribers.append(SubscriberRecord(*fields[:-2]))
    return MonitorReport(time_ns, published, count, dropped, tuple(subscribers))
