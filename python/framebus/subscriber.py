"""The FrameBus subscriber: frames arrive as read-only NumPy views of the publisher's shared memory.

:class:`Subscriber` runs one of two engines (see its docstring): the C library's poller (``_poller.py``, protocol
version 3) or the pure-Python client here, which speaks the wire protocol (docs/PROTOCOL.md, version 2) itself and
needs nothing but NumPy: the socket, the descriptors (SCM_RIGHTS), the seals check and the mappings are Python's
standard library.
"""

from __future__ import annotations

import collections
import ctypes
import fcntl
import mmap
import os
import select
import stat
import struct
import sys
import threading
import time
import warnings
import weakref
from dataclasses import dataclass

import numpy as np

from . import _native
from ._formats import PixelFormat, fourcc_name, pixel_format
from .errors import FrameBusError


class _LazyModule:
    """A module imported on first use: the wire codec (`_wire`, many dataclasses) and `socket` serve only the
    pure-Python engine, so `import framebus` and the native engine do not pay for them."""

    def __init__(self, name: str):
        self._name = name

    def __getattr__(self, attribute: str):
        import importlib

        value = getattr(importlib.import_module(self._name, __package__), attribute)
        setattr(self, attribute, value)  # found directly from now on
        return value


_wire = _LazyModule("._wire")
socket = _LazyModule("socket")

F_SEAL_SHRINK, F_SEAL_GROW, F_SEAL_WRITE, F_SEAL_FUTURE_WRITE = 0x2, 0x4, 0x8, 0x10
MAXIMUM_SURFACES = 256
MAXIMUM_EVENTS = 1024


def default_socket_path(name: str = "framebus") -> str:
    """The socket path of the stream called ``name``, as every FrameBus client computes it (Swift's
    ``SocketPath.default``, the C library's ``fb_default_socket_path``, GStreamer's elements, the CLI):
    ``$XDG_RUNTIME_DIR/NAME.sock``, or, when ``XDG_RUNTIME_DIR`` is unset or not absolute (containers, CI, ssh),
    ``${TMPDIR:-/tmp}/framebus-UID/NAME.sock``. That directory is created with mode 0700 when missing and refused
    (``permissionDenied``) unless it is a real directory of this user's with no group or other permissions, so
    nobody else can pose as the publisher. ``name`` may still end in ``.sock`` (the old spelling)."""
    if name.endswith(".sock"):
        name = name[: -len(".sock")]
    if not 1 <= len(name.encode()) <= 64 or "/" in name or name.startswith(".") or \
            any(not c.isprintable() for c in name):
        raise FrameBusError("invalidArgument", f"stream name {_printable(name)!r}")
    return os.path.join(runtime_directory(), name + ".sock")


def runtime_directory(environment=None, uid: int | None = None) -> str:
    """``$XDG_RUNTIME_DIR``, or the private fallback directory ``${TMPDIR:-/tmp}/framebus-UID`` (made and checked);
    see :func:`default_socket_path`."""
    environment = os.environ if environment is None else environment
    uid = os.getuid() if uid is None else uid
    runtime = environment.get("XDG_RUNTIME_DIR", "")
    if runtime.startswith("/"):
        return runtime.rstrip("/") or "/"
    temporary = environment.get("TMPDIR", "")
    parent = (temporary.rstrip("/") or "/") if temporary.startswith("/") else "/tmp"
    directory = os.path.join(parent, f"framebus-{uid}")
    try:
        os.mkdir(directory, 0o700)
    except FileExistsError:
        pass
    status = os.lstat(directory)
    if stat.S_ISLNK(status.st_mode) or not stat.S_ISDIR(status.st_mode):
        problem = "it is not a directory (a symbolic link or another file)"
    elif status.st_uid != uid:
        problem = f"it belongs to uid {status.st_uid}, not to uid {uid}"
    elif stat.S_IMODE(status.st_mode) & 0o077 or stat.S_IMODE(status.st_mode) & 0o700 != 0o700:
        problem = f"its mode is 0{stat.S_IMODE(status.st_mode):o}, not 0700"
    else:
        return directory
    raise FrameBusError("permissionDenied", f"XDG_RUNTIME_DIR is unset and the fallback directory {directory} is "
                                            f"unsafe: {problem}; remove it, set XDG_RUNTIME_DIR, or give the socket "
                                            "path explicitly")


def _time(value: tuple[int, int, int]) -> "Fraction | None":
    number, timescale, flags = value
    if not flags & 1 or flags & 0x1C:  # not valid, or infinite / indefinite
        return None
    from fractions import Fraction  # here, not at import: fractions brings decimal (import time)

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


def _dropped(reason: str, first: int, last: int, _new=object.__new__) -> Dropped:
    """A :class:`Dropped`, made without the frozen dataclass's ``__init__`` (an ``object.__setattr__`` per field:
    about a microsecond of a drop event's cost): the fields go straight into the instance's dictionary, the same
    object as ``Dropped(reason, first, last)``."""
    dropped = _new(Dropped)
    fields = dropped.__dict__
    fields["reason"], fields["first"], fields["last"] = reason, first, last
    return dropped


