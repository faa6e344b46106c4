"""The CLI given what a new user (or a hostile one) gives it: one clear line and a non-zero exit, or
the right thing done; never a traceback, a hang or silent garbage."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from procsift.collector import TraceMeta, read_trace, windows_to_frame, write_trace

PROCSIFT = [sys.executable, "-m", "procsift.service.cli"]
DATA = Path(__file__).resolve().parents[1] / "datasets" / "data"
ENV = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}


def run(*args: str, timeout: float = 120, user: str | None = None) -> subprocess.CompletedProcess[str]:
    pre = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"] if user == "nobody" else []
    return subprocess.run([*pre, *PROCSIFT, *args], capture_output=True, text=True, timeout=timeout, env=ENV)


def one_line(res: subprocess.CompletedProcess[str], *needles: str) -> str:
    assert res.returncode != 0 and "Traceback" not in res.stderr, res.stderr
    lines = [ln for ln in res.stderr.strip().splitlines() if not ln.startswith("procsift: using the /proc")]
    assert len(lines) == 1 and lines[0].startswith("procsift: error: "), res.stderr
    for n in needles:
        assert n in lines[0], lines[0]
    return lines[0]


@pytest.mark.parametrize("args, needle", [
    (["top", "-d", "inf", "--once", "--proc"], "-d"),
    (["top", "-d", "1e-9", "--once", "--proc"], "-d"),
    (["top", "-d", "nan", "--once", "--proc"], "-d"),
    (["record", "-o", "/tmp/procsift-x.parquet", "-w", "inf", "--proc", "--duration", "1"], "-w"),
    (["record", "-o", "/tmp/procsift-x.parquet", "-p", "-5", "--proc", "--duration", "1"], "PID"),
    (["record", "-o", "/tmp/procsift-x.parquet", "-p", "4194305", "--proc", "--duration", "1"], "PID"),
    (["record", "-o", "/tmp/procsift-x.parquet", "-p", "99999", "--proc", "--duration", "1"], "no process 99999"),
    (["run", "-w", "inf", "--proc", "--dry-run", "-n", "1", "--no-api", "--journal", "/tmp/procsift-j/j.json"], "-w"),
    (["run", "-p", "-3", "--proc", "--dry-run", "-n", "1", "--no-api", "--journal", "/tmp/procsift-j/j.json"], "PID"),
    (["run", "--port", "70000", "--proc", "--dry-run", "-n", "1", "--journal", "/tmp/procsift-j/j.json"], "port"),
    (["serve", "--port", "0"], "port"),
    (["simulate", "deadline", "--slice", "nan", "--duration", "600"], "--slice"),
    (["simulate", "deadline", "--slice", "inf", "--duration", "600"], "--slice"),
    (["trace", "head", "-n", "-3", str(DATA / "int-bc.parquet")], "-n"),
])
def test_bad_arguments_are_one_line(args: list[str], needle: str) -> None:
    if "99999" in args and Path("/proc/99999").exists():
        pytest.skip("PID 99999 exists here")
    one_line(run(*args, timeout=300), needle)


def test_evaluate_with_one_label_per_application_says_it_cannot_score() -> None:
    """Issue 18: two files, one label each: every fold has one label to learn from, so none is scored."""
    res = run("evaluate", str(DATA / "bg-bc-pi.parquet"), str(DATA / "int-bash.parquet"))
    one_line(res, "no held-out application could be scored", "at least two labels")
    assert "over 0 applications" not in res.stdout


def test_predict_on_a_recording_where_nothing_was_active_says_so(tmp_path: Path) -> None:
    idle = tmp_path / "idle.parquet"
    write_trace(idle, windows_to_frame([]), TraceMeta(window_s=0.5, collector="bpf", duration_s=30.0))
    res = run("predict", str(idle))
    assert res.returncode == 0 and "Traceback" not in res.stderr, res.stderr
    assert "no process was active" in res.stdout and "30 s" in res.stdout and "hold no windows" not in res.stderr
    res = run("predict", str(idle), "--json")
    assert res.returncode == 0 and res.stdout.strip() == "[]"


def test_train_on_an_idle_recording_says_what_it_holds(tmp_path: Path) -> None:
    idle = tmp_path / "idle.parquet"
    write_trace(idle, windows_to_frame([]), TraceMeta(window_s=0.5, collector="bpf", duration_s=12.0))
    one_line(run("train", str(idle), "-o", str(tmp_path / "b")), "idle.parquet", "no process was active")


def test_record_duration_ends_the_recording_while_the_command_runs(tmp_path: Path) -> None:
    """Issue 18: with --duration and a command still running, the trace was written but procsift
    waited for the command. Now it stops the command (SIGTERM) and exits."""
    out = tmp_path / "t.parquet"
    # Had it waited for the command (600 s), the 300 s guard would end the test with a failure.
    res = run("record", "--proc", "-o", str(out), "--duration", "1", "--", "sleep", "600", timeout=300)
    assert res.returncode == 0, res.stderr
    duration = read_trace(out).meta.duration_s
    assert duration is not None and duration < 600
    assert "wrote" in res.stderr and "stopped at --duration (SIGTERM" in res.stderr


def test_one_sigint_ends_a_recording_whose_command_ignores_it(tmp_path: Path) -> None:
    out = tmp_path / "t.parquet"
    pidfile = tmp_path / "command.pid"
    p = subprocess.Popen([*PROCSIFT, "record", "--proc", "-o", str(out), "--", "bash", "-c",
                          f"echo $$ > {pidfile}; trap '' INT TERM; while :; do sleep 0.2; done"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=ENV)
    try:
        # Interrupt only once it is recording and the command runs (start-up takes a while on a busy machine).
        assert p.stderr is not None
        first = p.stderr.readline()
        deadline = time.monotonic() + 120
        while not (pidfile.exists() and pidfile.read_text().strip()) and time.monotonic() < deadline:
            time.sleep(0.05)
        p.send_signal(signal.SIGINT)  # to procsift alone: the command never hears it
        _, rest = p.communicate(timeout=300)
        err = first + rest
    finally:
        if p.poll() is None:
            p.kill()
        command = int(pidfile.read_text())
        alive = Path(f"/proc/{command}").exists() and "Z" not in Path(f"/proc/{command}/stat").read_text().split()[2]
        if alive:
            os.kill(command, signal.SIGKILL)
    assert "wrote" in err and out.exists(), err
    assert "Traceback" not in err and "command stopped on Ctrl-C (SIGKILL" in err
    assert not alive


@pytest.mark.parametrize("delay_ms", [0, 1, 3, 10, 30, 300])
def test_ctrl_c_at_any_moment_of_a_recording_writes_it_and_ends_the_command(tmp_path: Path, delay_ms: int) -> None:
    """Ctrl-C right as the command is being started (0 ms: procsift is still spawning it) or
    any time later: the file is written and the command does not outlive procsift. (A Ctrl-C
    before the recording loop began once left both undone: exit 130, nothing written, the
    command running on.)"""
    out = tmp_path / "t.parquet"
    marker = f"procsift-test-{os.getpid()}-{delay_ms}"
    p = subprocess.Popen([*PROCSIFT, "record", "--proc", "-o", str(out), "--", "bash", "-c",
                          "exec >/dev/null 2>&1; trap '' INT TERM; while :; do sleep 0.2; done", marker],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=ENV)
    try:
        assert p.stderr is not None
        first = ""
        while not first.endswith("Ctrl-C to stop\n"):  # after the collector's notices, if any
            line = p.stderr.readline()
            assert line, first
            first += line
        time.sleep(delay_ms / 1000)
        p.send_signal(signal.SIGINT)
        _, rest = p.communicate(timeout=120)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        left = _processes_with(marker)
        for pid in left:
            os.kill(pid, signal.SIGKILL)
    err = first + rest
    assert p.returncode == 0 and "Traceback" not in err, err
    assert "wrote" in err and out.exists(), err
    assert not left, f"the recorded command outlived procsift: {left}"


def _processes_with(marker: str) -> list[int]:
    """Live (not zombie) processes whose command line holds `marker`."""
    found = []
    for d in Path("/proc").iterdir():
        try:
            if d.name.isdigit() and marker.encode() in (d / "cmdline").read_bytes() \
                    and (d / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
                found.append(int(d.name))
        except OSError:
            continue
    return found


def test_record_refuses_an_output_it_cannot_write_before_recording(open_tmp: Path) -> None:
    ro = open_tmp / "ro"
    ro.mkdir()
    os.chmod(ro, 0o555)
    if os.geteuid() != 0 and os.access(ro, os.W_OK):
        pytest.skip("this user can write a mode-555 folder")
    res = run("record", "--proc", "-o", str(ro / "x.parquet"), "--duration", "3", user="nobody" if os.geteuid() == 0 else None)
    one_line(res, "cannot write")
    assert "recording" not in res.stderr  # refused before recording anything


@pytest.mark.parametrize("args", [
    ["evaluate", str(DATA / "bg-bc-pi.parquet"), str(DATA / "int-bash.parquet"), str(DATA / "bg-xz.parquet"),
     str(DATA / "int-bc.parquet"), "--report", "{ro}/report"],
    ["simulate", "deadline", "--duration", "600", "--png-dir", "{ro}/png"],
])
def test_an_unwritable_output_folder_is_one_line(open_tmp: Path, args: list[str]) -> None:
    ro = open_tmp / "ro"
    ro.mkdir()
    os.chmod(ro, 0o555)
    if os.geteuid() != 0 and os.access(ro, os.W_OK):
        pytest.skip("this user can write a mode-555 folder")
    res = run(*[a.format(ro=ro) for a in args], user="nobody" if os.geteuid() == 0 else None, timeout=300)
    one_line(res, str(ro), "ermission denied")


def test_a_process_named_with_escape_sequences_cannot_drive_the_terminal() -> None:
    """Any user can name a process "\\x1b]0;...\\x07\\x1b[2J"; `procsift top` shows it escaped."""
    code = ("import ctypes, time\nctypes.CDLL(None).prctl(15, b'\\x1b]0;pwn\\x07\\x1b[2J', 0, 0, 0)\n"
            "t = time.time()\nwhile time.time() - t < 20:\n    sum(range(20000)); time.sleep(0.005)\n")
    p = subprocess.Popen([sys.executable, "-c", code])
    try:
        time.sleep(0.5)
        res = run("top", "--once", "--proc", "-p", str(p.pid), timeout=300)
    finally:
        p.kill()
        p.wait()
    assert res.returncode == 0, res.stderr
    assert "\x1b" not in res.stdout and "\\x1b]0;pwn" in res.stdout


def test_log_lines_stay_one_line_whatever_a_value_holds() -> None:
    from procsift.distributor._log import kv
    line = kv("set", comm="x\nevent=restore pid=1", why="a\x1b[31mred")
    assert "\n" not in line and "\x1b" not in line and line.startswith("event=set comm=")
