"""ctypes bindings to the FrameBus C library (include/framebus.h): the native subscriber, the publisher, the codec.

The native subscriber engine, publishing and the lossless codec go through the C library, so Python shares one
implementation of the data plane, the pool, the protocol state machines and the codec with every other client.
The library is looked for in this order (the first that loads wins; :func:`library` names every place tried):

1. ``$FRAMEBUS_LIBRARY``, a path to the .so (nothing else is tried when it is set);
2. the copy shipped inside the package (``framebus/_lib/libframebus.so.0``: ``pip install ./python`` puts it there,
   see setup.py);
3. a source checkout's build folders, when this package is imported from one (``.build/release``, then
   ``.build/debug``, ``libFrameBusC.so``);
4. ``libframebus.so.0`` through the dynamic loader (``LD_LIBRARY_PATH``, the ``ldconfig`` cache, ``/usr/lib``):
   what ``scripts/install`` installs into a system prefix;
5. the ``libdir`` of pkg-config's ``framebus`` package (``framebus.pc``; ``PKG_CONFIG_PATH`` reaches other
   prefixes);
6. ``lib/libframebus.so.0`` under this Python's prefix (a virtual environment), ``/usr/local`` and ``~/.local``;
7. ``ctypes.util.find_library("framebus")``.
"""

from __future__ import annotations

import ctypes
import os
import sys
from pathlib import Path

from .errors import FrameBusError

ABI_VERSION = 2
MAX_PLANES = 4

_STATUS_NAMES = {
    1: "invalidArgument", 2: "systemCall", 3: "addressInUse", 4: "permissionDenied", 5: "refused",
    6: "protocolViolation", 7: "endOfStream", 8: "timedOut", 9: "invalidSurface", 10: "closed",
    11: "outOfBuffers", 12: "resourceFailure", 13: "busy", 14: "interrupted", 15: "formatMismatch",
    16: "corruptData", 17: "unsupportedVersion", 18: "bufferTooSmall", 19: "cancelled", 20: "internal",
}


class Error(ctypes.Structure):
    _fields_ = [("code", ctypes.c_int32), ("system_errno", ctypes.c_int32), ("message", ctypes.c_char * 256)]


class Time(ctypes.Structure):
    _fields_ = [("value", ctypes.c_int64), ("timescale", ctypes.c_int32), ("flags", ctypes.c_uint32)]


class Colorimetry(ctypes.Structure):
    _fields_ = [("primaries", ctypes.c_uint8), ("transfer", ctypes.c_uint8), ("matrix", ctypes.c_uint8),
                ("chroma_location", ctypes.c_uint8)]


class Plane(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("offset", ctypes.c_uint64), ("bytes_per_row", ctypes.c_uint64),
                ("byte_count", ctypes.c_uint64), ("width", ctypes.c_uint32), ("height", ctypes.c_uint32),
                ("bytes_per_element", ctypes.c_uint32), ("reserved", ctypes.c_uint32)]


class PublisherOptions(ctypes.Structure):
    _fields_ = [("path", ctypes.c_char_p), ("format", ctypes.c_uint32), ("width", ctypes.c_uint32),
                ("height", ctypes.c_uint32), ("offered_formats", ctypes.POINTER(ctypes.c_uint32)),
                ("offered_format_count", ctypes.c_size_t), ("minimum_buffer_count", ctypes.c_uint32),
                ("maximum_buffer_count", ctypes.c_uint32), ("maximum_subscribers", ctypes.c_uint32),
                ("extra_held_frames_per_subscriber", ctypes.c_uint32), ("socket_mode", ctypes.c_uint32),
                ("compression_effort", ctypes.c_uint32)]


class BufferInfo(ctypes.Structure):
    _fields_ = [("format", ctypes.c_uint32), ("width", ctypes.c_uint32), ("height", ctypes.c_uint32),
                ("plane_count", ctypes.c_uint32), ("planes", Plane * MAX_PLANES),
                ("allocation_size", ctypes.c_uint64)]


