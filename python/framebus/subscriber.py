"""A pure-Python FrameBus subscriber: frames arrive as read-only NumPy views of the publisher's shared memory.

It speaks the wire protocol (docs/PROTOCOL.md, version 2) itself, so it needs nothing but NumPy: the socket,
the descriptors (SCM_RIGHTS), the seals check and the mappings are Python's standard library.
"""

from __future__ import annotations

import collections
import ctypes
import errno
import fcntl
import mmap
import os
import select
import socket
import struct
import threading
import time
import weakref
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from . import _native, _wire
from ._formats import PixelFormat, fourcc_name, pixel_format
from .errors import FrameBusError

F_SEAL_SHRINK, F_SEAL_GROW, F_SEAL_WRITE, F_SEAL_FUTURE_WRITE = 0x2, 0x4, 0x8, 0x10
MAXIMUM_SURFACES = 256
MAXIMUM_EVENTS = 1024


def default_socket_path(name: str = "framebus.sock") -> str:
    """``$XDG_RUNTIME_DIR/framebus.sock``, the CLI's default; a private directory, unlike ``/tmp``."""
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if not runtime:
        raise FrameBusError("invalidArgument", "XDG_RUNTIME_DIR is not set: give the socket path explicitly")
    return os.path.join(runtime, name)


def _time(value: tuple[int, int, int]) -> Fraction | None:
    number, timescale, flags = value
    if not flags & 1 or flags & 0x1C:  # not valid, or infinite / indefinite
        return None
    return Fraction(number, timescale)


@dataclass(frozen=True)
class Dropped:
    """Frames ``first``…``last`` (inclusive) will never arrive, and why: ``frameWasLate`` (a newer frame replaced
    it in this subscriber's latest-only queue), ``outOfBuffers`` (held frames pinned the buffers) or
    ``discontinuity`` (the producer lost them upstream)."""

    reason: str
    first: int
    last: int

    @property
    def count(self) -> int:
        return self.last - self.first + 1


@dataclass(frozen=True)
class EndOfStream:
    """The publisher stopped (``reason`` "stopped") or went away ("closed")."""

    reason: str
    last_sequence: int | None = None


class _PlaneArray(np.ndarray):
    """A plane view that keeps its frame alive: while any view of a plane exists, the frame stays held."""

    _frame: "Frame | None"

    def __array_finalize__(self, obj):  # called for views, slices and copies
        # A view shares the frame's memory and keeps the frame; a copy owns its bytes and keeps nothing.
        self._frame = None if self.flags.owndata else getattr(obj, "_frame", None)


class _Surface:
    def __init__(self, message: _wire.SurfaceMessage, fmt: PixelFormat, maps: list[mmap.mmap]):
        self.id = message.surface_id
        self.message = message
        self.format = fmt
        self.maps = maps
        self.byte_count = sum(message.descriptor_byte_counts)