@dataclass(frozen=True)
class SystemPressure:
    """The publisher's system pressure changed (the first right after connecting), for a subscriber made with
    ``system_pressure_events=True``: AVFoundation's ``systemPressureState`` across processes (docs/PROTOCOL.md
    section 5.13). ``level`` is ``"nominal"``, ``"fair"``, ``"serious"``, ``"critical"`` or ``"shutdown"``;
    ``factors`` what drives it, in the order ``cpu``, ``memory``, ``io``, ``thermal``, ``bus`` (the stream's own cost
    and shed frames), empty at nominal. ``cost`` is the publisher's work per frame against the frame interval (1.0 =
    all of it), ``None`` before it measured one; ``frame_duration_ns`` the duration of the frames it publishes now
    (``None`` when it does not say); ``frames_shed`` the frames it shed for this subscriber (drops of reason
    ``workFellBehind``). Lower your own work at serious and critical, as Apple advises."""

    level: str
    factors: tuple[str, ...]
    cost: float | None = None
    frame_duration_ns: int | None = None
    frames_shed: int = 0


@dataclass(frozen=True)
class EndOfStream:
    """The publisher stopped (``reason`` "stopped") or went away ("closed")."""

    reason: str
    last_sequence: int | None = None


class _Hold:
    """A frame's hold on its buffer: while this object lives the publisher may not reuse the buffer, and when it dies
    (its frame released and no array of the frame's memory left) its RELEASE is queued.

    The frame and every array made from its memory refer to it (an array's NumPy ``base`` is a :class:`_Memory` that
    refers to the hold), so a view, a slice or a reshape of a plane keeps the frame held, as Swift keeps a kept
    image buffer; a copy owns its bytes and keeps nothing. ``__del__`` only queues: it may run inside the garbage
    collector at any allocation, on any thread, even one inside the subscriber's lock. (``__del__``, not
    ``weakref.finalize``: a frame's hold costs a third as much, paid for every frame, the late ones too.)
    """

    __slots__ = ("_release", "sequence", "surface_id", "__weakref__")

    def __init__(self, subscriber: "Subscriber", sequence: int, surface_id: int):
        self._release, self.sequence, self.surface_id = subscriber._release, sequence, surface_id

    def detach(self) -> None:
        """Queues nothing when it dies (its frame is released otherwise)."""
        self._release = None

    def __del__(self):
        release, self._release = self._release, None  # at most once
        if release is not None:
            release(_wire.encode_release(self.sequence, self.surface_id))


class _Memory:
    """The base object of an array over a frame's shared memory: NumPy reads the array from ``__array_interface__``
    and keeps this object (and so the hold and the mapping) alive as the base of the array and of every view of
    it."""

    __slots__ = ("__array_interface__", "_hold", "_mapping")

    def __init__(self, validated: np.ndarray, hold: _Hold):
        # `validated` was made with np.ndarray(buffer=mapping, ...), which checked that the strided extent lies in
        # the mapping; it keeps the mapping's buffer export alive.
        interface = validated.__array_interface__
        self.__array_interface__ = {
            "version": 3, "shape": interface["shape"], "typestr": interface["typestr"],
            "strides": interface["strides"], "data": (interface["data"][0], True),  # True: read-only
        }
        self._hold, self._mapping = hold, validated

    @classmethod
    def over(cls, address: int, shape: tuple, dtype: np.dtype, strides: tuple, hold) -> "_Memory":
        """An array over memory the C library mapped and checked (``fb_frame_info``'s planes): read-only."""
        memory = cls.__new__(cls)
        memory.__array_interface__ = {"version": 3, "shape": shape, "typestr": dtype.str, "strides": strides,
                                      "data": (address, True)}
        memory._hold, memory._mapping = hold, None
        return memory

    def array(self) -> np.ndarray:
        return np.asarray(self)


