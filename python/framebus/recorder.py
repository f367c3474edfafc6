"""Recording a FrameBus stream to a file, through the C library's recorder (include/framebus.h, "Recorder").

    import framebus
    with framebus.Recorder("/run/user/1000/framebus/camera.sock", "take1.mkv") as recorder:
        while not recorder.wait(timeout=1):               # True once the stream ended
            print(recorder.status.remaining_seconds, recorder.status.backlog_bytes)
    # closed: recorder.status.frames_written frames, every other frame in recorder.status.drops

The same recorder as ``framebus record`` (docs/RECORDING.md): every frame the publisher sends, raw or in the
compressed layout as it arrives, written to a Matroska file with O_DIRECT behind an in-memory backlog, a checkpoint
at least every second, and every frame that did not reach the disk in the file's drop log with its reason.
"""

from __future__ import annotations

import ctypes
import os
from dataclasses import dataclass, field

from . import _native
from .errors import FrameBusError

# fb_recording_drop_reason: the index into fb_recorder_status.drops.
DROP_REASONS = {
    1: "busFrameWasLate", 2: "busOutOfBuffers", 3: "busDiscontinuity", 4: "backlogFull", 5: "diskFull",
    6: "ioError", 7: "formatChange", 8: "busWorkFellBehind",
}
# FB_RECORDER_BUSY_... bits.
BUSY_REASONS = {1: "writeStall", 2: "syncing", 4: "reserving", 8: "backlogFilling", 16: "bufferedWrites"}


class _Options(ctypes.Structure):
    _fields_ = [("path", ctypes.c_char_p), ("output_path", ctypes.c_char_p), ("compressed", ctypes.c_uint32),
                ("buffered", ctypes.c_uint32), ("backlog_bytes", ctypes.c_uint64), ("queue_depth", ctypes.c_uint32),
                ("checkpoint_ms", ctypes.c_uint32), ("connect_timeout_ms", ctypes.c_uint32),
                ("writes_in_flight", ctypes.c_uint32), ("reserved", ctypes.c_uint32 * 4)]


class _Status(ctypes.Structure):
    _fields_ = [("frames_accepted", ctypes.c_uint64), ("frames_written", ctypes.c_uint64),
                ("bytes_written", ctypes.c_uint64), ("bytes_durable", ctypes.c_uint64),
                ("dropped_frames", ctypes.c_uint64), ("drops", ctypes.c_uint64 * 16),
                ("backlog_bytes", ctypes.c_uint64), ("backlog_capacity", ctypes.c_uint64),
                ("backlog_peak_bytes", ctypes.c_uint64), ("remaining_bytes", ctypes.c_uint64),
                ("remaining_seconds", ctypes.c_double), ("bytes_per_second", ctypes.c_double),
                ("write_latency_p50_us", ctypes.c_uint64), ("write_latency_p99_us", ctypes.c_uint64),
                ("busy_reasons", ctypes.c_uint32), ("uses_direct_io", ctypes.c_uint32),
                ("stream_ended", ctypes.c_uint32), ("closed", ctypes.c_uint32), ("failure", ctypes.c_int32),
                ("failure_errno", ctypes.c_int32), ("reserved", ctypes.c_uint64 * 8)]


@dataclass(frozen=True)
class RecorderStatus:
    """A recorder's state, as ``fb_recorder_status`` gives it."""

    frames_accepted: int
    frames_written: int
    bytes_written: int
    bytes_durable: int
    dropped_frames: int
    #: Frames that did not reach the disk, by reason name (only reasons that occurred).
    drops: dict = field(default_factory=dict)
    backlog_bytes: int = 0
    backlog_capacity: int = 0
    backlog_peak_bytes: int = 0
    remaining_bytes: int = 0
    #: Seconds of recording left at the current rate; None while not known.
    remaining_seconds: float | None = None
    bytes_per_second: float = 0.0
    write_latency_p50_us: int = 0
    write_latency_p99_us: int = 0
    #: Why the recorder is busy now (names of BUSY_REASONS).
    busy: frozenset = frozenset()
    uses_direct_io: bool = False
    #: The publisher's stream ended (or never came): stop the recorder.
    stream_ended: bool = False
    closed: bool = False
    #: None, or why the recording stopped writing (a FrameBusError: code "systemCall", errno ENOSPC or EIO...).
    failure: FrameBusError | None = None

    @staticmethod
    def _from(status: _Status) -> "RecorderStatus":
        failure = None
        if status.failure != 0:
            failure = FrameBusError(_native.status_name(status.failure),
                                    os.strerror(status.failure_errno) if status.failure_errno else "recording failed")
            failure.errno = status.failure_errno
        return RecorderStatus(
            frames_accepted=status.frames_accepted, frames_written=status.frames_written,
            bytes_written=status.bytes_written, bytes_durable=status.bytes_durable,
            dropped_frames=status.dropped_frames,
            drops={name: status.drops[index] for index, name in DROP_REASONS.items() if status.drops[index]},
            backlog_bytes=status.backlog_bytes, backlog_capacity=status.backlog_capacity,
            backlog_peak_bytes=status.backlog_peak_bytes, remaining_bytes=status.remaining_bytes,
            remaining_seconds=status.remaining_seconds if status.remaining_seconds >= 0 else None,
            bytes_per_second=status.bytes_per_second, write_latency_p50_us=status.write_latency_p50_us,
            write_latency_p99_us=status.write_latency_p99_us,
            busy=frozenset(name for bit, name in BUSY_REASONS.items() if status.busy_reasons & bit),
            uses_direct_io=bool(status.uses_direct_io), stream_ended=bool(status.stream_ended),
            closed=bool(status.closed), failure=failure,
        )


