"""Shared parts of the end-to-end benchmarks: CPU hogs in another session, the three arms
(no procsift, `procsift run` started cold, the hand-set oracle), restore checks, and the
JSON output. Used by e2e_web.py and e2e_interactive.py; not a benchmark itself.

Everything it starts it ends by PID; the oracle's cgroup is removed after each arm.
"""

from __future__ import annotations

import json
import mmap
import os
import signal
import statistics
import struct
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
from _results import RESULTS, host_facts, write_json  # noqa: E402,F401  (re-exported for the e2e scripts)
PROCSIFT = HERE.parent / ".venv" / "bin" / "procsift"
CPU_V1 = Path("/sys/fs/cgroup/cpu")

# A CPU hog that counts its work: chunks of 1,000 LCG steps, the count kept in a shared
# file mapping so the benchmark reads it live (per measurement window, not per process life).
HOG_C = r"""
#include <fcntl.h>
#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>
int main(int argc, char **argv) {
    int fd = open(argv[1], O_RDWR | O_CREAT, 0644);
    if (fd < 0 || ftruncate(fd, 4096)) return 1;
    volatile uint64_t *c = mmap(0, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (c == MAP_FAILED) return 1;
    uint64_t x = 1;
    for (;;) {
        for (int i = 0; i < 1000; i++) x = x * 6364136223846793005ULL + 1442695040888963407ULL;
        c[1] = x;
        c[0]++;
    }
}
"""


def compile_c(src: str, name: str, tmp: Path) -> Path:
    """gcc -O2 a one-file C program into tmp."""
    c, exe = tmp / f"{name}.c", tmp / name
    c.write_text(src)
    subprocess.run(["gcc", "-O2", "-o", str(exe), str(c)], check=True)
    return exe


def loadavg() -> list[float]:
    return [float(x) for x in Path("/proc/loadavg").read_text().split()[:3]]


def psi_cpu() -> float:
    """CPU pressure, "some avg10" (%)."""
    first = Path("/proc/pressure/cpu").read_text().splitlines()[0]
    return float(first.split()[1].split("=")[1])


def cpu_ticks(pid: int) -> float:
    """utime + stime of a process (all its threads), in seconds."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat[stat.rindex(")") + 2:].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def children_of(pid: int) -> list[int]:
    """Direct children of pid (all its threads' children)."""
    out: list[int] = []
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            out += [int(x) for x in Path(f"/proc/{pid}/task/{tid}/children").read_text().split()]
        except FileNotFoundError:
            pass
    return out


def stop_proc(proc: subprocess.Popen[Any], sig: int = signal.SIGTERM, timeout: float = 20) -> int | None:
    """Signal one process we started (by PID) and reap it; SIGKILL if it lingers."""
    if proc.poll() is None:
        proc.send_signal(sig)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    return proc.returncode


class Hogs:
    """`n` CPU hogs, each in its own new session (so its own autogroup), counting work."""

    def __init__(self, exe: Path, tmp: Path, n: int = 2) -> None:
        self.procs: list[subprocess.Popen[bytes]] = []
        self.maps: list[mmap.mmap] = []
        for i in range(n):
            path = tmp / f"hog{i}.count"
            self.procs.append(subprocess.Popen([str(exe), str(path)], start_new_session=True))
        deadline = time.monotonic() + 10
        for i in range(n):
            path = tmp / f"hog{i}.count"
            while not (path.exists() and path.stat().st_size >= 4096):
                if time.monotonic() > deadline:
                    raise RuntimeError("hog did not start")
                time.sleep(0.01)
            with open(path, "r+b") as fh:
                self.maps.append(mmap.mmap(fh.fileno(), 4096))

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self.procs]

    def counts(self) -> list[int]:
        return [struct.unpack_from("Q", m, 0)[0] for m in self.maps]

    def stop(self) -> None:
        for p in self.procs:
            stop_proc(p, signal.SIGKILL)
        for m in self.maps:
            m.close()


class Meter:
    """Hog work rate (chunks/s, both hogs) and the daemon's CPU over one measurement."""

    def __init__(self, hogs: Hogs, daemon_pid: int | None) -> None:
        self.hogs, self.daemon_pid = hogs, daemon_pid

    def __enter__(self) -> Meter:
        self.t0 = time.monotonic()
        self.c0 = sum(self.hogs.counts())
        self.d0 = cpu_ticks(self.daemon_pid) if self.daemon_pid else 0.0
        return self

    def __exit__(self, *exc: object) -> None:
        dt = time.monotonic() - self.t0
        self.hog_rate = (sum(self.hogs.counts()) - self.c0) / dt
        self.daemon_cpu_pct = (100 * (cpu_ticks(self.daemon_pid) - self.d0) / dt
                               if self.daemon_pid else None)
        self.seconds = dt


# -- the three arms ------------------------------------------------------------------------