class _Surface:
    def __init__(self, message: _wire.SurfaceMessage, fmt: PixelFormat, maps: list[mmap.mmap], fds: list[int]):
        self.id = message.surface_id
        self.message = message
        self.format = fmt
        self.maps = maps
        self.byte_count = sum(message.descriptor_byte_counts)
        # Kept open to measure what the publisher committed (`check_committed`), and closed exactly once: when the
        # surface is retired, when the subscriber closes, or when the surface goes away, whichever comes first
        # (weakref.finalize runs its callback at most once, from any thread).
        self.fds = fds
        self.close_descriptors = weakref.finalize(self, _close_quietly, fds)
        self.committed = 0
        # A raw frame is read over its planes' rows, a compressed one up to its bytesUsed.
        self.raw_bytes = None if fmt.is_compressed else sum(p.bytes_per_row * p.height for p in message.planes)

    def check_committed(self, frame: _wire.FrameMessage) -> str | None:
        """docs/PROTOCOL.md §5.7: a memfd's holes cost the publisher nothing, and reading one would commit memory on
        our account. Returns why the frame is refused, or None. Sealed memfds never give committed pages back, so
        the allocated bytes are measured again only when a frame needs more than they showed last time."""
        needed = frame.bytes_used if self.raw_bytes is None else self.raw_bytes
        if needed <= self.committed:
            return None
        try:
            self.committed = sum(os.fstat(fd).st_blocks * 512 for fd in self.fds)
        except OSError as error:
            return f"surface {self.id}: {error.strerror}"
        if needed > self.committed:
            return (f"FRAME {frame.sequence} needs {needed} bytes of surface {self.id}, "
                    f"of which the publisher committed {self.committed}")
        return None


class Frame:
    """One frame, held until :meth:`release` (or the end of a ``with`` block) and, after that, while any array of its
    memory lives; without a release, until neither it nor any such array is referenced. Plane arrays are zero-copy
    read-only views of the publisher's memory: their pixels never change while they live. Keep copies, not views,
    of what you keep: a kept view keeps its frame held, and the publisher lets a subscriber hold only
    ``maximum_held_frames`` frames."""

    def __init__(self, subscriber: "Subscriber", message: _wire.FrameMessage, surface: _Surface):
        self.sequence = message.sequence
        self.surface_id = message.surface_id
        self.format = surface.format.name
        self.width = surface.message.width
        self.height = surface.message.height
        self._times = message.pts, message.duration  # made Fractions when asked for (a microsecond each)
        self.publish_time_ns = message.publish_time
        self.received_time_ns = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
        self.bytes_used = message.bytes_used
        self.discontinuity = bool(message.flags & 1)
        self.color_primaries, self.transfer_function, self.ycbcr_matrix, self.chroma_location = message.attachments
        self._surface = surface
        self._pixel_format = surface.format
        self._hold: _Hold | None = _Hold(subscriber, message.sequence, message.surface_id)
        self._pinned = subscriber._pinned

    @property
    def presentation_time(self) -> "Fraction | None":
        return _time(self._times[0])

    @property
    def duration(self) -> "Fraction | None":
        return _time(self._times[1])

    # ---- holding ----

    def release(self) -> None:
        """Lets go of the frame (idempotent): it goes back to the publisher now, or, if arrays of its memory are
        still alive (a plane or a slice kept past the ``with`` block), when the last of them goes. Its pixels
        never change under an array that is still alive; ``planes`` and ``compressed_bytes`` raise from now on."""
        hold, self._hold = self._hold, None
        if hold is not None and sys.getrefcount(hold) > 2:  # more than `hold` and the argument: arrays refer to it
            self._pinned.add(hold)

    @property
    def is_released(self) -> bool:
        """Whether :meth:`release` was called (the publisher gets the frame back once no array of it is left)."""
        return self._hold is None

    def _held(self) -> _Hold:
        hold = self._hold
        if hold is None:
            raise FrameBusError("closed", f"frame {self.sequence} was released")
        return hold

    def __enter__(self) -> "Frame":
        return self

    def __exit__(self, *exc) -> None:
        self.release()

    # ---- pixels ----

    @property
    def is_compressed(self) -> bool:
        return self._pixel_format.is_compressed

    @property
    def planes(self) -> list[np.ndarray]:
        """Each plane as a read-only NumPy array over the shared memory, with the publisher's row stride:
        NV12 ``Y (H, W) uint8``, ``CbCr (H/2, W/2, 2) uint8``; P010 the same in ``<u2``; BGRA ``(H, W, 4)``.
        Each array (and every view or slice of it) keeps the frame held while it lives."""
        hold = self._held()
        # Made afresh on each call (cheap) rather than cached, so frame and planes form no reference cycle and the
        # frame is released the moment its last reference goes, without waiting for the garbage collector.
        fmt = self._pixel_format
        if fmt.is_compressed:
            raise FrameBusError("formatMismatch", f"{fmt.name} frames are compressed: use decode() or compressed_bytes")
        return self._plane_arrays(hold)

    def _plane_arrays(self, hold: "_Hold") -> list[np.ndarray]:
        fmt = self._pixel_format
        planes = []
        for shape, record in zip(fmt.planes, self._surface.message.planes):
            width, height = shape.dimensions(self.width, self.height)
            dims = (height, width) if shape.components == 1 else (height, width, shape.components)
            strides = (record.bytes_per_row, shape.bytes_per_element) + (
                () if shape.components == 1 else (shape.dtype.itemsize,))
            validated = np.ndarray(dims, dtype=shape.dtype, buffer=self._surface.maps[record.descriptor_index],
                                   offset=record.offset, strides=strides)
            planes.append(_Memory(validated, hold).array())
        return planes

    @property
    def compressed_bytes(self) -> np.ndarray:
        """A compressed frame's ``bytes_used`` bytes (the layout in docs/COMPRESSED-LAYOUT.md), read-only; the array
        keeps the frame held while it lives."""
        return self._compressed_array(self._held())

    def _compressed_array(self, hold: "_Hold") -> np.ndarray:
        validated = np.ndarray((self.bytes_used,), dtype=np.uint8, buffer=self._surface.maps[0])
        return _Memory(validated, hold).array()

    def decode(self, out: list[np.ndarray] | None = None) -> list[np.ndarray]:
        """A compressed frame decoded into new (or the given) arrays of its base format, bit-exact, through the
        FrameBus C library's codec. The compressed bytes are the publisher's memory and treated as hostile:
        damaged data raises ``corruptData``, never crashes."""
        fmt = self._pixel_format
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
        fmt = self._pixel_format
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


