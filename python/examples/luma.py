"""Mean luma and a 16-bin histogram of every frame a publisher sends: `python3 luma.py SOCKET [FRAMES]`."""
import sys

import numpy as np

import framebus

with framebus.Subscriber(sys.argv[1], accept=["420v", "420f"]) as bus:
    for count, event in zip(range(int(sys.argv[2]) if len(sys.argv) > 2 else 10**9), bus):
        if isinstance(event, framebus.Frame):
            with event as frame:
                luma = frame.planes[0]                      # (H, W) uint8 view of shared memory, no copy
                histogram = np.bincount(luma.ravel() >> 4, minlength=16)
                print(f"frame {frame.sequence}: mean luma {luma.mean():.1f}, histogram {histogram.tolist()}")
        else:
            print(event)                                    # Dropped(reason, first, last) or EndOfStream
