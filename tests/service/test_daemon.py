"""The daemon on real processes (root): it places every thread, later threads too, backs off
from a user's change, and restores everything on stop, after kill -9 and on `restore`."""

from __future__ import annotations

import ctypes
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from .policies import one_profile_policy

pytestmark = pytest.mark.kernel

PROCSIFT = [sys.executable, "-m", "procsift.service.cli"]
POLICY = one_profile_policy(7, io_class="idle")
# Two spinning threads now (a real CPU hog), a third after 3 s (after the daemon has placed it).
HOG = """
import threading, time
def spin():
    while True:
        sum(range(2000))
for _ in range(2):
    threading.Thread(target=spin, daemon=True).start()
time.sleep(3)
threading.Thread(target=spin, daemon=True).start()
time.sleep(600)
"""
_libc = ctypes.CDLL(None, use_errno=True)
IOPRIO_GET = 252  # x86_64


def ioprio_class(tid: int) -> int:
    value = _libc.syscall(IOPRIO_GET, 1, tid)  # IOPRIO_WHO_PROCESS
    assert value >= 0, ctypes.get_errno()
    return value >> 13


def nices(pid: int) -> dict[int, int]:
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        stat = Path(f"/proc/{pid}/task/{tid}/stat").read_text()
        out[int(tid)] = int(stat[stat.rindex(")") + 2:].split()[16])  # field 19: nice
    return out


def wait_for(cond, timeout: float = 120.0, what: str = "") -> None:  # returns as soon as cond() holds  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture()
def policy(tmp_path: Path) -> Path:
    path = tmp_path / "policy.toml"
    path.write_text(POLICY)
    return path


@pytest.fixture()
def hog():  # type: ignore[no-untyped-def]
    # Its own session, so its own autogroup: the autogroup nice the daemon sets is not also
    # the test runner's (nor shared with another suite's daemon on the same machine).
    proc = subprocess.Popen([sys.executable, "-c", HOG], start_new_session=True)
    yield proc
    proc.kill()
    proc.wait()


class Daemon(subprocess.Popen):  # type: ignore[type-arg]
    """A `procsift run` subprocess whose stderr goes to a file (a pipe could fill and block it)."""

    def __init__(self, tmp_path: Path, policy: Path, *args: str) -> None:
        env = {**os.environ, "PROCSIFT_STATE_DIR": str(tmp_path)}
        self.log = tmp_path / f"daemon-{time.monotonic_ns()}.log"
        with open(self.log, "w") as fh:
            super().__init__([*PROCSIFT, "run", "--policy", str(policy), "--journal", str(tmp_path / "j.json"),
                              "--no-table", "--no-api", "-w", "0.5", *args], env=env, text=True,
                             stdout=subprocess.DEVNULL, stderr=fh)

    def finish(self, timeout: float = 300) -> str:
        self.wait(timeout=timeout)
        return self.log.read_text()


_STARTED: list[Daemon] = []


@pytest.fixture(autouse=True)
def _no_daemon_outlives_its_test():  # type: ignore[no-untyped-def]
    """A test that fails half-way must not leave its daemon running (placing processes) for the
    rest of the suite."""
    yield
    while _STARTED:
        d = _STARTED.pop()
        if d.poll() is None:
            d.kill()
            d.wait()


def daemon(tmp_path: Path, policy: Path, *args: str) -> Daemon:
    d = Daemon(tmp_path, policy, *args)
    _STARTED.append(d)
    return d


def test_every_thread_placed_later_threads_too_and_restored_on_stop(tmp_path: Path, policy: Path, hog) -> None:  # type: ignore[no-untyped-def]
    d = daemon(tmp_path, policy, "-p", str(hog.pid))
    try:
        wait_for(lambda: len(nices(hog.pid)) == 4 and all(n == 7 for n in nices(hog.pid).values()),
                 what="all four threads (main, two spinners, the late one) at nice 7")
        assert all(ioprio_class(t) == 3 for t in nices(hog.pid))  # IOPRIO_CLASS_IDLE
        d.send_signal(signal.SIGTERM)
        err = d.finish()
        assert d.returncode == 0, err
    finally:
        if d.poll() is None:
            d.kill()
    assert set(nices(hog.pid).values()) == {0}
    assert all(ioprio_class(t) != 3 for t in nices(hog.pid))
    assert "restored" in err