class Arm:
    """No procsift: the kernel's defaults (autogroup on)."""

    name = "none"
    daemon_pid: int | None = None

    def setup(self) -> None:
        pass

    def teardown(self) -> dict[str, Any]:
        return {}


class OracleArm(Arm):
    """The best placement by hand: the hogs in a cpu.idle cgroup of their own (cgroup v1 cpu),
    which takes them out of their autogroup and under every other task. Removed afterwards."""

    name = "oracle"

    def __init__(self, hog_pids: list[int], mode: str = "idle") -> None:
        self.hog_pids, self.mode = hog_pids, mode
        self.dir = CPU_V1 / f"e2e-oracle-{os.getpid()}"

    def setup(self) -> None:
        self.dir.mkdir()
        if self.mode == "idle":
            (self.dir / "cpu.idle").write_text("1")
        else:
            (self.dir / "cpu.shares").write_text("2")
        for pid in self.hog_pids:
            (self.dir / "cgroup.procs").write_text(str(pid))

    def teardown(self) -> dict[str, Any]:
        for pid in self.hog_pids:
            try:
                (CPU_V1 / "cgroup.procs").write_text(str(pid))
            except ProcessLookupError:
                pass
        self.dir.rmdir()
        return {"oracle": f"hogs in {self.dir.name} ({'cpu.idle=1' if self.mode == 'idle' else 'cpu.shares=2'})"}


class ProcsiftArm(Arm):
    """`procsift run` started cold after the workload, given `warmup` s after its first
    window, stopped by SIGTERM.

    It manages only the workload's processes (`-p`): the machine is shared with other
    engineers, whose processes are not ours to renice. The load generators (wrk) are not
    under -p: they stand in for the remote browsers of the POS experiment."""

    name = "procsift"

    def __init__(self, tmp: Path, model: str | None, manage: Callable[[], list[int]],
                 watch: Callable[[], dict[str, list[int]]], warmup: float, window: float = 1.0,
                 extra: list[str] | None = None, load: Callable[[float], None] | None = None,
                 name: str | None = None) -> None:
        self.name = name or self.name
        self.tmp, self.model, self.manage, self.watch = tmp, model, manage, watch
        self.load = load or time.sleep  # what runs during the warm-up (e.g. the paced traffic)
        self.warmup, self.window, self.extra = warmup, window, extra or []
        self.proc: subprocess.Popen[bytes] | None = None
        self.runs = 0
        self.snapshots: list[dict[str, Any]] = []

    def setup(self) -> None:
        self.runs += 1
        self.state_dir = self.tmp / f"{self.name}-{self.runs}"
        self.state_dir.mkdir()
        argv = [str(PROCSIFT), "run", "--window", str(self.window), "--no-table", "-v",
                "--journal", str(self.state_dir / "journal.json")]
        if self.model:
            argv += ["--model", self.model]
        argv += self.extra + ["-p", *map(str, self.manage())]
        self.before = placement([p for pids in self.watch().values() for p in pids])
        env = dict(os.environ, PROCSIFT_STATE_DIR=str(self.state_dir))
        self.log = open(self.state_dir / "daemon.log", "wb")
        self.argv = argv
        self.proc = subprocess.Popen(argv, env=env, stdout=self.log, stderr=subprocess.STDOUT)
        self.daemon_pid = self.proc.pid
        self.t_start = time.monotonic()
        # Start-up (loading the model, compiling the BPF program: ~7 s here, more on a busy
        # machine) ends when the daemon publishes its first window; the warm-up counts from there.
        state = self.state_dir / "daemon-state.json"
        while not state.exists():
            if self.proc.poll() is not None or time.monotonic() - self.t_start > 90:
                raise RuntimeError(f"procsift run did not start; see {self.state_dir}/daemon.log")
            time.sleep(0.1)
        self.startup_s = time.monotonic() - self.t_start
        self.load(self.warmup)
        if self.proc.poll() is not None:
            raise RuntimeError(f"procsift run exited ({self.proc.returncode}); see {self.state_dir}/daemon.log")
        self.snapshot("after warm-up")

    def snapshot(self, when: str) -> dict[str, Any]:
        """What the daemon says about the watched processes now (its state file)."""
        try:
            state = json.loads((self.state_dir / "daemon-state.json").read_text())
        except (OSError, ValueError):
            state = {"processes": {}}
        procs = state.get("processes", {})
        out: dict[str, Any] = {"when": when, "windows": state.get("windows")}
        for role, pids in self.watch().items():
            out[role] = []
            for pid in pids:
                e = procs.get(str(pid))
                out[role].append({"pid": pid, "label": None, "rule": "not in state"} if e is None else
                                 {"pid": pid, "comm": e["comm"], "label": e["label"],
                                  "probability": e["probability"], "last_window": e["last_window_label"],
                                  "rule": e["rule"], "action": e["action"],
                                  "last_window_summary": (e.get("windows") or [None])[-1]})
        self.snapshots.append(out)
        return out

    def teardown(self) -> dict[str, Any]:
        assert self.proc is not None
        snap = self.snapshot("end of arm")
        total_cpu = cpu_ticks(self.proc.pid)
        wall = time.monotonic() - self.t_start
        rc = stop_proc(self.proc, signal.SIGTERM, timeout=30)
        self.log.close()
        self.proc = None
        self.daemon_pid = None
        restored = check_restored(self.before)
        tail = (self.state_dir / "daemon.log").read_text(errors="replace").splitlines()
        stopped = [ln for ln in tail if "stopped; restored" in ln]
        return {"daemon_exit": rc, "daemon_startup_s": self.startup_s, "daemon_cpu_total_s": total_cpu, "daemon_wall_s": wall,
                "labels_end": snap, "restored": restored, "daemon_said": stopped[-1] if stopped else None,
                "daemon_log_lines": len(tail)}


