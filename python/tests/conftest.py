import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python"))


def framebus_cli() -> str:
    """The `framebus` command line these tests publish with: $FRAMEBUS_CLI, or the package's own build."""
    candidates = [os.environ.get("FRAMEBUS_CLI")] + [
        str(ROOT / ".build" / config / "framebus") for config in ("debug", "release")
    ]
    for candidate in candidates:
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    raise RuntimeError("no framebus binary: run `swift build` first or set FRAMEBUS_CLI")


class PublisherProcess:
    def __init__(self, path: Path, *arguments: str):
        self.path = path
        self.process = subprocess.Popen(
            [framebus_cli(), "publish", "--path", str(path), "--quiet", *arguments],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 60
        while not path.exists():
            if self.process.poll() is not None:
                raise RuntimeError(f"framebus publish exited: {self.process.stdout.read().decode()}")
            if time.monotonic() > deadline:
                raise RuntimeError("framebus publish did not create its socket")
            time.sleep(0.05)

    def stop(self) -> str:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        return self.process.stdout.read().decode()


@pytest.fixture
def publish(tmp_path):
    started = []

    def start(*arguments: str) -> PublisherProcess:
        publisher = PublisherProcess(tmp_path / f"bus{len(started)}.sock", *arguments)
        started.append(publisher)
        return publisher

    yield start
    for publisher in started:
        publisher.stop()


@pytest.fixture
def kodak(tmp_path):
    """Three Kodak photographs in a folder of their own (the publisher loops over a folder)."""
    folder = tmp_path / "images"
    folder.mkdir()
    for name in ("kodim01.png", "kodim02.png", "kodim03.png"):
        shutil.copy(ROOT / "Corpus" / "kodak" / name, folder / name)
    return folder


@pytest.fixture(params=["native", "python"])
def each_engine(request, monkeypatch):
    """Runs a test once with each subscriber engine (the C library's poller, the pure-Python version-2 client),
    through $FRAMEBUS_ENGINE, which processes the test starts inherit too."""
    monkeypatch.setenv("FRAMEBUS_ENGINE", request.param)
    return request.param