class Frame:
    """One frame, held until :meth:`release`, the end of a ``with`` block, or until neither it nor any of its plane
    arrays is referenced any more. Plane arrays are zero-copy read-only views of the publisher's memory; after an
    explicit release they must not be used (copy what you keep)."""

    def __init__(self, subscriber: "Subscriber", message: _wire.FrameMessage, surface: _Surface):
        self.sequence = message.sequence
        self.surface_id = message.surface_id
        self.format = surface.format.name
        self.width = surface.message.width
        self.height = surface.message.height
        self.presentation_time = _time(message.pts)
        self.duration = _time(message.duration)
        self.publish_time_ns = message.publish_time
        self.received_time_ns = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
        self.bytes_used = message.bytes_used
        self.discontinuity = bool(message.flags & 1)
        self.color_primaries, self.transfer_function, self.ycbcr_matrix, self.chroma_location = message.attachments
        self._surface = surface
        self._released = [False]
        self._finalizer = weakref.finalize(self, subscriber._release, message.sequence, message.surface_id,
                                           self._released)

    # ---- holding ----

    def release(self) -> None:
        """Hands the frame back to the publisher now (idempotent)."""
        self._finalizer()

    @property
    def is_released(self) -> bool:
        return self._released[0]

    def __enter__(self) -> "Frame":
        return self

    def __exit__(self, *exc) -> None:
        self.release()

    # ---- pixels ----

    @property
    def is_compressed(self) -> bool:
        return self._surface.format.is_compressed

    @property
    def planes(self) -> list[np.ndarray]:
        """Each plane as a read-only NumPy array over the shared memory, with the publisher's row stride:
        NV12 ``Y (H, W) uint8``, ``CbCr (H/2, W/2, 2) uint8``; P010 the same in ``<u2``; BGRA ``(H, W, 4)``."""
        if self._released[0]:
            raise FrameBusError("closed", f"frame {self.sequence} was released")
        # Made afresh on each call (cheap) rather than cached, so frame and planes form no reference cycle and the
        # frame is released the moment its last reference goes, without waiting for the garbage collector.
        fmt = self._surface.format
        if fmt.is_compressed:
            raise FrameBusError("formatMismatch", f"{fmt.name} frames are compressed: use decode() or compressed_bytes")
        planes = []
        for shape, record in zip(fmt.planes, self._surface.message.planes):
            width, height = shape.dimensions(self.width, self.height)
            dims = (height, width) if shape.components == 1 else (height, width, shape.components)
            strides = (record.bytes_per_row, shape.bytes_per_element) + (
                () if shape.components == 1 else (shape.dtype.itemsize,))
            array = np.ndarray(dims, dtype=shape.dtype, buffer=self._surface.maps[record.descriptor_index],
                               offset=record.offset, strides=strides).view(_PlaneArray)
            array._frame = self
            planes.append(array)
        return planes

    @property
    def compressed_bytes(self) -> np.ndarray:
        """A compressed frame's ``bytes_used`` bytes (the layout in docs/COMPRESSED-LAYOUT.md), read-only."""
        if self._released[0]:
            raise FrameBusError("closed", f"frame {self.sequence} was released")
        array = np.ndarray((self.bytes_used,), dtype=np.uint8, buffer=self._surface.maps[0]).view(_PlaneArray)
        array._frame = self
        return array

    def decode(self, out: list[np.ndarray] | None = None) -> list[np.ndarray]:
        """A compressed frame decoded into new (or the given) arrays of its base format, bit-exact, through the
        FrameBus C library's codec. The compressed bytes are the publisher's memory and treated as hostile:
        damaged data raises ``corruptData``, never crashes."""
        fmt = self._surface.format
        if not fmt.is_compressed:
            raise FrameBusError("formatMismatch", f"{fmt.name} frames are not compressed; use planes")
        source = self.compressed_bytes
        base = pixel_format(fmt.base)
        planes = out if out is not None else [
            np.empty(((h := shape.dimensions(self.width, self.height))[1], h[0]) +
                     (() if shape.components == 1 else (shape.components,)), dtype=shape.dtype)
            for shape in base.planes]
        _native_decode(source, base, self.width, self.height, planes)
        return planes

    def decode_bands(self, consume, band_rows: int | None = None) -> None:
        """Decodes a compressed frame band by band, top to bottom, calling ``consume(first_row, planes)`` with
        each band's planes (rows ``first_row`` onwards, as many as the arrays hold): the whole raw frame never
        exists in memory. ``band_rows`` defaults to one tile row; it is rounded up to a multiple of it. The
        arrays are reused for the next band: copy what you keep. Return ``False`` from ``consume`` to stop."""
        fmt = self._surface.format
        if not fmt.is_compressed:
            raise FrameBusError("formatMismatch", f"{fmt.name} frames are not compressed; use planes")
        lib, codec = _native.library(), _codec()
        source, base = self.compressed_bytes, pixel_format(fmt.base)
        tile_rows, error = ctypes.c_uint32(), _native.Error()
        _native.check(lib.fb_codec_tile_row_height(codec.handle, source.ctypes.data, source.nbytes, fmt.code,
                                                   self.width, self.height, ctypes.byref(tile_rows),
                                                   ctypes.byref(error)), error)
        step = max(1, tile_rows.value)
        rows = min(self.height, -(-(band_rows or step) // step) * step)
        planes = [np.empty((shape.dimensions(self.width, rows)[1], shape.dimensions(self.width, rows)[0]) +
                           (() if shape.components == 1 else (shape.components,)), dtype=shape.dtype)
                  for shape in base.planes]
        image = _image(base, self.width, rows, planes)
        failure: list[BaseException] = []

        def band(_context, first_row, row_count):
            try:
                views = [p[: (row_count + 1) // 2] if s.subsampled else p[:row_count]
                         for p, s in zip(planes, base.planes)]
                return 1 if consume(first_row, views) is False else 0
            except BaseException as raised:  # never let a Python exception unwind through C
                failure.append(raised)
                return 1

        callback = _native.RowsCallback(band)
        status = lib.fb_codec_decode_rows(codec.handle, source.ctypes.data, source.nbytes, self.height,
                                          ctypes.byref(image), callback, None, ctypes.byref(error))
        if failure:
            raise failure[0]
        if status != 19:  # FB_ERROR_CANCELLED: the consumer asked to stop
            _native.check(status, error)

    @property
    def latency_ns(self) -> int:
        """From the publisher sending the frame to this subscriber receiving it (same host, CLOCK_MONOTONIC)."""
        return self.received_time_ns - self.publish_time_ns

    def __repr__(self) -> str:
        return f"<Frame {self.sequence} {self.format} {self.width}x{self.height} surface {self.surface_id}>"


class Subscriber:
    """Receives frames from a FrameBus publisher.

    ``accept`` lists the formats this subscriber takes, in order of preference; ``queue`` is ``None`` for
    latest-only delivery (a newer frame replaces one not yet taken, reported as a ``frameWasLate`` drop) or a
    depth of 1…64. Iterating yields :class:`Frame` and :class:`Dropped` events in sequence order, then one
    :class:`EndOfStream`. ``allowed_uids`` are the publisher uids trusted (default: our own). With ``wait`` the
    constructor waits up to ``timeout`` seconds for the publisher's socket to appear.

    Thread safety: one thread iterates; frames may be released (or dropped) from any thread.
    """

    def __init__(self, path: str | None = None, accept=("420v",), queue: int | None = None,
                 allowed_uids: set[int] | None = None, timeout: float = 5.0, wait: bool = False):
        self.path = path or default_socket_path()
        self._formats = [pixel_format(name) for name in accept]
        self._latest_only = queue is None
        self._allowed = {os.getuid()} if allowed_uids is None else set(allowed_uids)
        self._lock = threading.Lock()
        self._surfaces: dict[int, _Surface] = {}
        self._events: collections.deque = collections.deque()
        self._pending_releases: collections.deque[bytes] = collections.deque()
        self._last_sequence = -1
        self._held = 0
        self._ended: EndOfStream | None = None
        self._finished = False
        self._closed = False
        self._socket = self._connect(timeout, wait)
        try:
            self._socket.sendall(_wire.encode_hello([f.code for f in self._formats], queue))
            self.welcome = self._read_welcome(timeout)
        except BaseException:
            self._socket.close()
            raise
        self.format = pixel_format(self.welcome.format).name
        self.maximum_held_frames = self.welcome.maximum_held_frames
        self._socket.setblocking(False)

    # ---- connection ----

    def _connect(self, timeout: float, wait: bool) -> socket.socket:
        deadline = time.monotonic() + timeout
        while True:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET | socket.SOCK_CLOEXEC)
            try:
                sock.settimeout(max(0.01, deadline - time.monotonic()))
                sock.connect(self.path)
                break
            except (FileNotFoundError, ConnectionRefusedError, BlockingIOError) as error:
                sock.close()
                if not wait or time.monotonic() >= deadline:
                    raise FrameBusError("closed", f"no publisher at {self.path}: {error.strerror}") from None
                time.sleep(0.05)
            except BaseException:
                sock.close()
                raise
        pid, uid, _gid = struct.unpack("3i", sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))
        if uid not in self._allowed:
            sock.close()
            raise FrameBusError("publisherNotPermitted", f"the publisher at {self.path} runs as uid {uid}, pid {pid}")
        return sock

    def _read_welcome(self, timeout: float) -> _wire.Welcome:
        self._socket.settimeout(timeout)
        try:
            data, _fds = self._receive(blocking=True)
        except socket.timeout:
            raise FrameBusError("timedOut", "no WELCOME from the publisher") from None
        if data is None:
            raise FrameBusError("closed", "the publisher closed the connection during the handshake")
        kind = _wire.header(data)
        if kind == _wire.ERROR:
            code, reason = _wire.decode_error(data)
            raise FrameBusError(code, _printable(reason))
        if kind != _wire.WELCOME:
            raise FrameBusError("malformedMessage", f"expected WELCOME, got type 0x{kind:04x}")
        welcome = _wire.decode_welcome(data)
        if welcome.format not in {f.code for f in self._formats}:
            raise FrameBusError("malformedMessage", f"granted {fourcc_name(welcome.format)}, which we did not ask")
        return welcome

    def _receive(self, blocking: bool) -> tuple[bytes | None, list[int]]:
        """One datagram and its descriptors; ``(None, [])`` at end of stream. Raises BlockingIOError when empty."""
        flags = socket.MSG_CMSG_CLOEXEC | (0 if blocking else socket.MSG_DONTWAIT)
        try:
            data, ancillary, msg_flags, _ = self._socket.recvmsg(
                _wire.MAXIMUM_MESSAGE_SIZE + 1, socket.CMSG_SPACE(4 * _wire.MAXIMUM_DESCRIPTORS), flags)
        except ConnectionResetError:
            return None, []
        fds: list[int] = []
        for level, kind, payload in ancillary:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                usable = len(payload) - len(payload) % 4
                fds.extend(struct.unpack(f"{usable // 4}i", payload[:usable]))
        if msg_flags & (socket.MSG_TRUNC | socket.MSG_CTRUNC) or len(data) > _wire.MAXIMUM_MESSAGE_SIZE:
            _close_all(fds)
            raise FrameBusError("malformedMessage", "a datagram or its descriptors were cut")
        if not data and not fds:
            return None, []
        return data, fds

    # ---- events ----

    def __iter__(self):
        return self

    def __next__(self):
        event = self.next_event()
        if event is None:
            raise StopIteration
        return event

    def next_event(self, timeout: float | None = None):
        """The next :class:`Frame`, :class:`Dropped` or :class:`EndOfStream`; ``None`` after the end of stream was
        returned, or when ``timeout`` seconds pass without an event."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            self._pump()
            if self._events:
                return self._events.popleft()
            if self._ended is not None:
                if self._finished:
                    return None
                self._finished = True
                return self._ended
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                return None
            try:
                select.select([self._socket], [], [], remaining)
            except (OSError, ValueError):  # closed under us by close() from another thread
                self._end(EndOfStream("closed", None))

    def _pump(self) -> None:
        """Reads every datagram waiting, non-blocking, and turns them into events."""
        self._flush_releases()
        while self._ended is None and not self._closed:
            try:
                data, fds = self._receive(blocking=False)
            except BlockingIOError:
                return
            except FrameBusError as error:
                self._fail(error)
                raise
            if data is None:
                self._end(EndOfStream("closed", None))
                return
            try:
                self._handle(data, fds)
            except FrameBusError as error:
                _close_all(fds)
                self._fail(error)
                raise

    def _handle(self, data: bytes, fds: list[int]) -> None:
        kind = _wire.header(data)
        if fds and kind != _wire.SURFACE:
            raise FrameBusError("malformedMessage", f"descriptors with message type 0x{kind:04x}")
        if kind == _wire.SURFACE:
            self._add_surface(_wire.decode_surface(data), fds)
        elif kind == _wire.RETIRE_SURFACE:
            surface_id = _wire.decode_retire(data)
            if self._surfaces.pop(surface_id, None) is None:
                raise FrameBusError("malformedMessage", f"RETIRE_SURFACE of unknown surface {surface_id}")
        elif kind == _wire.FRAME:
            message = _wire.decode_frame(data)
            surface = self._surfaces.get(message.surface_id)
            if surface is None:
                raise FrameBusError("malformedMessage", f"FRAME on unknown surface {message.surface_id}")
            if message.sequence <= self._last_sequence:
                raise FrameBusError("malformedMessage", f"FRAME sequence {message.sequence} does not increase")
            if message.bytes_used > surface.byte_count:
                raise FrameBusError("malformedMessage", "FRAME bytesUsed exceeds its surface")
            if self._latest_only:
                self._replace_waiting_frame()
            with self._lock:
                if self._held >= self.welcome.maximum_held_frames:
                    raise FrameBusError("malformedMessage",
                                        f"FRAME {message.sequence} beyond the {self._held} frames we may hold")
                self._held += 1
            self._last_sequence = message.sequence
            self._events.append(Frame(self, message, surface))
        elif kind == _wire.DROP:
            first, last, reason = _wire.decode_drop(data)
            if first <= self._last_sequence:
                raise FrameBusError("malformedMessage", f"DROP {first}...{last} goes back in sequence")
            self._last_sequence = last
            self._add_drop(Dropped(reason, first, last))
        elif kind == _wire.END_OF_STREAM:
            self._end(EndOfStream("stopped", _wire.decode_end_of_stream(data)))
        elif kind == _wire.ERROR:
            code, reason = _wire.decode_error(data)
            self._end(EndOfStream(f"error {code}: {_printable(reason)}", None))
        else:
            raise FrameBusError("malformedMessage", f"unexpected message type 0x{kind:04x}")

    def _add_drop(self, drop: Dropped) -> None:
        # Coalesce: a range that continues the last one with the same reason extends it. Past MAXIMUM_EVENTS
        # waiting events (a consumer that does not read, a publisher sending scattered drops), later ranges are
        # merged into the last one, so memory stays bounded while every lost sequence is still reported.
        last = self._events[-1] if self._events else None
        if isinstance(last, Dropped) and (
            (last.reason == drop.reason and last.last + 1 == drop.first) or len(self._events) >= MAXIMUM_EVENTS
        ):
            self._events[-1] = Dropped(last.reason, last.first, drop.last)
        else:
            self._events.append(drop)

    def _replace_waiting_frame(self) -> None:
        for index, event in enumerate(self._events):
            if isinstance(event, Frame):
                self._events[index] = Dropped("frameWasLate", event.sequence, event.sequence)
                event._finalizer.detach()
                event._released[0] = True
                with self._lock:
                    self._held -= 1
                self._queue_release(_wire.encode_release(event.sequence, event.surface_id, not_delivered=True))
                return

    def _add_surface(self, message: _wire.SurfaceMessage, fds: list[int]) -> None:
        def refuse(why: str) -> None:
            _close_all(fds)
            try:
                self._socket.send(_wire.encode_error("invalidSurface", why), socket.MSG_DONTWAIT)
            except OSError:
                pass
            raise FrameBusError("invalidSurface", why)

        if len(fds) != len(message.descriptor_byte_counts):
            refuse(f"{len(fds)} descriptors for {len(message.descriptor_byte_counts)}")
        if message.surface_id in self._surfaces:
            refuse(f"surface {message.surface_id} is already announced")
        if len(self._surfaces) >= min(MAXIMUM_SURFACES, self.welcome.maximum_announced_surfaces):
            refuse("too many surfaces announced")
        if message.pixel_format != self.welcome.format:
            refuse(f"surface format {fourcc_name(message.pixel_format)} is not the granted one")
        if message.backing != _wire.BACKING_MEMFD:
            refuse("a DMA-BUF surface, which this subscriber did not accept")
        fmt = pixel_format(message.pixel_format)
        if len(message.planes) != len(fmt.planes):
            refuse(f"{len(message.planes)} planes for {fmt.name}")
        for index, (shape, record) in enumerate(zip(fmt.planes, message.planes)):
            if shape.dimensions(message.width, message.height) != (record.width, record.height) or \
                    record.bytes_per_element != shape.bytes_per_element or record.offset % shape.dtype.itemsize or \
                    record.bytes_per_row % shape.dtype.itemsize:
                refuse(f"plane {index} does not fit {fmt.name} {message.width}x{message.height}")
        maps = []
        try:
            for fd, count in zip(fds, message.descriptor_byte_counts):
                seals = fcntl.fcntl(fd, fcntl.F_GET_SEALS)
                required = F_SEAL_SHRINK | F_SEAL_GROW
                if seals & required != required or not seals & (F_SEAL_WRITE | F_SEAL_FUTURE_WRITE):
                    refuse(f"memfd seals 0x{seals:x} lack shrink, grow or write seals")
                if os.fstat(fd).st_size < count:
                    refuse("memfd is smaller than its byte count")
                maps.append(mmap.mmap(fd, count, mmap.MAP_SHARED, mmap.PROT_READ))
        except OSError as error:
            refuse(f"cannot check or map the memfd: {error.strerror}")
        finally:
            _close_all(fds)
        self._surfaces[message.surface_id] = _Surface(message, fmt, maps)

    # ---- releasing ----

    def _release(self, sequence: int, surface_id: int, released: list[bool]) -> None:
        released[0] = True
        with self._lock:
            self._held -= 1
        self._queue_release(_wire.encode_release(sequence, surface_id))
        self._flush_releases()

    def _queue_release(self, message: bytes) -> None:
        # Bounded: there is at most one RELEASE per held frame, and the publisher lets us hold
        # maximumHeldFrames frames.
        with self._lock:
            if not self._closed:
                self._pending_releases.append(message)

    def _flush_releases(self) -> None:
        with self._lock:
            while self._pending_releases and not self._closed:
                try:
                    self._socket.send(self._pending_releases[0], socket.MSG_DONTWAIT)
                except BlockingIOError:
                    return  # the publisher is not reading; try again on the next event
                except OSError:
                    self._pending_releases.clear()  # the connection is gone, and with it every hold
                    return
                self._pending_releases.popleft()

    # ---- ending ----

    def _end(self, event: EndOfStream) -> None:
        if self._ended is None:
            self._ended = event

    def _fail(self, error: FrameBusError) -> None:
        if error.code == "malformedMessage":
            try:
                self._socket.send(_wire.encode_error("malformedMessage", error.message), socket.MSG_DONTWAIT)
            except OSError:
                pass
        self._end(EndOfStream(f"error {error.code}: {error.message}", None))
        self.close()

    def close(self) -> None:
        """Says GOODBYE and closes; every frame still held is released by the publisher at once."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._pending_releases.clear()
            try:
                self._socket.send(_wire.encode_goodbye(), socket.MSG_DONTWAIT)
            except OSError:
                pass
            self._socket.close()
        if self._ended is None:
            self._ended = EndOfStream("closed", None)

    def __enter__(self) -> "Subscriber":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass


_codecs = threading.local()


def _native_decode(source: np.ndarray, base: PixelFormat, width: int, height: int, planes: list[np.ndarray]) -> None:
    lib, codec = _native.library(), _codec()
    image = _image(base, width, height, planes)
    error = _native.Error()
    _native.check(lib.fb_codec_decompress(codec.handle, source.ctypes.data, source.nbytes, ctypes.byref(image),
                                          ctypes.byref(error)), error)


def _codec() -> "_CodecHandle":
    """One codec (and its reusable workspace) per thread: calls on one codec are serialised by the library."""
    codec = getattr(_codecs, "handle", None)
    if codec is None:
        lib = _native.library()
        handle, error = ctypes.c_void_p(), _native.Error()
        _native.check(lib.fb_codec_create(1, ctypes.byref(handle), ctypes.byref(error)), error)
        codec = _codecs.handle = _CodecHandle(lib, handle)
    return codec


def _image(base: PixelFormat, width: int, height: int, planes: list[np.ndarray]):
    image = _native.Image()
    image.format, image.width, image.height = base.code, width, height
    if len(planes) != len(base.planes):
        raise FrameBusError("invalidArgument", f"{base.name} has {len(base.planes)} planes")
    for index, (plane, shape) in enumerate(zip(planes, base.planes)):
        w, h = shape.dimensions(width, height)
        if plane.dtype != shape.dtype or plane.shape[:2] != (h, w) or not plane.flags.writeable or \
                plane.strides[1] != shape.bytes_per_element or plane.strides[0] < w * shape.bytes_per_element:
            raise FrameBusError("invalidArgument", f"plane {index} does not fit {base.name} {width}x{height}")
        image.planes[index] = _native.ImagePlane(plane.ctypes.data, plane.strides[0])
    return image


class _CodecHandle:
    def __init__(self, lib, handle):
        self.lib, self.handle = lib, handle

    def __del__(self):
        self.lib.fb_codec_destroy(self.handle)


def _close_all(fds: list[int]) -> None:
    for fd in fds:
        try:
            os.close(fd)
        except OSError as error:
            if error.errno != errno.EBADF:
                raise


def _printable(text: str) -> str:
    """Peer text with control characters escaped, so a hostile peer cannot drive our terminal."""
    return "".join(c if c.isprintable() else f"\\x{ord(c):02x}" for c in text)