_declared = None


def _library() -> ctypes.CDLL:
    """The C library with the recorder's functions declared (a library older than 0.7 has none)."""
    global _declared
    if _declared is not None:
        return _declared
    lib = _native.library()
    P, E = ctypes.c_void_p, ctypes.POINTER(_native.Error)
    signatures = {
        "fb_recorder_options_init": (None, [ctypes.POINTER(_Options)]),
        "fb_recorder_create": (ctypes.c_int32, [ctypes.POINTER(_Options), ctypes.POINTER(P), E]),
        "fb_recorder_get_status": (ctypes.c_int32, [P, ctypes.POINTER(_Status), E]),
        "fb_recorder_wait": (ctypes.c_int32, [P, ctypes.c_int64, ctypes.POINTER(_Status), E]),
        "fb_recorder_stop": (ctypes.c_int32, [P, ctypes.POINTER(_Status), E]),
        "fb_recorder_destroy": (None, [P]),
    }
    for name, (result, arguments) in signatures.items():
        try:
            function = getattr(lib, name)
        except AttributeError:
            raise FrameBusError("unsupportedVersion", f"the FrameBus C library has no {name} (it needs 0.7 or later)")
        function.restype, function.argtypes = result, arguments
    _declared = lib
    return lib


class Recorder:
    """Records the stream of the publisher at ``path`` into ``output`` (a Matroska file, created or truncated) until
    :meth:`stop`; starts at once (the recorder connects and writes on threads of its own; a publisher that is not
    there yet is waited for ``connect_timeout`` seconds, then ``status.stream_ended`` is set).

    ``compressed``: record the lossless compressed variant the publisher offers. ``buffered``: write through the page
    cache instead of O_DIRECT. ``backlog_bytes``, ``queue_depth``, ``checkpoint_ms``, ``writes_in_flight``: 0 for
    the defaults (256 MiB, 16, 1000 ms, 2 writes at once). Raises FrameBusError for bad arguments or a file that cannot be created.
    """

    def __init__(self, path: str, output: str, *, compressed: bool = False, buffered: bool = False,
                 backlog_bytes: int = 0, queue_depth: int = 0, checkpoint_ms: int = 0,
                 connect_timeout: float = 5.0, writes_in_flight: int = 0):
        lib = _library()
        options = _Options()
        lib.fb_recorder_options_init(ctypes.byref(options))
        options.path = os.fsencode(path)
        options.output_path = os.fsencode(output)
        options.compressed = 1 if compressed else 0
        options.buffered = 1 if buffered else 0
        options.backlog_bytes = backlog_bytes
        options.queue_depth = queue_depth
        options.checkpoint_ms = checkpoint_ms
        options.writes_in_flight = writes_in_flight
        options.connect_timeout_ms = max(1, int(connect_timeout * 1000))
        handle = ctypes.c_void_p()
        error = _native.Error()
        _native.check(lib.fb_recorder_create(ctypes.byref(options), ctypes.byref(handle), ctypes.byref(error)), error)
        self._lib = lib
        self._handle = handle
        self._final: RecorderStatus | None = None

    @property
    def status(self) -> RecorderStatus:
        """A snapshot of the recorder's state (the final one once stopped)."""
        if self._final is not None:
            return self._final
        status, error = _Status(), _native.Error()
        _native.check(self._lib.fb_recorder_get_status(self._handle, ctypes.byref(status), ctypes.byref(error)), error)
        return RecorderStatus._from(status)

    def wait(self, timeout: float | None = None) -> bool:
        """Blocks (the GIL released) until the publisher's stream ended or the recorder stopped, at most ``timeout``
        seconds (None: without limit); returns whether it did. A wait on the event, not a poll."""
        if self._final is not None:
            return True
        status, error = _Status(), _native.Error()
        nanoseconds = -1 if timeout is None else max(0, int(timeout * 1e9))
        result = self._lib.fb_recorder_wait(self._handle, nanoseconds, ctypes.byref(status), ctypes.byref(error))
        if result == 8:  # FB_ERROR_TIMED_OUT
            return False
        _native.check(result, error)
        return True

    def stop(self) -> RecorderStatus:
        """Stops recording: the backlog is written and the file closed. Returns the final status. Idempotent."""
        if self._final is None:
            status, error = _Status(), _native.Error()
            _native.check(self._lib.fb_recorder_stop(self._handle, ctypes.byref(status), ctypes.byref(error)), error)
            self._final = RecorderStatus._from(status)
            self._lib.fb_recorder_destroy(self._handle)
            self._handle = None
        return self._final

    def __enter__(self) -> "Recorder":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def __del__(self):
        if getattr(self, "_handle", None) is not None and getattr(self, "_final", None) is None:
            try:
                self.stop()
            except Exception:
                pass