def _choose_engine(engine: str | None, allowed_uids) -> str:
    engine = engine or os.environ.get("FRAMEBUS_ENGINE") or "auto"
    if engine not in ("auto", "native", "python"):
        raise FrameBusError("invalidArgument", f"engine {engine!r}: 'auto', 'native' or 'python'")
    if engine != "auto":
        return engine
    if allowed_uids is not None and set(allowed_uids) != {os.getuid()}:
        return "python"  # the C library trusts publishers of our own uid only
    try:
        _native.library()
    except FrameBusError:
        return "python"
    return "native"


class Subscriber:
    """Receives frames from a FrameBus publisher.

    ``accept`` lists the formats this subscriber takes, in order of preference; ``queue`` is ``None`` for
    latest-only delivery (a newer frame replaces one not yet taken, reported as a ``frameWasLate`` drop) or a
    depth of 1…64. Iterating yields :class:`Frame` and :class:`Dropped` events in sequence order, then one
    :class:`EndOfStream`; with ``system_pressure_events=True`` also a :class:`SystemPressure` whenever the
    publisher's pressure level or factors change (the first right after connecting), and ``system_pressure`` holds
    the latest (``None`` until one came). ``allowed_uids`` are the publisher uids trusted (default: our own). With ``wait`` the
    constructor waits up to ``timeout`` seconds for the publisher's socket to appear.

    ``engine`` chooses the implementation: ``"native"`` runs the FrameBus C library's poller (protocol version 3:
    the shared-memory rings and futex wake-ups, falling back to version 2; DMA-BUF surfaces taken, bracketed with
    ``DMA_BUF_IOCTL_SYNC``; options ``accepts_dma_buf`` and ``wait_slice_us``), ``"python"`` the pure-Python
    version-2 client here (NumPy only; memfd surfaces only). The default, ``"auto"`` (or ``$FRAMEBUS_ENGINE``),
    takes the native engine when the C library loads, else the pure-Python one.

    Both engines take ``deferred`` (default ``False``): the publisher connects this subscriber at once but sends
    frames only from its deferred start on, once its subscribers that are not deferred have their first frame
    (docs/PROTOCOL.md section 5.1.1), for consumers that can start late (a recorder, an analysis); and
    ``largest_frame``: ``"default"`` (8192 x 8192, at most 8192 x 4352 pixels), ``(width, height)``, or ``None``
    for any size the protocol allows. A publisher's larger surface ends the stream before anything is mapped or
    decoded (section 8.2), so a few bytes of a compressed frame cannot make ``Frame.decode()`` fill a huge image.

    Thread safety: one thread iterates; frames may be released (or dropped) from any thread, and by the garbage
    collector at any moment: releasing never waits for a lock, it queues a RELEASE that is sent at once when the
    socket is free, else by the iterating thread (which a wake-up socket rouses).
    """

    def __new__(cls, path: str | None = None, accept=("420v",), queue: int | None = None,
                allowed_uids: set[int] | None = None, timeout: float = 5.0, wait: bool = False,
                engine: str | None = None, **options):
        if cls is Subscriber and _choose_engine(engine, allowed_uids) == "native":
            from ._poller import NativeSubscriber
            cls = NativeSubscriber
        return object.__new__(cls)

    def __init__(self, path: str | None = None, accept=("420v",), queue: int | None = None,
                 allowed_uids: set[int] | None = None, timeout: float = 5.0, wait: bool = False,
                 engine: str | None = None, **options):
        # The native engine's options mean nothing here: this engine never takes DMA-BUFs and has no waiting thread
        # of the library's to give a slice to.
        unknown = set(options) - {"accepts_dma_buf", "wait_slice_us", "deferred", "largest_frame",
                                  "system_pressure_events"}
        if unknown:
            raise TypeError(f"Subscriber() got unexpected keyword arguments {', '.join(sorted(unknown))}")
        self.engine = "python"
        self._deferred = bool(options.get("deferred", False))
        # The HELLO's wantsStatus: STATUS messages become SystemPressure events, and DROP reason 4 is understood.
        self._wants_status = bool(options.get("system_pressure_events", False))
        self.system_pressure: SystemPressure | None = None
        largest = options.get("largest_frame", "default")
        if isinstance(largest, str) and largest == "default":
            self._largest_frame = (8192, 8192, 8192 * 4352)
        elif largest is None:
            self._largest_frame = None
        else:
            from ._poller import _frame_size
            width, height = _frame_size(largest)
            self._largest_frame = (width, height, width * height)
        self.path = path or default_socket_path()
        self._formats = [pixel_format(name) for name in accept]
        self._latest_only = queue is None
        self._allowed = {os.getuid()} if allowed_uids is None else set(allowed_uids)
        # Guards sending on the socket and closing it. Never waited for by a release: see _release.
        self._lock = threading.Lock()
        self._surfaces: dict[int, _Surface] = {}
        self._events: collections.deque = collections.deque()
        # Latest-only: the frame behind an event the consumer took (a drop, most often) is promised, not replaced,
        # so a consumer slower than the stream that spends a moment on each drop still reaches frames (the C
        # library's queue does the same: SubscriberEventQueue).
        self._promised: "Frame | None" = None
        # RELEASEs not sent yet. Appended from any thread and from finalizers (deque.append is atomic and takes no
        # lock); bounded because there is at most one RELEASE per held frame.
        self._pending_releases: collections.deque[bytes] = collections.deque()
        # Rouses the iterating thread's select() when a release could not be sent where it was made.
        self._wake_reader, self._wake_writer = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        self._wake_reader.setblocking(False)
        self._wake_writer.setblocking(False)
        self._last_sequence = -1
        # Frames taken from the publisher and RELEASEs sent to it: their difference is what the publisher counts as
        # held. `_taken` is written by the iterating thread only, `_sent` under `_lock` only.
        self._taken = 0
        self._sent = 0
        # Holds of released frames that arrays still pin (weakly: each leaves when its last array goes), to explain
        # a stream that stalls because of them.
        self._pinned: weakref.WeakSet = weakref.WeakSet()
        self._warned_pinned = False
        self._ended: EndOfStream | None = None
        self._finished = False
        self._closed = False
        self._socket = self._connect(timeout, wait)
        try:
            try:
                self._send_hello(queue)
                self.welcome = self._read_welcome(timeout)
            except FrameBusError as error:
                # A publisher older than the HELLO's optional flags (deferred, wantsStatus) refuses them with ERROR
                # malformedMessage: ask again at once without them, as the reference subscriber does, and be served
                # as before (no deferral, no SystemPressure events).
                if error.code != "malformedMessage" or not getattr(error, "from_publisher", False) or not (
                        self._deferred or self._wants_status):
                    raise
                self._socket.close()
                self._deferred = self._wants_status = False
                self._socket = self._connect(timeout, wait)
                self._send_hello(queue)
                self.welcome = self._read_welcome(timeout)
        except BaseException:
            self._socket.close()
            raise
        self.format = pixel_format(self.welcome.format).name
        self.maximum_held_frames = self.welcome.maximum_held_frames
        # What was asked for and what the publisher's holding policy granted (docs/PROTOCOL.md section 7.3): 1 for
        # latest-only; a queue may get less than it asked for when the publisher's pool cannot serve it.
        self.requested_queue_depth = 1 if queue is None else queue
        self.granted_queue_depth = self.welcome.queue_depth
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

    def _send_hello(self, queue: int | None) -> None:
        self._socket.sendall(_wire.encode_hello([f.code for f in self._formats], queue, deferred=self._deferred,
                                                  wants_status=self._wants_status))

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
            refusal = FrameBusError(code, _printable(reason))
            refusal.from_publisher = True  # the publisher's answer, not our own finding
            raise refusal
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

    def __aiter__(self):
        """``async for event in bus``: the same events, awaited without blocking the event loop (see
        :func:`_async_events`)."""
        return _async_events(self)

    def next_event(self, timeout: float | None = None):
        """The next :class:`Frame`, :class:`Dropped`, :class:`SystemPressure` (only with
        ``system_pressure_events=True``) or :class:`EndOfStream`; ``None`` after the end of stream was returned, or
        when ``timeout`` seconds pass without an event."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            self._pump()
            # Checked whenever no frame comes (before sleeping, on a timeout, or with only a DROP to return: while
            # pinned frames hold the stream, DROPs keep coming, and a caller that always finds one must still be told).
            if not self._events or not isinstance(self._events[0], Frame):
                self._warn_if_arrays_pin_the_stream()
            if self._events:
                event = self._events.popleft()
                if isinstance(event, Frame):
                    self._unexplained_drops = 0
                    if event is self._promised:
                        self._promised = None
                else:
                    if isinstance(event, Dropped):
                        self._explain_drops(event, self._taken - self._sent)
                    if self._latest_only and self._promised is None:
                        self._promised = next((e for e in self._events if isinstance(e, Frame)), None)
                return event
            if self._ended is not None:
                if self._finished:
                    return None
                self._finished = True
                return self._ended
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                return None
            try:
                ready, _, _ = select.select([self._socket, self._wake_reader], [], [], remaining)
            except (OSError, ValueError):  # closed under us by close() from another thread
                self._end(EndOfStream("closed", None))
                continue
            if self._wake_reader in ready:
                try:
                    self._wake_reader.recv(4096)
                except BlockingIOError:
                    pass

    def _explain_drops(self, drop: Dropped, held: int) -> None:
        """Warns once when the publisher drops frame after frame as ``outOfBuffers`` while this subscriber holds
        less than it may: the usual cause is a publisher whose frames are DMA-BUFs (``framebus capture --memory
        mmap``: the device's own buffers), which it does not send to a subscriber that cannot import them."""
        if drop.reason != "outOfBuffers" or held >= self.maximum_held_frames or self._warned_dma_buf:
            return
        self._unexplained_drops = getattr(self, "_unexplained_drops", 0) + min(drop.count, 1 << 20)
        if self._unexplained_drops >= 10:
            self._warned_dma_buf = True
            warnings.warn(
                f"the publisher at {self.path} dropped {self._unexplained_drops} frames in a row for this subscriber "
                f"(outOfBuffers) while it holds {held} of the {self.maximum_held_frames} frames it may: most likely "
                "its frames are DMA-BUFs (for example `framebus capture --memory mmap`), which this subscriber does "
                "not take (the pure-Python engine cannot; the native one refuses them with accepts_dma_buf=False): "
                "use engine='native' (the FrameBus C library), or capture into memory any subscriber can map "
                "(--memory udmabuf or memfd)", RuntimeWarning, stacklevel=3)

    _warned_dma_buf = False

    def _warn_if_arrays_pin_the_stream(self) -> None:
        """Warns once when we wait at our holding limit while arrays of released frames keep some of them held: the
        publisher sends nothing more (only drops) until those arrays go."""
        if self._warned_pinned or self._taken - self._sent < self.welcome.maximum_held_frames:
            return
        pinned = len(self._pinned)
        if pinned:
            self._warned_pinned = True
            warnings.warn(f"{pinned} released frame(s) stay held because arrays of their planes are still alive, and "
                          f"this subscriber may hold only {self.welcome.maximum_held_frames}: no frame can come until "
                          "they go (del them, or keep copies: np.array(plane))", RuntimeWarning, stacklevel=3)

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
            descriptors = _Descriptors(fds)  # the one owner of the received descriptors: each is closed once
            try:
                self._handle(data, descriptors)
            except FrameBusError as error:
                descriptors.close()
                self._fail(error)
                raise
            except BaseException:
                descriptors.close()
                raise

    def _handle(self, data: bytes, descriptors: "_Descriptors") -> None:
        kind = _wire.header(data)
        if descriptors.fds and kind != _wire.SURFACE:
            raise FrameBusError("malformedMessage", f"descriptors with message type 0x{kind:04x}")
        if kind == _wire.SURFACE:
            self._add_surface(_wire.decode_surface(data), descriptors)
        elif kind == _wire.RETIRE_SURFACE:
            surface_id = _wire.decode_retire(data)
            retired = self._surfaces.pop(surface_id, None)
            if retired is None:
                raise FrameBusError("malformedMessage", f"RETIRE_SURFACE of unknown surface {surface_id}")
            retired.close_descriptors()  # frames still held keep its mappings
        elif kind == _wire.FRAME:
            message = _wire.decode_frame(data)
            surface = self._surfaces.get(message.surface_id)
            if surface is None:
                raise FrameBusError("malformedMessage", f"FRAME on unknown surface {message.surface_id}")
            if message.sequence <= self._last_sequence:
                raise FrameBusError("malformedMessage", f"FRAME sequence {message.sequence} does not increase")
            if message.bytes_used > surface.byte_count:
                raise FrameBusError("malformedMessage", "FRAME bytesUsed exceeds its surface")
            refusal = surface.check_committed(message)
            if refusal is not None:
                try:
                    self._socket.send(_wire.encode_error("invalidSurface", refusal), socket.MSG_DONTWAIT)
                except OSError:
                    pass
                raise FrameBusError("invalidSurface", refusal)
            if self._latest_only:
                self._replace_waiting_frame()
            held = self._taken - self._sent
            if held >= self.welcome.maximum_held_frames:
                raise FrameBusError("malformedMessage",
                                    f"FRAME {message.sequence} beyond the {held} frames we may hold")
            self._taken += 1
            self._last_sequence = message.sequence
            self._events.append(Frame(self, message, surface))
            if self._latest_only and self._promised is not None:
                self._replace_waiting_frame()  # the promised frame waits: this one is late on arrival
        elif kind == _wire.STATUS:
            if not self._wants_status:
                raise FrameBusError("malformedMessage", "STATUS to a subscriber that did not ask for it")
            status = _wire.decode_status(data)
            duration = _time(status.frame_duration)
            pressure = SystemPressure(status.level, status.factors, status.cost,
                                      None if duration is None else round(duration * 1_000_000_000),
                                      status.frames_shed)
            previous = self.system_pressure
            self.system_pressure = pressure
            if previous is None or (previous.level, previous.factors) != (pressure.level, pressure.factors):
                # At most one waits: a newer state replaces an older one not yet taken, so a publisher that changes
                # its state in a loop cannot grow the queue.
                for index, event in enumerate(self._events):
                    if isinstance(event, SystemPressure):
                        del self._events[index]
                        break
                self._events.append(pressure)
        elif kind == _wire.DROP:
            first, last, reason = _wire.decode_drop(data, self._wants_status)
            if first <= self._last_sequence:
                raise FrameBusError("malformedMessage", f"DROP {first}...{last} goes back in sequence")
            self._last_sequence = last
            self._add_drop(_dropped(reason, first, last))
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
            self._events[-1] = _dropped(last.reason, last.first, drop.last)
        else:
            self._events.append(drop)

    def _replace_waiting_frame(self) -> None:
        # The waiting frame becomes a frameWasLate drop, merged into the one before it when it continues that range
        # (as the C library's queue does): a consumer slower than the publisher gets one drop event per frame it
        # takes, not one per frame it missed, and the queue does not grow with the frames it misses.
        events = self._events
        for index, event in enumerate(events):
            if isinstance(event, Frame) and event is not self._promised:
                sequence = event.sequence
                before = events[index - 1] if index else None
                if isinstance(before, Dropped) and before.reason == "frameWasLate" and before.last + 1 == sequence:
                    events[index - 1] = _dropped("frameWasLate", before.first, sequence)
                    del events[index]
                else:
                    events[index] = _dropped("frameWasLate", sequence, sequence)
                hold, event._hold = event._hold, None  # never handed out, so no array of it exists
                if hold is not None:
                    hold.detach()
                self._release(_wire.encode_release(event.sequence, event.surface_id, not_delivered=True))
                return

    def _add_surface(self, message: _wire.SurfaceMessage, descriptors: "_Descriptors") -> None:
        # The descriptors are closed exactly once, by their owner: here after mapping, or by _pump when this raises.
        def refuse(why: str) -> None:
            try:
                self._socket.send(_wire.encode_error("invalidSurface", why), socket.MSG_DONTWAIT)
            except OSError:
                pass
            raise FrameBusError("invalidSurface", why)

        fds = descriptors.fds
        if len(fds) != len(message.descriptor_byte_counts):
            refuse(f"{len(fds)} descriptors for {len(message.descriptor_byte_counts)}")
        if message.surface_id in self._surfaces:
            refuse(f"surface {message.surface_id} is already announced")
        if len(self._surfaces) >= min(MAXIMUM_SURFACES, self.welcome.maximum_announced_surfaces):
            refuse("too many surfaces announced")
        if message.pixel_format != self.welcome.format:
            refuse(f"surface format {fourcc_name(message.pixel_format)} is not the granted one")
        if self._largest_frame is not None:
            width, height, pixels = self._largest_frame
            if message.width > width or message.height > height or message.width * message.height > pixels:
                refuse(f"a {message.width}x{message.height} surface is larger than this subscriber's largest frame "
                       f"({width}x{height}, {pixels} pixels)")
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
        for fd, count in zip(fds, message.descriptor_byte_counts):
            try:
                seals = fcntl.fcntl(fd, fcntl.F_GET_SEALS)
                size = os.fstat(fd).st_size
            except OSError as error:
                refuse(f"cannot check the memfd: {error.strerror}")
            required = F_SEAL_SHRINK | F_SEAL_GROW
            if seals & required != required or not seals & (F_SEAL_WRITE | F_SEAL_FUTURE_WRITE):
                refuse(f"memfd seals 0x{seals:x} lack shrink, grow or write seals")
            if size < count:
                refuse("memfd is smaller than its byte count")
            try:
                maps.append(mmap.mmap(fd, count, mmap.MAP_SHARED, mmap.PROT_READ))
            except OSError as error:
                refuse(f"cannot map the memfd: {error.strerror}")
        # The surface owns the descriptors from here (to measure committed memory); _pump no longer closes them.
        owned, descriptors.fds = descriptors.fds, []
        self._surfaces[message.surface_id] = _Surface(message, fmt, maps, owned)

    # ---- releasing ----

    def _release(self, message: bytes) -> None:
        """Queues one RELEASE and sends what is waiting if the socket is free. Runs in finalizers (the garbage
        collector may call it at any allocation, on any thread, inside `_lock` too), so it never waits for a lock:
        when `_lock` is taken, the iterating thread is roused and sends on its next pass."""
        if self._closed:
            return  # the connection is gone, and with it every hold
        self._pending_releases.append(message)
        if self._lock.acquire(blocking=False):
            try:
                self._send_releases()
            finally:
                self._lock.release()
            if not self._pending_releases:
                return
        try:
            self._wake_writer.send(b"\0")
        except OSError:
            pass  # full (a wake-up is already pending) or the subscriber is being torn down

    def _flush_releases(self) -> None:
        with self._lock:
            self._send_releases()

    def _send_releases(self) -> None:
        """Sends waiting RELEASEs in order; the caller holds `_lock`."""
        while self._pending_releases and not self._closed:
            self._sent += 1
            try:
                self._socket.send(self._pending_releases[0], socket.MSG_DONTWAIT)
            except BlockingIOError:
                self._sent -= 1
                return  # the publisher is not reading; try again on the next event
            except OSError:
                self._sent -= 1
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
            # A surface added by a pass of _pump still running lands in the new dictionary and its descriptors are
            # closed when it goes away.
            surfaces, self._surfaces = self._surfaces, {}
        for surface in surfaces.values():
            surface.close_descriptors()
        if self._ended is None:
            self._ended = EndOfStream("closed", None)

    def __enter__(self) -> "Subscriber":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self):
        # No frame refers to this subscriber any more (each hold's finalizer does), so no release can come now and
        # the wake-up pair may go.
        try:
            self.close()
        except Exception:
            pass
        for wake in (getattr(self, "_wake_reader", None), getattr(self, "_wake_writer", None)):
            if wake is not None:
                wake.close()