class PublishInfo(ctypes.Structure):
    _fields_ = [("presentation_time", Time), ("duration", Time), ("flags", ctypes.c_uint32),
                ("colorimetry", Colorimetry)]


class ImagePlane(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("bytes_per_row", ctypes.c_uint64)]


class Image(ctypes.Structure):
    _fields_ = [("format", ctypes.c_uint32), ("width", ctypes.c_uint32), ("height", ctypes.c_uint32),
                ("reserved", ctypes.c_uint32), ("planes", ImagePlane * MAX_PLANES)]


class PublisherStatistics(ctypes.Structure):
    _fields_ = [(name, ctypes.c_uint64) for name in (
        "published", "dropped_at_source_frame_was_late", "dropped_at_source_out_of_buffers",
        "dropped_at_source_discontinuity", "delivered", "dropped_frame_was_late", "dropped_out_of_buffers",
        "dropped_discontinuity", "held_now", "subscriber_count", "conversions")]


class FrameSizeLimit(ctypes.Structure):
    """fb_frame_size_limit: the largest frame a subscriber accepts (docs/PROTOCOL.md section 8.2)."""
    _fields_ = [("maximum_width", ctypes.c_uint32), ("maximum_height", ctypes.c_uint32),
                ("maximum_pixel_count", ctypes.c_uint64)]


class SubscriberOptions(ctypes.Structure):
    _fields_ = [("path", ctypes.c_char_p), ("accepted_formats", ctypes.POINTER(ctypes.c_uint32)),
                ("accepted_format_count", ctypes.c_size_t), ("queue_depth", ctypes.c_uint32),
                ("reconnects", ctypes.c_uint32), ("connect_timeout_ns", ctypes.c_int64),
                ("reconnect_interval_ns", ctypes.c_int64), ("accepts_dma_buf", ctypes.c_uint32),
                ("wait_slice_us", ctypes.c_uint32)]


class Session(ctypes.Structure):
    _fields_ = [("format", ctypes.c_uint32), ("is_reconnect", ctypes.c_uint32), ("stream_id", ctypes.c_uint64),
                ("subscriber_id", ctypes.c_uint64), ("maximum_held_frames", ctypes.c_uint32),
                ("granted_queue_depth", ctypes.c_uint32)]


class Drop(ctypes.Structure):
    _fields_ = [("reason", ctypes.c_uint32), ("reserved", ctypes.c_uint32), ("first_sequence", ctypes.c_uint64),
                ("last_sequence", ctypes.c_uint64), ("frame_count", ctypes.c_uint64)]


class SystemPressure(ctypes.Structure):
    _fields_ = [("level", ctypes.c_uint32), ("factors", ctypes.c_uint32), ("cost", ctypes.c_double),
                ("frame_duration_ns", ctypes.c_int64), ("frames_shed", ctypes.c_uint64)]


class DropOrPressure(ctypes.Union):
    # fb_event's anonymous union (library 0.7.0): the pressure payload shares fb_drop's storage.
    _fields_ = [("drop", Drop), ("system_pressure", SystemPressure)]


class Event(ctypes.Structure):
    # `frame` is a plain integer (c_size_t, not c_void_p, which reads NULL as None): the fb_frame pointer.
    _anonymous_ = ("payload",)
    _fields_ = [("type", ctypes.c_uint32), ("end_status", ctypes.c_int32), ("frame", ctypes.c_size_t),
                ("payload", DropOrPressure), ("session", Session), ("end_message", ctypes.c_char * 256)]


class FrameInfo(ctypes.Structure):
    _fields_ = [("sequence", ctypes.c_uint64), ("format", ctypes.c_uint32), ("width", ctypes.c_uint32),
                ("height", ctypes.c_uint32), ("plane_count", ctypes.c_uint32), ("planes", Plane * MAX_PLANES),
                ("compressed_data", ctypes.c_size_t), ("bytes_used", ctypes.c_uint64),
                ("allocation_size", ctypes.c_uint64), ("presentation_time", Time), ("duration", Time),
                ("presentation_time_ns", ctypes.c_int64), ("duration_ns", ctypes.c_int64),
                ("publish_time_ns", ctypes.c_uint64), ("flags", ctypes.c_uint32), ("colorimetry", Colorimetry)]