def placement(pids: list[int]) -> dict[int, dict[str, Any]]:
    """Nice, scheduling policy, autogroup nice and cpu cgroup of each live process."""
    out: dict[int, dict[str, Any]] = {}
    for pid in pids:
        try:
            ag = Path(f"/proc/{pid}/autogroup").read_text().split()
            cg = next((ln.split(":", 2)[2] for ln in Path(f"/proc/{pid}/cgroup").read_text().splitlines()
                       if ln.split(":")[1] == "cpu"), "?")
            out[pid] = {"nice": os.getpriority(os.PRIO_PROCESS, pid), "policy": os.sched_getscheduler(pid),
                        "autogroup_nice": int(ag[-1]) if ag else 0, "cpu_cgroup": cg}
        except OSError:
            continue
    return out


def exempt_policy(tmp: Path, comms: list[str]) -> Path:
    """The bundled default policy plus exceptions for `comms` (the diagnostic arm: with the
    protected workload exempt, only the hogs' labels act, which isolates label errors)."""
    from importlib.resources import files  # noqa: PLC0415

    text = files("procsift.distributor").joinpath("default-policy.toml").read_text()
    extra = "".join(f'\n[[exceptions]]\ncomm = "{c}"\n' for c in comms)
    # exceptions must sit with the others, before the [html-first] table
    text = text.replace("\n[html-first]", extra + "\n[html-first]", 1)
    path = tmp / "policy-exempt.toml"
    path.write_text(text)
    return path


def policy_arms(specs: list[str]) -> list[tuple[str, str]]:
    """`--policy-arm NAME=FILE` options as (name, file), the file checked to exist."""
    out = []
    for spec in specs:
        name, sep, file = spec.partition("=")
        if not sep or not name or not Path(file).is_file():
            raise SystemExit(f"--policy-arm wants NAME=FILE with an existing FILE, not {spec!r}")
        out.append((name, file))
    return out


def check_restored(before: dict[int, dict[str, Any]]) -> dict[str, Any]:
    """Every process still alive back where it was before the arm."""
    now = placement(list(before))
    bad = [{"pid": pid, "before": before[pid], "after": now[pid]} for pid in now if now[pid] != before[pid]]
    return {"checked": len(now), "not_restored": bad}


def run_arms(arms: list[Arm], repeats: int, measure: Callable[[Arm], dict[str, Any]],
             log: Callable[[str], None]) -> dict[str, list[dict[str, Any]]]:
    """Each repeat runs every arm once, the order rotated; returns per arm the list of runs."""
    runs: dict[str, list[dict[str, Any]]] = {a.name: [] for a in arms}
    for r in range(repeats):
        order = arms[r % len(arms):] + arms[:r % len(arms)]
        for arm in order:
            t0 = time.monotonic()
            la = loadavg()
            arm.setup()
            try:
                res = measure(arm)
            finally:
                res_td = arm.teardown()
            res.update(teardown=res_td, repeat=r, loadavg_before=la, loadavg_after=loadavg(),
                       arm_seconds=time.monotonic() - t0)
            runs[arm.name].append(res)
            log(f"  repeat {r + 1}/{repeats} arm {arm.name:<8} done ({time.monotonic() - t0:.0f} s, "
                f"load {la[0]:.2f} -> {loadavg()[0]:.2f})")
    return runs


def median_of(runs: list[dict[str, Any]], *path: str) -> float | None:
    """Median over runs of a nested numeric field (None where missing)."""
    vals = []
    for r in runs:
        v: Any = r
        for k in path:
            v = v.get(k) if isinstance(v, dict) else None
        if isinstance(v, (int, float)):
            vals.append(float(v))
    return statistics.median(vals) if vals else None


def default_model() -> str | None:
    """The bundle to pass with --model: $PROCSIFT_E2E_MODEL, else the package default (None)."""
    return os.environ.get("PROCSIFT_E2E_MODEL") or None
