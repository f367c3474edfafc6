"""Publishing NumPy arrays on a FrameBus, through the C library (include/framebus.h)."""

from __future__ import annotations

import ctypes
import time
from contextlib import contextmanager

import numpy as np

from . import _native
from ._formats import pixel_format
from .errors import FrameBusError

_REASONS = {"frameWasLate": 1, "outOfBuffers": 2, "discontinuity": 3}


def _plane_view(plane: _native.Plane, shape, writable: bool, allocation: np.ndarray | None = None,
                offset: int = 0) -> np.ndarray:
    """A NumPy view of one plane of shared memory (no copy), with its row stride: a view into ``allocation`` (the
    whole buffer as bytes, starting ``offset`` bytes before the plane) when given, else over the plane alone."""
    width, height, components = plane.width, plane.height, shape.components
    dims = (height, width) if components == 1 else (height, width, components)
    strides = (plane.bytes_per_row, shape.bytes_per_element) + (() if components == 1 else (shape.dtype.itemsize,))
    if allocation is None:
        allocation = np.ndarray((plane.byte_count,), np.uint8,
                                buffer=(ctypes.c_uint8 * plane.byte_count).from_address(plane.data))
    # np.ndarray checks that the strided extent lies inside `allocation`.
    array = np.ndarray(dims, dtype=shape.dtype, buffer=allocation, offset=offset, strides=strides)
    if not writable:
        array.flags.writeable = False
    return array


class _Scratch:
    """The structures one per-frame call of the publisher writes into, with their ``byref``s made once."""

    __slots__ = ("buffer", "info", "error", "sequence", "buffer_ref", "info_ref", "error_ref", "sequence_ref")

    def __init__(self):
        self.buffer, self.info = ctypes.c_void_p(), _native.BufferInfo()
        self.error, self.sequence = _native.Error(), ctypes.c_uint64()
        self.buffer_ref, self.info_ref = ctypes.byref(self.buffer), ctypes.byref(self.info)
        self.error_ref, self.sequence_ref = ctypes.byref(self.error), ctypes.byref(self.sequence)


class Buffer:
    """A pool buffer being filled (:meth:`Publisher.next_buffer`): ``planes`` are writable NumPy arrays over it.
    Published with :meth:`Publisher.publish`, or given back with :meth:`discard` (also at the end of its ``with``
    block when not published)."""

    __slots__ = ("planes", "_publisher", "_handle")

    def __init__(self, publisher: "Publisher", handle, planes: list[np.ndarray]):
        self._publisher, self._handle, self.planes = publisher, handle, planes

    def _take(self):
        handle, self._handle = self._handle, None
        if handle is None:
            raise FrameBusError("closed", "this buffer was already published or discarded")
        for plane in self.planes:
            plane.setflags(write=False)  # (half the cost of `plane.flags.writeable = False`)
        return handle

    def _publish(self, presentation_time_ns, options) -> int:
        return self._publisher._publish(self._take(), presentation_time_ns, **options)

    def discard(self) -> None:
        """Gives the buffer back to the pool unpublished (idempotent)."""
        if self._handle is not None:
            self._publisher._lib.fb_buffer_discard(self._take())

    @property
    def is_published(self) -> bool:
        return self._handle is None

    def __enter__(self) -> "Buffer":
        return self

    def __exit__(self, *exc) -> None:
        self.discard()

    def __del__(self):
        if getattr(self, "_handle", None) is not None:
            self.discard()