class SubscriberStatistics(ctypes.Structure):
    _fields_ = [(name, ctypes.c_uint64) for name in (
        "delivered", "dropped_frame_was_late", "dropped_out_of_buffers", "dropped_discontinuity", "held_now",
        "queue_depth", "bytes_delivered", "latency_count", "latency_p50_ns", "latency_p99_ns", "latency_p999_ns",
        "latency_max_ns")]


RowsCallback = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.c_uint32, ctypes.c_uint32)


SONAME = "libframebus.so.0"


def _candidates():
    explicit = os.environ.get("FRAMEBUS_LIBRARY")
    if explicit:
        yield explicit
        return
    shipped = Path(__file__).resolve().parent / "_lib" / SONAME
    if shipped.exists():  # the library `pip install ./python` copied into the package (setup.py)
        yield str(shipped)
    root = Path(__file__).resolve().parents[2]
    if (root / "Package.swift").exists():  # imported from a source checkout
        for config in ("release", "debug"):
            yield str(root / ".build" / config / "libFrameBusC.so")
    yield SONAME
    libdir = _pkg_config_libdir()
    if libdir:
        yield str(Path(libdir) / SONAME)
    for prefix in (sys.prefix, "/usr/local", str(Path.home() / ".local")):
        yield str(Path(prefix) / "lib" / SONAME)
    import ctypes.util  # here, not at import: it brings subprocess (import time)

    found = ctypes.util.find_library("framebus")
    if found:
        yield found


