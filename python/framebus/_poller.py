"""The native subscriber: the C library's poller (``fb_subscriber_next_event``) under the Python API.

The C library speaks protocol version 3 (the rings, futex or wake-socket wake-ups, committed-memory checks,
docs/PROTOCOL.md §8–§9) and falls back to version 2 for a publisher that offers only that. Every value a publisher
writes (socket messages, ring slots, wake words) is copied once and validated in the library before it bounds
anything, and a publisher that breaks the rules ends the stream with a typed reason; Python only ever sees what the
library validated: plane pointers inside a read-only mapping, with their sizes. A thread waiting in
``fb_subscriber_next_event`` runs the subscriber's connection loop itself, so a frame costs one thread wake-up, and
ctypes lets go of the GIL for the call, so other Python threads run meanwhile.

DMA-BUF surfaces are taken too: the library brackets the CPU's reads with ``DMA_BUF_IOCTL_SYNC`` (start when the
frame is handed out, end when it is released), so NumPy planes over a DMA-BUF read what the device wrote.
"""

from __future__ import annotations

import ctypes
import os
import sys
import threading
import time
from collections import namedtuple

from . import _native
from ._formats import BY_CODE as _BY_CODE, pixel_format
from .errors import FrameBusError
from .subscriber import EndOfStream, Frame, Subscriber, SystemPressure, _dropped, _Memory, _time

EVENT_CONNECTED, EVENT_FRAME, EVENT_DROP, EVENT_END, EVENT_SYSTEM_PRESSURE = 1, 2, 3, 4, 5
SUBSCRIBER_DEFERRED, SUBSCRIBER_SYSTEM_PRESSURE = 1, 2
STATUS_END_OF_STREAM, STATUS_TIMED_OUT, STATUS_CLOSED, STATUS_INTERRUPTED = 7, 8, 10, 14
_DROP_REASONS = {1: "frameWasLate", 2: "outOfBuffers", 3: "discontinuity", 4: "workFellBehind"}
_LEVELS = ("nominal", "fair", "serious", "critical", "shutdown")
_FACTORS = ("cpu", "memory", "io", "thermal", "bus")
# A wait without a time limit is made of slices this long, so a signal (Ctrl-C) is handled within one slice:
# Python runs signal handlers only between bytecodes, never inside a foreign call.
_SLICE_NS = 250_000_000
_clock, _MONOTONIC = time.clock_gettime_ns, time.CLOCK_MONOTONIC
_copy_info = _native.FrameInfo.from_buffer_copy

Welcome = namedtuple("Welcome", "format queue_depth maximum_held_frames stream_id subscriber_id is_reconnect")
"""What the publisher granted (the library's ``fb_session``)."""


class _NativeHold:
    """A frame's hold on its buffer: ``fb_frame_release`` runs when the last reference goes (the frame after its
    release, and every array of its memory). fb_frame_release may run on any thread, after the subscriber is
    gone too, and never waits for the subscriber's loop."""

    __slots__ = ("pointer", "release", "__weakref__")

    def __init__(self, pointer: int, release):
        self.pointer = pointer
        self.release = release

    def __del__(self):
        pointer, self.pointer = self.pointer, None
        if pointer:
            self.release(pointer)


def _release(pointer: int) -> None:
    _native.library().fb_frame_release(pointer)