class Publisher:
    """Publishes frames of one base format and size to every subscriber of ``path``.

    ``offer`` lists the formats subscribers may ask for (default: ``format`` and its lossless compressed
    variant, encoded once per frame for every subscriber that takes it). ``buffers`` is the pool's
    (minimum, maximum) size: frames held by subscribers pin buffers, and a full pool drops frames
    (``outOfBuffers``) rather than blocking. ``effort`` is how hard the encoder of the compressed variant searches:
    ``"fast"`` (live streams) or ``"best"`` (recorders: smaller on screen content, several times slower to encode).
    """

    _handle = None  # until fb_publisher_create succeeds: close() and __del__ of a failed construction do nothing

    def __init__(self, path: str, format: str = "420v", width: int = 1920, height: int = 1080,
                 offer=None, buffers=(4, 8), socket_mode: int = 0o600, maximum_subscribers: int = 16,
                 effort: str = "fast"):
        self._lib = _native.library()
        self.format = pixel_format(format)
        if self.format.is_compressed:
            raise FrameBusError("formatMismatch", "publish a base format; offer its compressed variant")
        options = _native.PublisherOptions()
        self._lib.fb_publisher_options_init(ctypes.byref(options))
        self._offered = (ctypes.c_uint32 * 16)(*[pixel_format(f).code for f in (offer or [])])
        options.path = path.encode()
        options.format, options.width, options.height = self.format.code, width, height
        if offer:
            options.offered_formats, options.offered_format_count = self._offered, len(offer)
        options.minimum_buffer_count, options.maximum_buffer_count = buffers
        options.maximum_subscribers, options.socket_mode = maximum_subscribers, socket_mode
        efforts = {"fast": 0, "best": 1}
        if effort not in efforts:
            raise FrameBusError("invalidArgument", f"effort {effort!r} is neither 'fast' nor 'best'")
        options.compression_effort = efforts[effort]
        handle, error = ctypes.c_void_p(), _native.Error()
        _native.check(self._lib.fb_publisher_create(ctypes.byref(options), ctypes.byref(handle), ctypes.byref(error)),
                      error)
        self._handle = handle
        self._allocations: dict[tuple[int, int], np.ndarray] = {}
        # Per buffer of the pool (its planes' addresses and its size): writable plane arrays that are never handed
        # out; each buffer handed out gets views of them (ndarray.view: about 0.1 µs, against 1.5-4 µs for an
        # np.ndarray over the memory).
        self._templates: dict[tuple, list[np.ndarray]] = {}
        # Scratch structures for the per-frame calls (taken and put back, so threads never share one), and the
        # one-call acquire where the library has it.
        self._scratch: list = []
        self._acquire_info = (self._lib.fb_publisher_acquire_buffer_info
                              if _native.has(self._lib, "fb_publisher_acquire_buffer_info") else None)
        self.path, self.width, self.height = path, width, height

    @contextmanager
    def buffer(self, presentation_time_ns: int | None = None, **publish_options):
        """A pool buffer as writable NumPy plane views (zero-copy): fill them inside the ``with`` block and the
        frame is published at its end (discarded if the block raises). Raises ``outOfBuffers`` when
        subscribers hold every buffer (the frame is then reported to them as dropped)."""
        buffer, error = ctypes.c_void_p(), _native.Error()
        _native.check(self._lib.fb_publisher_acquire_buffer(self._live(), ctypes.byref(buffer), ctypes.byref(error)),
                      error)
        info = _native.BufferInfo()
        status = self._lib.fb_buffer_get_info(buffer, ctypes.byref(info), ctypes.byref(error))
        if status != 0:
            self._lib.fb_buffer_discard(buffer)
            _native.check(status, error)
        planes = self._planes(info)
        try:
            yield planes
        except BaseException:
            self._lib.fb_buffer_discard(buffer)
            raise
        finally:
            for plane in planes:
                plane.flags.writeable = False
        self.last_sequence = self._publish(buffer, presentation_time_ns, **publish_options)

    def next_buffer(self, timeout: float | None = 0) -> "Buffer":
        """The next buffer of the pool, its planes writable NumPy arrays over the pool's shared memory (nothing is
        copied): fill them, then :meth:`publish` the buffer. Use it as a context manager, so a buffer that is not
        published (the block raised, or returned early) goes back to the pool::

            with publisher.next_buffer() as frame:
                frame.planes[0][:] = luma
                publisher.publish(frame)

        When subscribers hold every buffer it waits up to ``timeout`` seconds for one to come free (0, the
        default: not at all; ``None``: without limit), then raises ``outOfBuffers`` (``timedOut`` after a wait);
        nothing is reported to subscribers then: call :meth:`report_drops` if you give up on the frame. Once
        published, a buffer's memory belongs to the subscribers: its arrays are made read-only then, and writing
        through a view of them that you kept would change frames they are reading."""
        lib, handle = self._lib, self._live()
        scratch = self._scratch.pop() if self._scratch else _Scratch()
        try:
            if self._acquire_info is not None:  # one call: the buffer and its description
                acquire = self._acquire_info
                arguments = (scratch.buffer_ref, scratch.info_ref, scratch.error_ref)
            else:
                acquire = lib.fb_publisher_acquire_buffer_timeout
                arguments = (scratch.buffer_ref, scratch.error_ref)
            if timeout == 0:
                status = acquire(handle, 0, *arguments)
            else:
                # In slices, so a signal (Ctrl-C) is handled: Python runs handlers only between foreign calls.
                deadline = None if timeout is None else time.monotonic() + timeout
                while True:
                    left = 0.25 if deadline is None else min(0.25, max(0.0, deadline - time.monotonic()))
                    status = acquire(handle, int(left * 1e9), *arguments)
                    if status != 8 or (deadline is not None and time.monotonic() >= deadline):  # 8: timed out
                        break
            _native.check(status, scratch.error)
            buffer = scratch.buffer.value
            if self._acquire_info is None:
                status = lib.fb_buffer_get_info(buffer, scratch.info_ref, scratch.error_ref)
                if status != 0:
                    lib.fb_buffer_discard(buffer)
                    _native.check(status, scratch.error)
            try:
                planes = self._planes(scratch.info)
            except BaseException:
                lib.fb_buffer_discard(buffer)
                raise
            return Buffer(self, buffer, planes)
        finally:
            self._scratch.append(scratch)

    def _planes(self, info: _native.BufferInfo) -> list[np.ndarray]:
        """Writable views of a buffer's planes. The arrays over a buffer's memory are made once per buffer of the
        pool (the planes' addresses and the buffer's size, which the library reports for the buffer in hand: the
        publisher's format and size fix the rest of the layout) and kept; a buffer handed out again costs one
        ``view()`` per plane. They are only ever used while the library says that memory is the buffer being
        filled."""
        planes = info.planes
        count = len(self.format.planes)
        key = (info.allocation_size,) + tuple(planes[index].data for index in range(count))
        templates = self._templates.get(key)
        if templates is None:
            templates = self._make_templates(info)
            if len(self._templates) >= 64:  # a pool that keeps making new buffers: forget the old ones
                self._templates.clear()
            self._templates[key] = templates
        return [template.view() for template in templates]

    def _make_templates(self, info: _native.BufferInfo) -> list[np.ndarray]:
        """Arrays over one buffer's planes, each checked by NumPy to lie inside the buffer's allocation (or its own
        plane's bytes, for a plane in memory of its own)."""
        planes = info.planes
        first = planes[0]
        start, size = first.data - first.offset, info.allocation_size
        allocation = self._allocations.get((start, size))
        if allocation is None:
            if len(self._allocations) >= 64:
                self._allocations.clear()
            allocation = np.ndarray((size,), np.uint8, buffer=(ctypes.c_uint8 * size).from_address(start))
            self._allocations[(start, size)] = allocation
        views = []
        for index, shape in enumerate(self.format.planes):
            plane = planes[index]
            offset = plane.data - start
            if 0 <= offset and offset + plane.byte_count <= size:
                views.append(_plane_view(plane, shape, True, allocation, offset))
            else:  # a plane in memory of its own
                views.append(_plane_view(plane, shape, True))
        return views

    def publish(self, *planes, presentation_time_ns: int | None = None, **publish_options) -> int:
        """Publishes a :class:`Buffer` from :meth:`next_buffer` (zero-copy), or copies ``planes`` (arrays shaped as
        a subscriber receives them: NV12 ``(H, W)`` + ``(H/2, W/2, 2)`` uint8, P010 the same in uint16, BGRA
        ``(H, W, 4)``) into a pool buffer and publishes that: one copy. Returns the frame's sequence number."""
        if len(planes) == 1 and isinstance(planes[0], Buffer):
            return planes[0]._publish(presentation_time_ns, publish_options)
        if len(planes) != len(self.format.planes):
            raise FrameBusError("invalidArgument", f"{self.format.name} has {len(self.format.planes)} planes")
        with self.buffer(presentation_time_ns, **publish_options) as targets:
            for source, target in zip(planes, targets):
                if source.shape != target.shape:
                    raise FrameBusError("invalidArgument", f"plane shape {source.shape}, expected {target.shape}")
                np.copyto(target, source, casting="same_kind")
        return self.last_sequence

    def _publish(self, buffer, presentation_time_ns, duration_ns: int | None = None, discontinuity: bool = False,
                 colorimetry: tuple[int, int, int, int] | None = None) -> int:
        scratch = self._scratch.pop() if self._scratch else _Scratch()
        try:
            if presentation_time_ns is None and duration_ns is None and not discontinuity and not colorimetry:
                info = None  # nothing to say: the library's defaults, as a zeroed fb_publish_info gives
            else:
                publish_info = _native.PublishInfo()
                if presentation_time_ns is not None:
                    publish_info.presentation_time = _native.Time(presentation_time_ns, 1_000_000_000, 1)
                if duration_ns is not None:
                    publish_info.duration = _native.Time(duration_ns, 1_000_000_000, 1)
                publish_info.flags = 1 if discontinuity else 0
                if colorimetry:
                    publish_info.colorimetry = _native.Colorimetry(*colorimetry)
                info = ctypes.byref(publish_info)
            _native.check(self._lib.fb_buffer_publish(buffer, info, scratch.sequence_ref, scratch.error_ref),
                          scratch.error)
            return scratch.sequence.value
        finally:
            self._scratch.append(scratch)

    def report_drops(self, reason: str, count: int = 1) -> tuple[int, int]:
        """Tells every subscriber that ``count`` frames were lost upstream; returns their sequence range."""
        first, last, error = ctypes.c_uint64(), ctypes.c_uint64(), _native.Error()
        _native.check(self._lib.fb_publisher_report_drops(self._live(), _REASONS[reason], count, ctypes.byref(first),
                                                          ctypes.byref(last), ctypes.byref(error)), error)
        return first.value, last.value

    @property
    def statistics(self) -> dict:
        stats, error = _native.PublisherStatistics(), _native.Error()
        _native.check(self._lib.fb_publisher_get_statistics(self._live(), ctypes.byref(stats), ctypes.byref(error)),
                      error)
        return {name: getattr(stats, name) for name, _ in stats._fields_}

    def _live(self):
        if self._handle is None:
            raise FrameBusError("closed", "the publisher was closed")
        return self._handle

    def close(self) -> None:
        """Stops: every subscriber gets END_OF_STREAM and the socket file is removed."""
        if self._handle is not None:
            self._lib.fb_publisher_destroy(self._handle)
            self._handle = None

    def __enter__(self) -> "Publisher":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self):
        self.close()
