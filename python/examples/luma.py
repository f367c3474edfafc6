"""Mean luma and a 16-bin histogram of every frame a publisher sends: `python3 luma.py [SOCKET [FRAMES]]`
(the socket defaults to the publisher's default path)."""
import sys

import numpy as np

import framebus


def describe(frame: framebus.Frame) -> str:
    luma = frame.planes[0]                                  # (H, W) uint8 view of shared memory, no copy
    histogram = np.bincount(luma.ravel() >> 4, minlength=16)
    return f"frame {frame.sequence}: mean luma {luma.mean():.1f}, histogram {histogram.tolist()}"


path = sys.argv[1] if len(sys.argv) > 1 else framebus.default_socket_path()
with framebus.Subscriber(path, accept=["420v", "420f"]) as bus:
    for count, event in zip(range(int(sys.argv[2]) if len(sys.argv) > 2 else 10**9), bus):
        if isinstance(event, framebus.Frame):
            with event as frame:                            # back to the publisher at the end of the block:
                print(describe(frame))                      # no array of it outlives describe()
        else:
            print(event)                                    # Dropped(reason, first, last) or EndOfStream