class NativeFrame(Frame):
    """A :class:`Frame` received through the C library. Its description (``fb_frame_info``) came with the event,
    into a structure of its own (private memory); the plane pointers in it lie inside the library's read-only
    mapping of the surface, checked against the surface's size there. Made with as little work as a frame allows
    (a frame costs its Python objects on top of the library's work): the hold, three numbers, and the rest read from
    the description when asked for."""

    def __init__(self, hold: _NativeHold, pinned, info, received_time_ns: int):
        self._hold = hold
        self._pinned = pinned
        self._info = info
        self.received_time_ns = received_time_ns
        self.sequence = info.sequence
        self.publish_time_ns = info.publish_time_ns

    @classmethod
    def _described(cls, subscriber: "NativeSubscriber", pointer: int) -> "NativeFrame":
        """A frame from a bare ``fb_frame`` pointer: its description asked for with ``fb_frame_get_info`` (a
        library without ``fb_subscriber_next_event_info``)."""
        hold = _NativeHold(pointer, subscriber._frame_release)
        info, error = _native.FrameInfo(), subscriber._error
        status = subscriber._get_info(pointer, ctypes.byref(info), ctypes.byref(error))
        if status != 0:
            hold = None  # the frame is released now, not when the exception's traceback goes
            _native.check(status, error)
        return cls(hold, subscriber._pinned, info, time.clock_gettime_ns(time.CLOCK_MONOTONIC))

    # The pixel format: one of the formats asked for (the library checked it).
    _pixel_format = property(lambda self: _BY_CODE[self._info.format])

    # The rest of the description, read when asked for.
    surface_id = None
    format = property(lambda self: self._pixel_format.name)
    width = property(lambda self: self._info.width)
    height = property(lambda self: self._info.height)
    bytes_used = property(lambda self: self._info.bytes_used)
    discontinuity = property(lambda self: bool(self._info.flags & 1))
    presentation_time = property(lambda self: _time(_triple(self._info.presentation_time)))
    duration = property(lambda self: _time(_triple(self._info.duration)))
    color_primaries = property(lambda self: self._info.colorimetry.primaries)
    transfer_function = property(lambda self: self._info.colorimetry.transfer)
    ycbcr_matrix = property(lambda self: self._info.colorimetry.matrix)
    chroma_location = property(lambda self: self._info.colorimetry.chroma_location)

    def _plane_arrays(self, hold):
        info, fmt = self._info, self._pixel_format
        planes = []
        for index, shape in enumerate(fmt.planes[: info.plane_count]):
            plane = info.planes[index]
            components = shape.components
            dims = (plane.height, plane.width) if components == 1 else (plane.height, plane.width, components)
            strides = (plane.bytes_per_row, shape.bytes_per_element) + (
                () if components == 1 else (shape.dtype.itemsize,))
            planes.append(_Memory.over(plane.data, dims, shape.dtype, strides, hold).array())
        return planes

    def _compressed_array(self, hold):
        info = self._info
        import numpy as np
        if not self._pixel_format.is_compressed or not info.compressed_data:
            raise FrameBusError("formatMismatch", f"{self.format} frames are not compressed; use planes")
        return _Memory.over(info.compressed_data, (info.bytes_used,), np.dtype(np.uint8), (1,), hold).array()


def _triple(value) -> tuple[int, int, int]:
    return value.value, value.timescale, value.flags


