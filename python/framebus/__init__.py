"""FrameBus for Python: receive video frames from a FrameBus publisher as zero-copy NumPy arrays.

    import framebus
    with framebus.Subscriber("/run/user/1000/framebus.sock", accept=["420v"]) as bus:
        for event in bus:
            if isinstance(event, framebus.Frame):
                with event as frame:
                    luma = frame.planes[0]          # (H, W) uint8, a read-only view of shared memory
                    print(frame.sequence, luma.mean())
            elif isinstance(event, framebus.Dropped):
                print("dropped", event.count, event.reason)
"""

from ._formats import FORMATS, PixelFormat, fourcc, fourcc_name, pixel_format
from .errors import FrameBusError
from .subscriber import (Dropped, EndOfStream, Frame, Subscriber, SystemPressure, default_socket_path,
                         runtime_directory)

__all__ = [
    "FORMATS", "PixelFormat", "fourcc", "fourcc_name", "pixel_format", "FrameBusError", "Dropped", "EndOfStream",
    "Frame", "Monitor", "Publisher", "Recorder", "RecorderStatus", "Subscriber", "SystemPressure",
    "default_socket_path", "runtime_directory",
]
__version__ = "0.3.0"


def __getattr__(name: str):
    # Imported when first used, so `import framebus` costs a subscriber only what it uses.
    if name == "Publisher":
        from .publisher import Publisher

        return Publisher
    if name in ("Recorder", "RecorderStatus"):
        from . import recorder

        return getattr(recorder, name)
    if name == "Monitor":
        from .monitor import Monitor

        return Monitor
    raise AttributeError(f"module 'framebus' has no attribute {name!r}")
