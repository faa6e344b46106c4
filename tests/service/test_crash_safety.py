"""Crash safety, measured: `procsift run` is SIGKILLed at random moments in the middle of applying a
plan to 20 processes of 4 threads each, and the next start — or `procsift restore` — must put back
every value it had changed: nice, scheduling policy, EEVDF slice, I/O class, CPU affinity, cpu and
cpuset cgroup, autogroup nice. The figures go to test-artifacts/crash-safety.json."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.distributor import readback as rb

pytestmark = pytest.mark.kernel

PROCSIFT = [sys.executable, "-m", "procsift.service.cli"]
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
MOMENTS = 10
PROCESSES = 20
# Four threads that wake ten times a second for a millisecond: the bundled model calls them
# interactive, so the daemon acts on them from its third window (no demand gate holds them).
CHILD = """
import threading, time
def loop():
    while True:
        t = time.perf_counter()
        while time.perf_counter() - t < 0.001:
            pass
        time.sleep(0.1)
for _ in range(3):
    threading.Thread(target=loop, daemon=True).start()
loop()
"""
TWO_CPUS = len(os.sched_getaffinity(0)) >= 2
POLICY = f"""
[policy]
kind = "html-first"
[profiles.p]
nice = 7
io_class = "idle"
sched_policy = "batch"
slice_us = 3000
cpu_weight = 50
{'cpus = "0"' if TWO_CPUS else ''}
[labels]
interactive = "p"
html-serving = "p"
background = "p"
[html-first]
cpu_on = 100.0
cpu_off = 99.0
io_on = 100.0
io_off = 99.0
cpu_boost = "p"
io_boost = "p"
"""
# (backend the killed run used, how its changes are put back), in turn
CASES = [("cgroup", "restore"), ("autogroup", "restore"), ("cgroup", "next start"), ("autogroup", "next start")]


def state(pid: int) -> dict[str, Any]:
    """Every value procsift may change, read from the kernel: per thread and per process."""
    out: dict[str, Any] = {f"{tid}:{f}": v for tid, vals in rb.snapshot(pid).items()
                           for f, v in zip(("nice", "policy", "affinity", "ioprio", "slice"), vals)}
    out["autogroup"] = rb.autogroup(pid)
    out["cpu cgroup"] = rb.cpu_cgroup(pid, "cpu")
    out["cpuset"] = rb.cpu_cgroup(pid, "cpuset")
    return out


def kill_while_applying(cmd: list[str], log: Path, after: int, env: dict[str, str]) -> int:
    """Start the daemon; SIGKILL it once it has logged `after` writes (set/move) of a plan.
    Returns how many it had logged when killed."""
    with open(log, "w") as fh:
        d = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=fh, env=env)
    seen, buf = 0, ""
    deadline = time.monotonic() + 90
    with open(log) as tail:
        while seen < after:
            chunk = tail.read()
            if chunk:
                buf += chunk
                lines = buf.split("\n")
                buf = lines.pop()
                seen += sum(1 for ln in lines if " event=set " in ln or " event=move " in ln)
            elif d.poll() is not None or time.monotonic() > deadline:
                d.kill()
                d.wait()
                raise AssertionError(f"the daemon never applied {after} writes: {log.read_text()[-2000:]}")
            else:
                time.sleep(0.0005)
    d.send_signal(signal.SIGKILL)
    d.wait()
    return seen


def test_sigkill_while_applying_then_everything_is_put_back(tmp_path: Path) -> None:
    (tmp_path / "policy.toml").write_text(POLICY)
    seed = int.from_bytes(os.urandom(4), "little")
    rng = random.Random(seed)
    kids = [subprocess.Popen([sys.executable, "-c", CHILD], start_new_session=True) for _ in range(PROCESSES)]
    sleeper = subprocess.Popen(["sleep", "600"])
    env = {**os.environ, "PROCSIFT_STATE_DIR": str(tmp_path)}
    figures: list[dict[str, Any]] = []
    t0 = time.monotonic()
    try:
        time.sleep(0.5)
        pids = [k.pid for k in kids]
        original = {p: state(p) for p in pids}
        threads = sum(len(rb.snapshot(p)) for p in pids)
        assert threads == 4 * PROCESSES
        # A whole plan is ~5 writes per thread plus the process moves: kill somewhere inside it.
        writes = 5 * threads
        for i in range(MOMENTS):
            backend, how = CASES[i % len(CASES)]
            journal = tmp_path / f"j{i}.json"
            after = rng.randint(1, writes - 1)
            logged = kill_while_applying(
                [*PROCSIFT, "run", "--policy", str(tmp_path / "policy.toml"), "--journal", str(journal),
                 "--backend", backend, "--no-table", "--no-api", "-w", "0.5", "-v", "-p", *map(str, pids)],
                tmp_path / f"run{i}.log", after, env)
            killed = {p: state(p) for p in pids}
            changed = {(p, k) for p in pids for k, v in killed[p].items() if v != original[p][k]}
            if how == "restore":
                res = subprocess.run([*PROCSIFT, "restore", "--journal", str(journal)], capture_output=True,
                                     text=True, timeout=300, env=env)
            else:
                res = subprocess.run([*PROCSIFT, "run", "--proc", "--policy", str(tmp_path / "policy.toml"),
                                      "--journal", str(journal), "--no-table", "--no-api", "-w", "0.5", "-n", "1",
                                      "-p", str(sleeper.pid)], capture_output=True, text=True, timeout=300, env=env)
            assert res.returncode == 0, res.stderr
            after_restore = {p: state(p) for p in pids}
            wrong = {(p, k): (original[p][k], after_restore[p][k]) for p in pids for k in original[p]
                     if after_restore[p][k] != original[p][k]}
            figures.append({"moment": i + 1, "backend": backend, "put back by": how,
                            "writes logged when killed": logged, "values changed": len(changed),
                            "processes changed": len({p for p, _ in changed}),
                            "restored": len(changed - set(wrong)), "left wrong": len(wrong),
                            "fields": sorted({k.split(":")[-1] for _, k in changed})})
            assert not wrong, (f"seed {seed}, moment {i + 1} ({backend}, {how}): not put back {wrong}",
                               res.stderr)
    finally:
        for k in kids:
            k.kill()
        sleeper.kill()
        for p in [*kids, sleeper]:
            p.wait()
        ARTIFACTS.mkdir(exist_ok=True)
        total = sum(f["values changed"] for f in figures)
        summary = {"seed": seed, "seconds": round(time.monotonic() - t0, 1), "moments": figures,
                   "values changed": total, "restored": sum(f["restored"] for f in figures),
                   "restored %": 100.0 * sum(f["restored"] for f in figures) / total if total else None}
        (ARTIFACTS / "crash-safety.json").write_text(json.dumps(summary, indent=1))
        print(f"\ncrash safety: {json.dumps(summary)}")
    assert len(figures) == MOMENTS
    assert sum(f["values changed"] for f in figures) > 0  # the kills did land while values were changed