def _pkg_config_libdir() -> str | None:
    import subprocess

    try:
        result = subprocess.run(["pkg-config", "--variable=libdir", "framebus"], capture_output=True, text=True,
                                timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    libdir = result.stdout.strip()
    return libdir if result.returncode == 0 and libdir.startswith("/") else None


_library = None


def library() -> ctypes.CDLL:
    """The loaded C library; raises FrameBusError("codecUnavailable") when it cannot be found."""
    global _library
    if _library is not None:
        return _library
    tried = []
    for candidate in _candidates():
        tried.append(candidate)
        if os.path.sep in candidate and not os.path.exists(candidate):
            continue
        try:
            loaded = ctypes.CDLL(candidate)
        except OSError:
            continue
        _declare(loaded)
        if loaded.fb_abi_version() != ABI_VERSION:
            raise FrameBusError("unsupportedVersion", f"{candidate} has ABI {loaded.fb_abi_version()}")
        _library = loaded
        return loaded
    raise FrameBusError(
        "codecUnavailable",
        "the FrameBus C library was not found: install it with `scripts/install` (from the FrameBus repository; "
        "PREFIX=/usr/local by default) or set FRAMEBUS_LIBRARY to a built libFrameBusC.so; "
        f"tried: {', '.join(tried) or 'nothing'}",
    )


def _declare(lib: ctypes.CDLL) -> None:
    P, E = ctypes.c_void_p, ctypes.POINTER(Error)
    u32, u64 = ctypes.c_uint32, ctypes.c_uint64
    signatures = {
        "fb_abi_version": (u32, []),
        "fb_publisher_options_init": (None, [ctypes.POINTER(PublisherOptions)]),
        "fb_publisher_create": (ctypes.c_int32, [ctypes.POINTER(PublisherOptions), ctypes.POINTER(P), E]),
        "fb_publisher_destroy": (None, [P]),
        "fb_publisher_acquire_buffer": (ctypes.c_int32, [P, ctypes.POINTER(P), E]),
        "fb_publisher_acquire_buffer_timeout": (ctypes.c_int32, [P, ctypes.c_int64, ctypes.POINTER(P), E]),
        "fb_buffer_get_info": (ctypes.c_int32, [P, ctypes.POINTER(BufferInfo), E]),
        "fb_buffer_publish": (ctypes.c_int32, [P, ctypes.POINTER(PublishInfo), ctypes.POINTER(u64), E]),
        "fb_buffer_discard": (None, [P]),
        "fb_publisher_report_drops": (ctypes.c_int32, [P, u32, u64, ctypes.POINTER(u64), ctypes.POINTER(u64), E]),
        "fb_publisher_get_statistics": (ctypes.c_int32, [P, ctypes.POINTER(PublisherStatistics), E]),
        "fb_subscriber_options_init": (None, [ctypes.POINTER(SubscriberOptions)]),
        "fb_subscriber_create": (ctypes.c_int32, [ctypes.POINTER(SubscriberOptions), ctypes.POINTER(P), E]),
        "fb_subscriber_create_with_flags": (ctypes.c_int32, [ctypes.POINTER(SubscriberOptions), u32, ctypes.POINTER(P),
                                                             E]),
        "fb_subscriber_create_with_limit": (ctypes.c_int32, [ctypes.POINTER(SubscriberOptions), u32,
                                                             ctypes.POINTER(FrameSizeLimit), ctypes.POINTER(P), E]),
        "fb_subscriber_destroy": (None, [ctypes.c_size_t]),
        "fb_subscriber_next_event": (ctypes.c_int32, [ctypes.c_size_t, ctypes.c_int64, ctypes.POINTER(Event), E]),
        "fb_subscriber_interrupt": (None, [ctypes.c_size_t]),
        "fb_subscriber_resume": (None, [ctypes.c_size_t]),
        "fb_subscriber_get_statistics": (ctypes.c_int32, [ctypes.c_size_t, ctypes.POINTER(SubscriberStatistics), E]),
        "fb_frame_get_info": (ctypes.c_int32, [ctypes.c_size_t, ctypes.POINTER(FrameInfo), E]),
        "fb_frame_release": (None, [ctypes.c_size_t]),
        "fb_codec_create": (ctypes.c_int32, [u32, ctypes.POINTER(P), E]),
        "fb_codec_destroy": (None, [P]),
        "fb_codec_maximum_compressed_size": (ctypes.c_int32, [u32, u32, u32, ctypes.POINTER(u64), E]),
        "fb_codec_compress": (ctypes.c_int32, [P, ctypes.POINTER(Image), P, u64, ctypes.POINTER(u64), E]),
        "fb_codec_decompress": (ctypes.c_int32, [P, P, u64, ctypes.POINTER(Image), E]),
        "fb_codec_tile_row_height": (ctypes.c_int32, [P, P, u64, u32, u32, u32, ctypes.POINTER(u32), E]),
        "fb_codec_decode_rows": (ctypes.c_int32, [P, P, u64, u32, ctypes.POINTER(Image), RowsCallback, P, E]),
    }
    for name, (result, arguments) in signatures.items():
        function = getattr(lib, name)
        function.restype, function.argtypes = result, arguments
    # One foreign call per frame where the library has them (added after 0.7.0): ctypes costs per call (argument
    # conversions, the interpreter's lock let go and taken back), so the hot paths ask for what the old pairs of
    # calls gave in one. Older libraries lack them; the callers then make the two calls (`has`).
    optional = {
        "fb_subscriber_next_event_info": (ctypes.c_int32, [ctypes.c_size_t, ctypes.c_int64, ctypes.POINTER(Event),
                                                           ctypes.POINTER(FrameInfo), E]),
        "fb_publisher_acquire_buffer_info": (ctypes.c_int32, [P, ctypes.c_int64, ctypes.POINTER(P),
                                                              ctypes.POINTER(BufferInfo), E]),
    }
    for name, (result, arguments) in optional.items():
        function = getattr(lib, name, None)
        if function is not None:
            function.restype, function.argtypes = result, arguments


def has(lib: ctypes.CDLL, name: str) -> bool:
    """Whether the loaded library exports ``name`` (an optional function of a newer library)."""
    try:
        getattr(lib, name)
    except AttributeError:
        return False
    return True


def status_name(status: int) -> str:
    return _STATUS_NAMES.get(status, f"status{status}")


def check(status: int, error: Error) -> None:
    if status != 0:
        message = error.message.decode("utf-8", errors="replace")
        raise FrameBusError(status_name(status), message)
