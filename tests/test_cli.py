"""The CLI's boundary: bad input gives one plain line on stderr and a non-zero exit, never a traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from procsift.collector import TraceMeta, Window, write_trace

PROCSIFT = [sys.executable, "-m", "procsift.service.cli"]


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*PROCSIFT, *args], capture_output=True, text=True, timeout=300)


@pytest.fixture()
def trace(tmp_path: Path) -> Path:
    path = tmp_path / "t.parquet"
    rows = [Window(host="h", t_start=float(i), dur_s=1.0, pid=7, start_time=3, comm="sh",
                   switches_in=9, syscalls={"read": i + 1}, label="interactive", source="bash")
            for i in range(3)]
    write_trace(path, rows, TraceMeta(window_s=1.0))
    return path


@pytest.mark.parametrize("args, message", [
    (["trace", "info", "/nonexistent.parquet"], "no such file"),
    (["trace", "head", "/etc/hostname.csv"], "no such file"),
    (["trace", "convert", "/etc/passwd", "-o", "/tmp/x.csv"], "unknown trace format"),
    (["record", "-o", "/tmp/x.parquet", "--label", "gaming", "--", "true"], "unknown label 'gaming'"),
    (["record", "-o", "/no/such/folder/x.parquet", "--", "true"], "does not exist"),
    (["record", "-o", "/tmp/x.txt", "--", "true"], "unknown trace format"),
    (["record", "-o", "/tmp/x.parquet", "--", "no-such-program-here"], "command not found"),
    (["top", "-d", "0"], "must be > 0"),
])
def test_bad_input_is_one_clear_line(args: list[str], message: str) -> None:
    res = _run(*args)
    assert res.returncode != 0
    assert "Traceback" not in res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], res.stderr


def test_corrupt_trace_file(tmp_path: Path, trace: Path) -> None:
    bad = tmp_path / "bad.parquet"
    bad.write_bytes(trace.read_bytes()[:100])
    res = _run("trace", "info", str(bad))
    assert res.returncode == 1 and "corrupt or truncated" in res.stderr and "Traceback" not in res.stderr


def test_trace_info_head_convert(tmp_path: Path, trace: Path) -> None:
    res = _run("trace", "info", str(trace))
    assert res.returncode == 0 and "rows            3" in res.stdout and "interactive 3" in res.stdout
    head = _run("trace", "head", "-n", "2", str(trace))
    assert head.returncode == 0 and len(head.stdout.strip().splitlines()) == 3
    out = tmp_path / "t.arff"
    assert _run("trace", "convert", str(trace), "-o", str(out)).returncode == 0
    assert out.read_text().startswith("% procsift ") and "@attribute label {interactive,background,html-serving}" in out.read_text()


def test_help_lists_the_verbs() -> None:
    res = _run("--help")
    for verb in ("top", "record", "trace"):
        assert verb in res.stdout
