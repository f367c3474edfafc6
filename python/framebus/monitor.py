"""A FrameBus monitor connection: the publisher's live per-subscriber statistics (what `framebus top` shows)."""

from __future__ import annotations

import os
import socket
import struct

from . import _wire
from .errors import FrameBusError
from .subscriber import _printable


class Monitor:
    """Connects as a monitor; :meth:`next_report` returns each MONITOR_REPORT (one per second by default)."""

    def __init__(self, path: str, timeout: float = 5.0, allowed_uids: set[int] | None = None):
        self._socket = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET | socket.SOCK_CLOEXEC)
        try:
            self._socket.settimeout(timeout)
            self._socket.connect(path)
            _pid, uid, _gid = struct.unpack("3i", self._socket.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))
            if uid not in ({os.getuid()} if allowed_uids is None else allowed_uids):
                raise FrameBusError("publisherNotPermitted", f"the publisher at {path} runs as uid {uid}")
            self._socket.sendall(_wire.encode_monitor_hello())
            data = self._receive()
            if _wire.header(data) == _wire.ERROR:
                code, reason = _wire.decode_error(data)
                raise FrameBusError(code, _printable(reason))
            if _wire.header(data) != _wire.WELCOME:
                raise FrameBusError("malformedMessage", "expected WELCOME")
            self.stream_id = _wire.decode_monitor_welcome(data)
        except BaseException:
            self._socket.close()
            raise

    def _receive(self) -> bytes:
        try:
            data, _anc, flags, _ = self._socket.recvmsg(_wire.MAXIMUM_MESSAGE_SIZE + 1, 0)
        except socket.timeout:
            raise FrameBusError("timedOut", "no message from the publisher") from None
        except ConnectionResetError:
            data, flags = b"", 0
        if not data:
            raise FrameBusError("closed", "the publisher closed the connection")
        if flags & (socket.MSG_TRUNC | socket.MSG_CTRUNC):
            raise FrameBusError("malformedMessage", "a datagram was cut")
        return data

    def next_report(self) -> _wire.MonitorReport:
        data = self._receive()
        kind = _wire.header(data)
        if kind == _wire.MONITOR_REPORT:
            return _wire.decode_monitor_report(data)
        if kind == _wire.END_OF_STREAM:
            raise FrameBusError("closed", "the publisher stopped")
        if kind == _wire.ERROR:
            code, reason = _wire.decode_error(data)
            raise FrameBusError(code, _printable(reason))
        raise FrameBusError("malformedMessage", f"unexpected message type 0x{kind:04x} on a monitor connection")

    def close(self) -> None:
        try:
            self._socket.send(_wire.encode_goodbye(), socket.MSG_DONTWAIT)
        except OSError:
            pass
        self._socket.close()

    def __enter__(self) -> "Monitor":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
