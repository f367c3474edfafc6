"""scripts/install into a scratch prefix (from the build folder the tests use), then what an installed FrameBus
promises: pkg-config finds it, a C program compiles and runs against it, Python finds the library without
FRAMEBUS_LIBRARY and publishes with it, and a failed Publisher leaves no traceback behind."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT


def built_library_folder() -> Path:
    for config in ("debug", "release"):
        folder = ROOT / ".build" / config
        if (folder / "libFrameBusC.so").exists():
            return folder
    pytest.skip("no libFrameBusC.so: run `swift build` first") if not os.environ.get("FRAMEBUS_REQUIRE_ALL") else \
        pytest.fail("no libFrameBusC.so under .build")


@pytest.fixture(scope="module")
def prefix(tmp_path_factory):
    prefix = tmp_path_factory.mktemp("prefix")
    result = subprocess.run([str(ROOT / "scripts" / "install"), "--prefix", str(prefix), "--no-build", "--build-dir",
                             str(built_library_folder())], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    return prefix


def installed_environment(prefix: Path) -> dict:
    environment = {key: value for key, value in os.environ.items() if key != "FRAMEBUS_LIBRARY"}
    environment["PKG_CONFIG_PATH"] = str(prefix / "lib" / "pkgconfig")
    return environment


def test_the_install_lays_out_header_library_links_plugin_cli_and_runtime_list(prefix):
    lib = prefix / "lib"
    assert (prefix / "include" / "framebus.h").read_bytes() == (ROOT / "include" / "framebus.h").read_bytes()
    assert os.readlink(lib / "libframebus.so") == "libframebus.so.0"
    assert os.readlink(lib / "libframebus.so.0").startswith("libframebus.so.0.")
    assert (lib / "gstreamer-1.0" / "libgstframebus.so").exists() or not shutil.which("gst-inspect-1.0")
    assert os.access(prefix / "bin" / "framebus", os.X_OK)
    sections = subprocess.run(["readelf", "-S", str(lib / "libframebus.so.0")], capture_output=True, text=True)
    assert ".debug_info" not in sections.stdout and ".symtab" not in sections.stdout, "the library is not stripped"
    runtime = [line.split() for line in (prefix / "share" / "framebus" / "swift-runtime.txt").read_text().splitlines()
               if not line.startswith("#")]
    names = {Path(path).name for _, path in runtime}
    assert {"libswiftCore.so", "libFoundation.so", "libdispatch.so"} <= names, names
    assert all(int(size) > 0 and Path(path).exists() for size, path in runtime)


def test_pkg_config_finds_it_and_a_c_program_builds_and_runs_against_it(prefix, tmp_path):
    environment = installed_environment(prefix)
    flags = subprocess.run(["pkg-config", "--cflags", "--libs", "framebus"], env=environment, capture_output=True,
                           text=True, check=True).stdout.split()
    assert f"-I{prefix}/include" in flags and f"-L{prefix}/lib" in flags and "-lframebus" in flags
    source = tmp_path / "version.c"
    source.write_text('#include <framebus.h>\n#include <stdio.h>\n'
                      'int main(void) { printf("abi %u\\n", fb_abi_version()); return fb_abi_version() != FB_ABI_VERSION; }\n')
    program = tmp_path / "version"
    subprocess.run(["cc", "-std=c11", str(source), "-o", str(program), *flags, f"-Wl,-rpath,{prefix}/lib"], check=True)
    result = subprocess.run([str(program)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0 and result.stdout == "abi 2\n", result.stdout + result.stderr


INSTALLED_PYTHON = """
import sys
import numpy as np
import framebus
from framebus import _native
print("library", _native.library()._name)
with framebus.Publisher(sys.argv[1], "420v", 64, 48) as publisher:
    print("published", publisher.publish(np.zeros((48, 64), "u1"), np.zeros((24, 32, 2), "u1")))
"""


def test_python_finds_the_installed_library_without_framebus_library_and_publishes(prefix, tmp_path):
    # The package as pip installs it: a copy outside the source checkout, so the build folders are not tried.
    site = tmp_path / "site"
    shutil.copytree(ROOT / "python" / "framebus", site / "framebus")
    environment = installed_environment(prefix)
    environment["PYTHONPATH"] = str(site)
    result = subprocess.run([sys.executable, "-c", INSTALLED_PYTHON, str(tmp_path / "bus.sock")], cwd=tmp_path,
                            env=environment, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"library {prefix}/lib/libframebus.so.0" in result.stdout, result.stdout
    assert "published 0" in result.stdout


def test_a_failed_publisher_prints_no_traceback_from_its_destructor(tmp_path):
    script = ("import framebus\ntry:\n    framebus.Publisher(%r)\nexcept framebus.FrameBusError as error:\n"
              "    print('refused', error.code)\n") % str(tmp_path / "missing" / "bus.sock")
    result = subprocess.run([sys.executable, "-c", script], env={**os.environ, "PYTHONPATH": str(ROOT / "python")},
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0 and result.stdout.startswith("refused"), result.stdout + result.stderr
    assert "Exception ignored" not in result.stderr and "Traceback" not in result.stderr, result.stderr


def test_pip_install_in_a_virtual_environment_ships_the_c_library_inside_the_package(tmp_path):
    """README's install: `pip install ./python` in a virtual environment (here one that sees this interpreter's NumPy,
    --no-deps; pip fetches setuptools to build). The package carries the C library (framebus/_lib), so
    the native subscriber, the publisher and the decoder work with nothing set, away from the checkout."""
    library = built_library_folder() / "libFrameBusC.so"
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True, timeout=300)
    python = venv / "bin" / "python"
    environment = {key: value for key, value in os.environ.items() if key not in ("FRAMEBUS_LIBRARY", "PYTHONPATH")}
    build = subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--no-deps",
                            str(ROOT / "python")], env={**environment, "FRAMEBUS_LIBRARY": str(library)},
                           capture_output=True, text=True, timeout=600)
    assert build.returncode == 0, build.stdout + build.stderr
    script = INSTALLED_PYTHON + "print('engine', framebus.Subscriber.__new__.__module__ and "\
        "framebus.subscriber._choose_engine(None, None))\nprint('file', framebus.__file__)\n"
    result = subprocess.run([str(python), "-c", script, str(tmp_path / "bus.sock")], cwd=tmp_path, env=environment,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "/site-packages/framebus/__init__.py" in result.stdout, result.stdout
    assert "/site-packages/framebus/_lib/libframebus.so.0" in result.stdout, result.stdout
    assert "published 0" in result.stdout and "engine native" in result.stdout, result.stdout