class NativeSubscriber(Subscriber):
    """:class:`Subscriber` over the C library (``engine="native"``): protocol version 3 with version 2 as the
    fallback, DMA-BUF surfaces accepted unless ``accepts_dma_buf=False``."""

    _unexplained_drops = 0  # drops in a row with no frame between (Subscriber._explain_drops)

    def __init__(self, path: str | None = None, accept=("420v",), queue: int | None = None,
                 allowed_uids=None, timeout: float = 5.0, wait: bool = False, engine: str | None = None,
                 accepts_dma_buf: bool = True, wait_slice_us: int = 0, deferred: bool = False,
                 largest_frame="default", system_pressure_events: bool = False):
        from .subscriber import default_socket_path

        self._handle = None
        self._closed = True
        lib = self._lib = _native.library()
        self._next = lib.fb_subscriber_next_event
        self._get_info = lib.fb_frame_get_info
        # One foreign call per event when the library has it (the event and, for a frame, its description).
        self._next_info = lib.fb_subscriber_next_event_info if _native.has(
            lib, "fb_subscriber_next_event_info") else None
        self._frame_release = lib.fb_frame_release
        self.path = path or default_socket_path()
        self._formats = [pixel_format(name) for name in accept]
        if allowed_uids is not None and set(allowed_uids) != {os.getuid()}:
            raise FrameBusError("invalidArgument", "the native engine trusts publishers of this uid only; "
                                                   "use engine='python' for allowed_uids")
        if not wait and not os.path.exists(self.path):
            raise FrameBusError("closed", f"no publisher at {self.path}: No such file or directory")
        options = _native.SubscriberOptions()
        lib.fb_subscriber_options_init(ctypes.byref(options))
        codes = (ctypes.c_uint32 * len(self._formats))(*[f.code for f in self._formats])
        options.path = os.fsencode(self.path)
        options.accepted_formats, options.accepted_format_count = codes, len(self._formats)
        options.queue_depth = 0 if queue is None else queue
        options.connect_timeout_ns = max(1, int(timeout * 1e9))
        options.accepts_dma_buf = 1 if accepts_dma_buf else 0
        self._accepts_dma_buf = accepts_dma_buf
        options.wait_slice_us = wait_slice_us
        handle, error = ctypes.c_void_p(), _native.Error()
        self.system_pressure: SystemPressure | None = None
        flags = (SUBSCRIBER_DEFERRED if deferred else 0) | (SUBSCRIBER_SYSTEM_PRESSURE if system_pressure_events else 0)
        if isinstance(largest_frame, str) and largest_frame == "default":
            status = lib.fb_subscriber_create_with_flags(ctypes.byref(options), flags, ctypes.byref(handle),
                                                         ctypes.byref(error))
        else:
            limit = None
            if largest_frame is not None:
                width, height = _frame_size(largest_frame)
                limit = ctypes.byref(_native.FrameSizeLimit(width, height, 0))
            status = lib.fb_subscriber_create_with_limit(ctypes.byref(options), flags, limit, ctypes.byref(handle),
                                                         ctypes.byref(error))
        _native.check(status, error)
        self._handle = handle.value
        self._closed = False
        self._event = _native.Event()
        # The drop's fields read in place (a view of the event's union): `event.drop` builds two ctypes objects.
        self._drop = _native.Drop.from_buffer(self._event, _native.Event.payload.offset)
        self._error = _native.Error()
        self._event_ref, self._error_ref = ctypes.byref(self._event), ctypes.byref(self._error)
        # The description of the next frame is written here; each frame keeps a copy.
        self._info = _native.FrameInfo()
        self._info_ref = ctypes.byref(self._info)
        # Held by the thread inside fb_subscriber_next_event: close() waits for it to leave before destroying.
        self._calling = threading.Lock()
        self._enter_call, self._leave_call = self._calling.acquire, self._calling.release
        self._pinned = __import__("weakref").WeakSet()
        self._warned_pinned = False
        self._ended: EndOfStream | None = None
        self._finished = False
        self._early = []  # events that came before CONNECTED was seen (none in practice)
        try:
            self.welcome = self._await_connection(timeout)
        except BaseException:
            self.close()
            raise
        self.format = pixel_format(self.welcome.format).name
        self.maximum_held_frames = self.welcome.maximum_held_frames
        self.requested_queue_depth = 1 if queue is None else queue
        self.granted_queue_depth = self.welcome.queue_depth or (1 if queue is None else queue)
        self.engine = "native"

    def _await_connection(self, timeout: float) -> Welcome:
        deadline = time.monotonic() + timeout + 1
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise FrameBusError("timedOut", f"no answer from the publisher at {self.path}")
            status = self._call(int(min(remaining, 0.25) * 1e9))
            if status == STATUS_TIMED_OUT:
                continue
            if status != 0:
                _native.check(status, self._error)
            event = self._event
            if event.type == EVENT_CONNECTED:
                s = event.session
                return Welcome(s.format, s.granted_queue_depth, s.maximum_held_frames, s.stream_id, s.subscriber_id,
                               bool(s.is_reconnect))
            if event.type == EVENT_END:
                message = event.end_message.decode("utf-8", errors="replace")
                code = _native.status_name(event.end_status)
                if event.end_status == STATUS_TIMED_OUT or (
                        event.end_status == STATUS_END_OF_STREAM and "no publisher" in message):
                    code = "closed"
                raise FrameBusError(code, message)
            if event.type == EVENT_FRAME:  # cannot come before CONNECTED; released if it ever does
                _release(event.frame)

    def _call(self, timeout_ns: int) -> int:
        with self._calling:
            if self._closed:
                return STATUS_CLOSED
            if self._next_info is not None:
                return self._next_info(self._handle, timeout_ns, self._event_ref, self._info_ref, self._error_ref)
            return self._next(self._handle, timeout_ns, self._event_ref, self._error_ref)

    # ---- events ----

    def next_event(self, timeout: float | None = None):
        """The next :class:`Frame`, :class:`Dropped` or :class:`EndOfStream`; ``None`` after the end of stream was
        returned, or when ``timeout`` seconds pass without an event."""
        if self._finished:
            return None
        if self._ended is None:
            # The fast path, one foreign call: an event that is waiting, or the first slice of the wait; for a frame,
            # its description comes with it, and its received time is read first, before any other work.
            first = _SLICE_NS if timeout is None or timeout >= 0.25 else max(0, int(timeout * 1e9))
            next_info = self._next_info
            self._enter_call()
            try:
                if self._closed:
                    status = STATUS_CLOSED
                elif next_info is not None:
                    status = next_info(self._handle, first, self._event_ref, self._info_ref, self._error_ref)
                    received = _clock(_MONOTONIC)
                else:
                    status = self._next(self._handle, first, self._event_ref, self._error_ref)
            finally:
                self._leave_call()
            if status == 0:
                if next_info is not None and self._event.type == EVENT_FRAME:
                    return self._frame(received)
                event = self._convert()
                if event is not None:
                    return event
            elif status != STATUS_TIMED_OUT:
                return self._settle(status)
            else:
                self._warn_if_arrays_pin_the_stream()
                if timeout is not None and timeout * 1e9 <= first:
                    return None
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            if self._ended is not None:
                self._finished = True
                return self._ended
            if deadline is None:
                slice_ns = _SLICE_NS
            else:
                slice_ns = max(0, min(_SLICE_NS, int((deadline - time.monotonic()) * 1e9)))
            status = self._call(slice_ns)
            if status == 0:
                event = self._convert()
                if event is not None:
                    return event
                continue
            if status == STATUS_TIMED_OUT:
                self._warn_if_arrays_pin_the_stream()
                if deadline is not None and time.monotonic() >= deadline:
                    return None
                continue
            self._settle(status)

    def _settle(self, status: int):
        """After a call that ended the stream: the end of stream is returned next (now, if this returns it)."""
        if status in (STATUS_CLOSED, STATUS_INTERRUPTED):
            self._ended = self._ended or EndOfStream("closed", None)
        else:
            message = _printable(self._error.message.decode("utf-8", errors="replace"))
            self._ended = EndOfStream(f"error {_native.status_name(status)}: {message}", None)
        self._finished = True
        return self._ended

    def _frame(self, received_time_ns: int) -> NativeFrame:
        """The frame of the event just taken with ``fb_subscriber_next_event_info``, with a copy of the description
        the call wrote (one memcpy: cheaper than a fresh structure and its ``byref`` for the next call)."""
        info = _copy_info(self._info)
        if self._unexplained_drops:
            self._unexplained_drops = 0
        return NativeFrame(_NativeHold(self._event.frame, self._frame_release), self._pinned, info, received_time_ns)

    def _convert(self):
        event = self._event
        kind = event.type
        if kind == EVENT_FRAME:
            if self._next_info is not None:
                return self._frame(_clock(_MONOTONIC))
            self._unexplained_drops = 0
            return NativeFrame._described(self, event.frame)
        if kind == EVENT_DROP:
            drop = self._drop
            reason = drop.reason
            dropped = _dropped(_DROP_REASONS.get(reason) or f"reason{reason}", drop.first_sequence,
                               drop.last_sequence)
            if not self._accepts_dma_buf:
                self._explain_drops(dropped, len(self._pinned))
            return dropped
        if kind == EVENT_END:
            status = event.end_status
            message = event.end_message.decode("utf-8", errors="replace")
            if status == STATUS_END_OF_STREAM:
                self._ended = EndOfStream("stopped" if "stopped" in message or not message else "closed", None)
                self._finished = True
                return self._ended
            # As the pure-Python engine does: the typed error now, the end of stream on the next call.
            code, message = _native.status_name(status), _printable(message)
            self._ended = EndOfStream(f"error {code}: {message}", None)
            raise FrameBusError(code, message)
        if kind == EVENT_SYSTEM_PRESSURE:  # only with system_pressure_events (the library's flag)
            p = event.system_pressure
            self.system_pressure = SystemPressure(
                _LEVELS[p.level] if p.level < len(_LEVELS) else "shutdown",
                tuple(name for bit, name in enumerate(_FACTORS) if p.factors & (1 << bit)),
                None if p.cost < 0 else p.cost,
                None if p.frame_duration_ns == -(1 << 63) else p.frame_duration_ns,
                p.frames_shed)
            return self.system_pressure
        return None  # CONNECTED again (a reconnection) or NONE: nothing for the caller

    def _warn_if_arrays_pin_the_stream(self) -> None:
        if self._warned_pinned or len(self._pinned) < self.maximum_held_frames:
            return
        import warnings
        self._warned_pinned = True
        warnings.warn(f"{len(self._pinned)} released frame(s) stay held because arrays of their planes are still "
                      f"alive, and this subscriber may hold only {self.maximum_held_frames}: no frame can come "
                      "until they go (del them, or keep copies: np.array(plane))", RuntimeWarning, stacklevel=3)

    @property
    def statistics(self) -> dict:
        """The library's counters for this subscriber (delivered, dropped by reason, held now, latency)."""
        stats, error = _native.SubscriberStatistics(), _native.Error()
        handle = self._handle
        if handle is None:
            raise FrameBusError("closed", "the subscriber was closed")
        _native.check(self._lib.fb_subscriber_get_statistics(handle, ctypes.byref(stats), ctypes.byref(error)), error)
        return {name: getattr(stats, name) for name, _ in stats._fields_}

    # ---- ending ----

    def close(self) -> None:
        """Says GOODBYE and frees the subscriber; frames still held stay valid until released (their release then
        goes nowhere). A thread waiting in :meth:`next_event` is interrupted first and gets the end of stream."""
        handle = self._handle
        if handle is None or self._closed:
            return
        self._closed = True
        self._lib.fb_subscriber_interrupt(handle)
        with self._calling:  # the waiting thread leaves at once (interrupted)
            self._handle = None
            self._lib.fb_subscriber_destroy(handle)
        if self._ended is None:
            self._ended = EndOfStream("closed", None)

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass


def _printable(text: str) -> str:
    return "".join(c if c.isprintable() else f"\\x{ord(c):02x}" for c in text)


def _frame_size(largest_frame) -> tuple[int, int]:
    """A ``largest_frame`` of ``(width, height)``, checked as the C library checks it (1 to 65536 each)."""
    try:
        width, height = (int(side) for side in largest_frame)
    except (TypeError, ValueError):
        raise FrameBusError("invalidArgument", f"largest_frame {largest_frame!r}: (width, height), None or 'default'")
    if not (1 <= width <= 65536 and 1 <= height <= 65536):
        raise FrameBusError("invalidArgument", f"largest_frame {width}x{height}: each side 1 to 65536")
    return width, height