def test_kill9_leaves_changes_that_restore_puts_back(tmp_path: Path, policy: Path, hog) -> None:  # type: ignore[no-untyped-def]
    d = daemon(tmp_path, policy, "-p", str(hog.pid))
    wait_for(lambda: all(n == 7 for n in nices(hog.pid).values()), what="nice 7")
    d.kill()
    d.wait()
    assert all(n == 7 for n in nices(hog.pid).values())
    res = subprocess.run([*PROCSIFT, "restore", "--journal", str(tmp_path / "j.json")],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    assert set(nices(hog.pid).values()) == {0}


def test_next_start_after_a_crash_restores_first(tmp_path: Path, policy: Path, hog) -> None:  # type: ignore[no-untyped-def]
    d = daemon(tmp_path, policy, "-p", str(hog.pid))
    wait_for(lambda: all(n == 7 for n in nices(hog.pid).values()), what="nice 7")
    d.kill()
    d.wait()
    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        d2 = daemon(tmp_path, policy, "-p", str(sleeper.pid), "-n", "1")
        err = d2.finish(timeout=300)
    finally:
        sleeper.kill()
        sleeper.wait()
    assert d2.returncode == 0, err
    assert "left changed by a previous run" in err
    assert set(nices(hog.pid).values()) == {0}


def test_a_users_renice_is_respected(tmp_path: Path, policy: Path, hog) -> None:  # type: ignore[no-untyped-def]
    d = daemon(tmp_path, policy, "-p", str(hog.pid), "-v")
    try:
        wait_for(lambda: all(n == 7 for n in nices(hog.pid).values()), what="nice 7")
        os.setpriority(os.PRIO_PROCESS, hog.pid, 3)  # the user renices the main thread
        time.sleep(2.5)  # several windows
        assert nices(hog.pid)[hog.pid] == 3
        d.send_signal(signal.SIGTERM)
        err = d.finish()
    finally:
        if d.poll() is None:
            d.kill()
    assert nices(hog.pid)[hog.pid] == 3  # not "restored" over the user's choice
    assert "back" in err.lower()  # the back-off is logged


def test_dry_run_changes_nothing_and_explain_answers(tmp_path: Path, policy: Path, hog) -> None:  # type: ignore[no-untyped-def]
    d = daemon(tmp_path, policy, "-p", str(hog.pid), "--dry-run")
    try:
        state = tmp_path / "daemon-state.json"
        wait_for(lambda: state.exists() and str(hog.pid) in json.loads(state.read_text())["processes"]
                 and json.loads(state.read_text())["processes"][str(hog.pid)]["label"] is not None,
                 what="the daemon to label the hog")
        env = {**os.environ, "PROCSIFT_STATE_DIR": str(tmp_path)}
        res = subprocess.run([*PROCSIFT, "explain", str(hog.pid), "--json"], capture_output=True,
                             text=True, timeout=300, env=env)
        assert res.returncode == 0, res.stderr
        entry = json.loads(res.stdout)
        assert entry["label"] in ("interactive", "background", "html-serving")
        assert entry["action"]["nice"] == 7 and entry["rule"] and entry["windows"]
        assert set(nices(hog.pid).values()) == {0}
    finally:
        d.send_signal(signal.SIGTERM)
        d.finish()
    assert d.returncode == 0


def test_never_touches_itself(tmp_path: Path, policy: Path) -> None:
    # The daemon follows its own process: bash execs it, so $$ is the daemon's PID.
    env = {**os.environ, "PROCSIFT_STATE_DIR": str(tmp_path)}
    cmd = " ".join([*PROCSIFT, "run", "--policy", str(policy), "--journal", str(tmp_path / "j.json"),
                    "--no-table", "--no-api", "-w", "0.5", "-n", "6", "-p", "$$"])
    d = subprocess.Popen(["bash", "-c", f"exec {cmd}"], env=env, text=True,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    seen_nice = set()
    while d.poll() is None:
        try:
            seen_nice.update(nices(d.pid).values())
        except FileNotFoundError:
            pass
        time.sleep(0.1)
    _, err = d.communicate()
    assert d.returncode == 0, err
    assert seen_nice == {0}, seen_nice


def test_pid1_and_kernel_threads_are_never_planned(tmp_path: Path, policy: Path) -> None:
    """Following everything from PID 1 down, in dry-run: PID 1 gets no action, kernel threads no entry."""
    before = os.getpriority(os.PRIO_PROCESS, 1)
    d = daemon(tmp_path, policy, "-p", "1", "--dry-run")
    state_path = tmp_path / "daemon-state.json"
    try:
        wait_for(lambda: state_path.exists() and json.loads(state_path.read_text())["windows"] >= 3,
                 what="three windows")
        procs = json.loads(state_path.read_text())["processes"]
    finally:
        d.send_signal(signal.SIGTERM)
        d.finish()
    assert procs, "the daemon saw no process at all"
    if "1" in procs:
        assert procs["1"]["action"] is None and "PID 1" in procs["1"]["rule"]
    kthreads = {p for p in procs if Path(f"/proc/{p}/stat").exists()
                and (int(Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()[6]) & 0x00200000)}
    assert not kthreads, kthreads
    assert os.getpriority(os.PRIO_PROCESS, 1) == before
