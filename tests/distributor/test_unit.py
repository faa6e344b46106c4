"""The shipped systemd unit: exposure under 4.5 by systemd's own measure, a valid unit, and a
capability set that is exactly what procsift needs — proved by running the daemon with that
bounding set and nothing more against another user's process in its own session."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from . import readback as rb

UNIT = Path(__file__).resolve().parents[2] / "distributor" / "procsift.service"
PROCSIFT = [sys.executable, "-m", "procsift.service.cli"]
ANALYZE = shutil.which("systemd-analyze")
TWO_CPUS = len(os.sched_getaffinity(0)) >= 2
# Another user's program that reads a file, computes and sleeps: busy enough to be placed.
VICTIM = """
import os, time
while True:
    with open('/etc/hostname', 'rb') as f:
        f.read()
    t = time.time()
    while time.time() - t < 0.05:
        pass
    time.sleep(0.01)
"""
NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]


def unit_caps() -> list[str]:
    """The unit's CapabilityBoundingSet, as setpriv names them (bpf, sys_nice...)."""
    caps: list[str] = []
    for line in UNIT.read_text().splitlines():
        if line.startswith("CapabilityBoundingSet="):
            caps += [c.lower().removeprefix("cap_") for c in line.split("=", 1)[1].split()]
    return caps


def as_unit(cmd: list[str]) -> list[str]:
    """`cmd` with exactly the unit's capabilities: bounding set, no inheritable or ambient ones,
    no new privileges (NoNewPrivileges=yes)."""
    return ["setpriv", "--bounding-set=-all," + ",".join(f"+{c}" for c in unit_caps()), "--inh-caps=-all",
            "--ambient-caps=-all", "--no-new-privs", "--", *cmd]


@pytest.mark.skipif(ANALYZE is None, reason="systemd-analyze is not installed")
def test_exposure_is_at_most_4_5() -> None:
    res = subprocess.run([ANALYZE, "security", "--offline=yes", str(UNIT)], capture_output=True, text=True,
                         timeout=300)
    m = re.search(r"Overall exposure level for procsift.service: (\d+\.\d+)", res.stdout + res.stderr)
    assert m, res.stdout + res.stderr
    assert float(m.group(1)) <= 4.5, res.stdout


