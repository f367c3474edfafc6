"""Packaging hook: ships the FrameBus C library inside the package, so `pip install ./python` gives a package whose
native subscriber, publisher and decoder work without setting anything.

At build time (pip builds a local directory in place), the library is taken from, in this order:
1. $FRAMEBUS_LIBRARY (a built libFrameBusC.so or an installed libframebus.so.0);
2. the checkout this package sits in: its release build (.build/release/libFrameBusC.so), built first with
   `swift build -c release --product FrameBusC` when it is missing and `swift` is on the PATH (a few minutes the
   first time; FRAMEBUS_NO_BUILD=1 skips it);
and copied to framebus/_lib/libframebus.so.0. Without one the package installs without it: the subscriber then uses
its pure-Python engine, and Publisher and decode() say where the library was looked for. The library links the
Swift runtime dynamically through its RUNPATH (the toolchain's lib/swift/linux), so the package runs where that
toolchain is; on another machine, see scripts/install's notes on swift-runtime.txt.
"""

import os
import shutil
import subprocess
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


def find_library():
    explicit = os.environ.get("FRAMEBUS_LIBRARY")
    if explicit:
        return Path(explicit) if Path(explicit).is_file() else None
    if not (ROOT / "Package.swift").is_file():
        return None
    built = ROOT / ".build" / "release" / "libFrameBusC.so"
    if not built.is_file() and not os.environ.get("FRAMEBUS_NO_BUILD") and shutil.which("swift"):
        print("framebus: building the C library (swift build -c release --product FrameBusC)", flush=True)
        subprocess.run(["swift", "build", "-c", "release", "--product", "FrameBusC"], cwd=ROOT, check=False)
    return built if built.is_file() else None


class BuildWithLibrary(build_py):
    def run(self):
        super().run()
        library = find_library()
        target = Path(self.build_lib) / "framebus" / "_lib"
        if library is None:
            print("framebus: no C library found or built: the package installs without it", flush=True)
            return
        target.mkdir(parents=True, exist_ok=True)
        shutil.copy2(library, target / "libframebus.so.0")
        print(f"framebus: shipping {library} as framebus/_lib/libframebus.so.0", flush=True)


class PlatformDistribution(Distribution):
    def has_ext_modules(self):  # a platform wheel: it carries a shared library
        return True


setup(cmdclass={"build_py": BuildWithLibrary}, distclass=PlatformDistribution)
