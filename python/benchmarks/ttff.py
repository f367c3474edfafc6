"""Time to first frame when attaching, and `import framebus`'s cost beyond NumPy's, as same-run ratios.

    python3 python/benchmarks/ttff.py [--rounds 10] [--framebus .build/release/framebus]

Starts `framebus publish --size 1920x1080 --fps 30`, then, alternating in each round: a C subscriber (the FrameBus
C library: the Swift subscriber behind the C interface, built here with gcc), a Python subscriber (`import
framebus`, subscribe, first frame), two import-only Pythons (`import numpy`; `import numpy, framebus`) and the
interpreter's own start and exit (`python -c pass`). A
subscriber's time to first frame runs from just before its process is spawned to the CLOCK_MONOTONIC stamp it
prints with the first frame in hand. Prints the medians and minimums of each. A loaded machine spreads every figure:
read the ratios of one run.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

PYTHON_SUBSCRIBER = """
import sys, time
import framebus
with framebus.Subscriber(sys.argv[1], accept=["420v"], wait=True) as bus:
    for event in bus:
        if isinstance(event, framebus.Frame):
            print(time.clock_gettime_ns(time.CLOCK_MONOTONIC), flush=True)
            event.release()
            break
"""


def spawn_to_first_frame(command: list[str], env=None) -> float:
    start = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
    result = subprocess.run(command, capture_output=True, text=True, timeout=60, env=env)
    if result.returncode != 0 or not result.stdout.strip():
        raise RuntimeError(f"{command[0]} failed: {result.stderr[-500:]}")
    return (int(result.stdout.split()[0]) - start) / 1e6


def import_time(statement: str, env=None) -> float:
    code = f"import time; t = time.perf_counter(); {statement}; print((time.perf_counter() - t) * 1e3)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env)
    return float(result.stdout)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--framebus", default=str(ROOT / ".build" / "release" / "framebus"))
    arguments = parser.parse_args()
    build = Path(arguments.framebus).resolve().parent
    library = build / "libFrameBusC.so"
    env = {**os.environ, "FRAMEBUS_LIBRARY": os.environ.get("FRAMEBUS_LIBRARY", str(library))}
    scratch = Path(tempfile.mkdtemp(prefix="framebus-ttff-"))
    program = scratch / "ttff"
    subprocess.run(["gcc", "-O2", "-o", str(program), str(ROOT / "python" / "benchmarks" / "ttff.c"),
                    f"-I{ROOT / 'include'}", f"-L{build}", "-lFrameBusC", f"-Wl,-rpath,{build}"], check=True)
    path = scratch / "ttff.sock"
    publisher = subprocess.Popen([arguments.framebus, "publish", "--path", str(path), "--quiet", "--size", "1920x1080",
                                  "--fps", "30"])
    try:
        deadline = time.monotonic() + 60
        while not path.exists():
            if time.monotonic() > deadline:
                raise RuntimeError("no publisher socket")
            time.sleep(0.05)
        time.sleep(0.5)
        figures: dict[str, list[float]] = {"C (Swift core) TTFF": [], "Python TTFF": [], "import numpy": [],
                                           "import numpy, framebus": [], "python -c pass": []}
        for _ in range(arguments.rounds):
            figures["C (Swift core) TTFF"].append(spawn_to_first_frame([str(program), str(path)], env))
            figures["Python TTFF"].append(spawn_to_first_frame([sys.executable, "-c", PYTHON_SUBSCRIBER, str(path)],
                                                               env))
            figures["import numpy"].append(import_time("import numpy", env))
            figures["import numpy, framebus"].append(import_time("import numpy, framebus", env))
            started = time.perf_counter()
            subprocess.run([sys.executable, "-c", "pass"], check=True, timeout=60, env=env)
            figures["python -c pass"].append((time.perf_counter() - started) * 1e3)
        for name, values in figures.items():
            print(f"{name:24} median {statistics.median(values):7.1f} ms  min {min(values):7.1f} ms")
        beyond = [b - a for a, b in zip(figures["import numpy"], figures["import numpy, framebus"])]
        gap = [p - c for c, p in zip(figures["C (Swift core) TTFF"], figures["Python TTFF"])]
        print(f"{'framebus beyond numpy':24} median {statistics.median(beyond):7.1f} ms (per-round differences)")
        print(f"{'Python TTFF - C TTFF':24} median {statistics.median(gap):7.1f} ms; "
              f"import numpy, framebus median {statistics.median(figures['import numpy, framebus']):.1f} ms")
    finally:
        publisher.terminate()
        publisher.wait(30)


if __name__ == "__main__":
    main()