@pytest.mark.skipif(ANALYZE is None, reason="systemd-analyze is not installed")
def test_the_unit_verifies() -> None:
    res = subprocess.run([ANALYZE, "verify", str(UNIT)], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    assert "procsift.service" not in res.stderr, res.stderr  # no warning about this unit


def test_the_bounding_set_is_the_documented_one() -> None:
    assert sorted(unit_caps()) == sorted(["bpf", "perfmon", "sys_nice", "sys_ptrace", "dac_override"])


@pytest.mark.kernel
def test_the_daemon_does_its_work_with_exactly_the_units_capabilities(open_tmp: Path) -> None:
    """BPF loads, another user's process is read (/proc/PID/io, exe) and placed (nice, scheduling
    policy, I/O class, CPU affinity, its session's autogroup nice), and put back on SIGTERM.

    (The unit's LimitMEMLOCK=infinity is for kernels before 5.11; since then BPF memory is
    charged to the cgroup, and this runs with the caller's memlock limit.)"""
    policy = open_tmp / "policy.toml"
    policy.write_text(f"""
[policy]
kind = "html-first"
backend = "autogroup"
[profiles.p]
nice = 7
io_class = "idle"
sched_policy = "batch"
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
""")
    victim = subprocess.Popen([*NOBODY, sys.executable, "-c", VICTIM], start_new_session=True)
    trace = open_tmp / "victim.parquet"
    log = open_tmp / "daemon.log"
    d = None
    try:
        time.sleep(0.5)
        before = rb.snapshot(victim.pid), rb.autogroup(victim.pid)
        assert before[1] is not None and before[1][1] == 0
        rec = subprocess.run(as_unit([*PROCSIFT, "record", "-o", str(trace), "-w", "0.5", "--duration", "2",
                                      "-p", str(victim.pid)]),
                             capture_output=True, text=True, timeout=120)
        assert rec.returncode == 0 and "/proc collector" not in rec.stderr, rec.stderr
        from procsift.collector import read_trace
        rows = read_trace(trace).frame
        rows = rows[rows["pid"] == victim.pid]
        assert len(rows) and rows["syscalls"].sum() > 0  # counted by BPF
        assert rows["rchar"].sum() > 0 and rows["exe"].str.contains("python").all()  # its /proc/PID/io and exe

        with open(log, "w") as fh:
            d = subprocess.Popen(as_unit([*PROCSIFT, "run", "--policy", str(policy), "--journal",
                                          str(open_tmp / "j.json"), "--no-table", "--no-api", "-w", "0.5",
                                          "-p", str(victim.pid), "-v"]),
                                 stdout=subprocess.DEVNULL, stderr=fh,
                                 env={**os.environ, "PROCSIFT_STATE_DIR": str(open_tmp)})

        def placed() -> bool:
            snap = rb.snapshot(victim.pid)
            return (all(v[0] == 7 and v[1] == 3 and v[3][0] == 3 and (v[2] == "0" or not TWO_CPUS)
                        for v in snap.values())
                    and rb.autogroup(victim.pid) == (before[1][0], 7))
        deadline = time.monotonic() + 60
        while not placed():
            assert d.poll() is None, log.read_text()
            assert time.monotonic() < deadline, (rb.snapshot(victim.pid), rb.autogroup(victim.pid), log.read_text())
            time.sleep(0.1)
        status = Path(f"/proc/{d.pid}/status").read_text()
        eff = int(re.search(r"CapEff:\s*([0-9a-f]+)", status).group(1), 16)  # type: ignore[union-attr]
        bnd = int(re.search(r"CapBnd:\s*([0-9a-f]+)", status).group(1), 16)  # type: ignore[union-attr]
        want = {"dac_override": 1, "sys_ptrace": 19, "sys_nice": 23, "perfmon": 38, "bpf": 39}
        assert bnd == eff == sum(1 << want[c] for c in unit_caps())
        state = json.loads((open_tmp / "daemon-state.json").read_text())
        assert sum(w["syscalls"] for w in state["processes"][str(victim.pid)]["windows"]) > 0
        d.send_signal(signal.SIGTERM)
        d.wait(timeout=300)
        assert d.returncode == 0, log.read_text()
        assert "/proc collector" not in log.read_text()
        assert (rb.snapshot(victim.pid), rb.autogroup(victim.pid)) == before  # all put back
    finally:
        if d is not None and d.poll() is None:
            d.kill()
            d.wait()
        victim.kill()
        victim.wait()


@pytest.mark.kernel
@pytest.mark.parametrize("drop, lost", [("bpf", "syscall counts"), ("perfmon", "syscall counts"),
                                        ("sys_ptrace", "rchar"), ("dac_override", "rchar")])
def test_each_capability_is_needed(open_tmp: Path, drop: str, lost: str) -> None:
    """Without any one of them, a recording of another user's process loses what it gave."""
    victim = subprocess.Popen([*NOBODY, sys.executable, "-c", VICTIM], start_new_session=True)
    trace = open_tmp / "t.parquet"
    try:
        time.sleep(0.3)
        caps = ",".join(f"+{c}" for c in unit_caps() if c != drop)
        res = subprocess.run(["setpriv", f"--bounding-set=-all,{caps}", "--inh-caps=-all", "--ambient-caps=-all",
                              "--no-new-privs", "--", *PROCSIFT, "record", "-o", str(trace), "-w", "0.5",
                              "--duration", "1.5", "-p", str(victim.pid)],
                             capture_output=True, text=True, timeout=120)
    finally:
        victim.kill()
        victim.wait()
    assert res.returncode == 0, res.stderr
    from procsift.collector import read_trace
    rows = read_trace(trace).frame
    rows = rows[rows["pid"] == victim.pid]
    assert len(rows)
    if lost == "syscall counts":
        assert "/proc collector" in res.stderr and rows["syscalls"].sum() == 0
    else:
        assert rows["rchar"].sum() == 0
