"""The socket-path rule every FrameBus client shares: ``$XDG_RUNTIME_DIR/NAME.sock``, else a private directory
``${TMPDIR:-/tmp}/framebus-UID`` (mode 0700, made when missing, refused when unsafe). Python's implementation, then
the rule across processes: `framebus publish` and GStreamer's framebussink, started without a path and without
XDG_RUNTIME_DIR, are found by a Python subscriber without a path."""

import os
import stat
import subprocess
import time

import pytest

import framebus
from conftest import framebus_cli
from test_gstreamer import MISSING, gst_env, gst_start, gst_stop  # noqa: F401 (gst_env is a fixture)


def test_the_runtime_directory_wins(tmp_path):
    environment = {"XDG_RUNTIME_DIR": "/run/user/1000/", "TMPDIR": str(tmp_path)}
    assert framebus.runtime_directory(environment) == "/run/user/1000"
    assert not (tmp_path / f"framebus-{os.getuid()}").exists()


@pytest.mark.parametrize("xdg", [None, "", "relative/dir"])
def test_without_one_the_fallback_is_a_private_directory_made_with_mode_0700(tmp_path, xdg):
    environment = {"TMPDIR": str(tmp_path) + "/"} | ({} if xdg is None else {"XDG_RUNTIME_DIR": xdg})
    directory = framebus.runtime_directory(environment)
    assert directory == str(tmp_path / f"framebus-{os.getuid()}")
    status = os.lstat(directory)
    assert stat.S_ISDIR(status.st_mode) and stat.S_IMODE(status.st_mode) == 0o700 and status.st_uid == os.getuid()
    assert framebus.runtime_directory(environment) == directory  # the second client accepts what the first made


def test_without_tmpdir_the_fallback_is_in_slash_tmp():
    assert framebus.runtime_directory({}) == f"/tmp/framebus-{os.getuid()}"


@pytest.mark.parametrize("mode", [0o755, 0o750, 0o701, 0o1777, 0o500])
def test_a_fallback_directory_with_another_mode_is_refused(tmp_path, mode):
    directory = tmp_path / f"framebus-{os.getuid()}"
    directory.mkdir()
    directory.chmod(mode)
    try:
        with pytest.raises(framebus.FrameBusError) as refused:
            framebus.runtime_directory({"TMPDIR": str(tmp_path)})
        assert refused.value.code == "permissionDenied" and "mode" in refused.value.message
    finally:
        directory.chmod(0o700)


def test_a_fallback_directory_of_another_user_is_refused(tmp_path):
    # Made by us under the name of uid OTHER: seen by OTHER it belongs to someone else (no root needed to chown).
    other = os.getuid() + 1
    directory = tmp_path / f"framebus-{other}"
    directory.mkdir(mode=0o700)
    with pytest.raises(framebus.FrameBusError) as refused:
        framebus.runtime_directory({"TMPDIR": str(tmp_path)}, uid=other)
    assert refused.value.code == "permissionDenied" and f"belongs to uid {os.getuid()}" in refused.value.message


def test_a_symbolic_link_in_place_of_the_fallback_directory_is_refused(tmp_path):
    target = tmp_path / "elsewhere"
    target.mkdir(mode=0o700)
    (tmp_path / f"framebus-{os.getuid()}").symlink_to(target)
    with pytest.raises(framebus.FrameBusError) as refused:
        framebus.runtime_directory({"TMPDIR": str(tmp_path)})
    assert refused.value.code == "permissionDenied"


def test_default_socket_path_names_a_stream(tmp_path, monkeypatch):
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    base = tmp_path / f"framebus-{os.getuid()}"
    assert framebus.default_socket_path() == str(base / "framebus.sock")
    assert framebus.default_socket_path("camera") == str(base / "camera.sock")
    assert framebus.default_socket_path("camera.sock") == str(base / "camera.sock")
    for bad in ("", "a/b", ".hidden", "bell\x07", "x" * 65):
        with pytest.raises(framebus.FrameBusError):
            framebus.default_socket_path(bad)


def first_frame(timeout=60.0):
    """A frame from the default path's publisher, connecting as soon as it is there."""
    with framebus.Subscriber(accept=["420v"], timeout=timeout, wait=True) as bus:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            event = bus.next_event(timeout=1.0)
            if isinstance(event, framebus.Frame):
                event.release()
                return bus.path, event
    return None, None


@pytest.fixture
def no_runtime_directory(tmp_path, monkeypatch):
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    return tmp_path / f"framebus-{os.getuid()}" / "framebus.sock"


def test_the_cli_and_python_meet_at_the_fallback_path(no_runtime_directory):
    publisher = subprocess.Popen([framebus_cli(), "publish", "--size", "64x48", "--fps", "30", "--quiet"],
                                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        path, frame = first_frame()
        assert frame is not None and path == str(no_runtime_directory)
    finally:
        publisher.terminate()
        try:
            publisher.wait(20)
        except subprocess.TimeoutExpired:
            publisher.kill()
            publisher.wait()


@pytest.mark.skipif(bool(MISSING) and not os.environ.get("FRAMEBUS_REQUIRE_ALL"), reason=f"{MISSING}")
def test_gstreamer_and_python_meet_at_the_fallback_path(gst_env, no_runtime_directory):  # noqa: F811
    env = {key: value for key, value in gst_env.items() if key != "XDG_RUNTIME_DIR"}
    env["TMPDIR"] = os.environ["TMPDIR"]
    pipeline = gst_start(env, "videotestsrc is-live=true ! video/x-raw,format=NV12,width=64,height=48,"
                              "framerate=30/1 ! framebussink")
    try:
        path, frame = first_frame()
        assert frame is not None and path == str(no_runtime_directory)
    finally:
        gst_stop(pipeline, timeout=60)