async def _async_events(bus: Subscriber):
    """The events of ``bus`` for ``async for``. A helper thread waits for each event (in ``next_event``, which lets
    go of the GIL while it waits in the C library) only once the loop asks for one, so latest-only replacement and
    the held-frame limit work as they do for a blocking consumer; it hands the event over through an eventfd
    registered with the loop (``loop.add_reader``), so the loop never blocks and wakes once per event. Leaving the
    ``async for`` (break, an exception, cancellation) stops the thread within a quarter of a second; an event it
    had taken by then is released with its frame."""
    import asyncio

    loop = asyncio.get_running_loop()
    wake = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
    taken: collections.deque = collections.deque()  # what the thread took: an event, or None at the end
    asked = threading.Semaphore(0)
    stop = threading.Event()
    gate = threading.Lock()
    waiter: list = [None]

    def on_wake() -> None:
        try:
            os.eventfd_read(wake)
        except BlockingIOError:
            return
        future = waiter[0]
        if future is not None and not future.done():
            future.set_result(None)

    def pump() -> None:
        while not stop.is_set():
            if not asked.acquire(timeout=0.25):
                continue
            event = None
            while not stop.is_set():
                try:
                    event = bus.next_event(timeout=0.25)
                except BaseException as error:  # handed to the loop, raised there
                    event = error
                    break
                if event is not None or bus._finished:
                    break
            taken.append(event)
            with gate:  # never write a descriptor number the loop closed (and something else may have reused)
                if stop.is_set():
                    return
                os.eventfd_write(wake, 1)

    loop.add_reader(wake, on_wake)
    thread = threading.Thread(target=pump, name="framebus-async", daemon=True)
    thread.start()
    pending = False  # the thread was asked for an event it has not handed over yet
    try:
        while True:
            if not taken:
                if not pending:
                    pending = True
                    asked.release()
                while not taken:
                    waiter[0] = loop.create_future()
                    if taken:
                        break
                    await waiter[0]
            event = taken.popleft()
            pending = False
            if event is None:
                return
            if isinstance(event, BaseException):
                raise event
            yield event
    finally:
        with gate:
            stop.set()
        loop.remove_reader(wake)
        os.close(wake)


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


class _Descriptors:
    """The one owner of descriptors received with a datagram: :meth:`close` closes each exactly once (a second close
    could shut a descriptor number another thread was handed in between), and an error, EBADF included, is raised:
    it would mean a descriptor was closed behind the owner's back."""

    __slots__ = ("fds",)

    def __init__(self, fds: list[int]):
        self.fds = fds

    def close(self) -> None:
        fds, self.fds = self.fds, []
        _close_all(fds)


def _close_all(fds: list[int]) -> None:
    """Closes each descriptor once; the first error is raised after every one was closed."""
    failure = None
    for fd in fds:
        try:
            os.close(fd)
        except OSError as error:
            failure = failure or error
    if failure is not None:
        raise failure


def _close_quietly(fds: list[int]) -> None:
    """Closes a surface's descriptors (once: see _Surface); an error here has no one to go to."""
    try:
        _close_all(fds)
    except OSError:
        pass


def _printable(text: str) -> str:
    """Peer text with control characters escaped, so a hostile peer cannot drive our terminal."""
    return "".join(c if c.isprintable() else f"\\x{ord(c):02x}" for c in text)
