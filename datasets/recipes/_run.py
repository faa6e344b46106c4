"""Running a recipe: start programs we own, record them with `procsift record`, label windows by construction.

Every process here is started by the recipe, in its own session, and ended by its id
(its process group, which it leads); nothing else on the machine is touched.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from procsift.collector.traceio import read_trace, write_trace

__all__ = ["Recipe", "Owned", "start", "stop", "record_pids", "record_command", "relabel", "procsift_bin",
           "WINDOW_S", "wait_port", "contenders", "contended", "variants"]

WINDOW_S = 0.5
"""Recordings use 0.5 s windows so they re-aggregate to 1, 2, 5 and 10 s."""

Labeller = Callable[[pd.DataFrame], "pd.Series[bool]"]


@dataclass
class Recipe:
    """One recording: what runs, how long, which windows carry the label."""

    name: str
    label: str
    source: str
    run: Callable[["Recipe", Path, Path], Labeller]  # (recipe, workdir, out file) -> labeller
    duration_s: float = 75.0
    apt: tuple[str, ...] = ()
    notes: str = ""
    extra: dict[str, object] = field(default_factory=dict)


@dataclass
class Owned:
    """A process group this recipe started (and must end)."""

    proc: subprocess.Popen[bytes]
    what: str

    @property
    def pid(self) -> int:
        return self.proc.pid


def procsift_bin() -> list[str]:
    """How to run the procsift command of this interpreter's environment."""
    exe = Path(sys.executable).parent / "procsift"
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "procsift.service.cli"]


def start(argv: Sequence[str], what: str, log: Path | None = None, cwd: Path | None = None,
          env: dict[str, str] | None = None) -> Owned:
    """Start a program in a new session (so its group can be ended by id)."""
    out = open(log, "ab") if log else subprocess.DEVNULL  # noqa: SIM115 - handed to the child
    proc = subprocess.Popen(list(argv), stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                            cwd=cwd, env=env, start_new_session=True)
    return Owned(proc, what)


def stop(owned: Owned, grace_s: float = 5.0) -> None:
    """End a process group we started: SIGTERM, then SIGKILL after `grace_s`."""
    if owned.proc.poll() is not None:
        return
    try:
        os.killpg(owned.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    try:
        owned.proc.wait(grace_s)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(owned.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        owned.proc.wait(grace_s)


def wait_port(port: int, timeout_s: float = 10.0) -> None:
    """Wait until 127.0.0.1:port accepts connections."""
    import socket
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with socket.socket() as s:
            s.settimeout(0.2)
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise RuntimeError(f"nothing listens on 127.0.0.1:{port} after {timeout_s:g} s")


def record_pids(out: Path, pids: Sequence[int], recipe: Recipe, duration_s: float, log: Path) -> Owned:
    """Start `procsift record` on `pids` and their descendants for `duration_s`."""
    argv = procsift_bin() + ["record", "-o", str(out), "-w", str(WINDOW_S), "--label", recipe.label,
                             "--source", recipe.source, "--duration", f"{duration_s:g}"]
    for pid in pids:
        argv += ["-p", str(pid)]
    return start(argv, "procsift record", log)


def record_command(out: Path, command: Sequence[str], recipe: Recipe, log: Path, cwd: Path | None = None) -> int:
    """Run `command` under `procsift record` until it exits; returns record's exit status."""
    argv = procsift_bin() + ["record", "-o", str(out), "-w", str(WINDOW_S), "--label", recipe.label,
                             "--source", recipe.source, "--"] + list(command)
    rec = start(argv, "procsift record", log, cwd=cwd)
    try:
        return rec.proc.wait(recipe.duration_s + 60)
    finally:
        stop(rec)


# One CPU contender: phases of 2-8 s, each with a duty cycle (0-100 %) over 10-50 ms periods.
CONTENDER = """
import random, sys, time
rng = random.Random(int(sys.argv[1]))
end = time.monotonic() + float(sys.argv[2])
while (now := time.monotonic()) < end:
    until = min(end, now + rng.uniform(2, 8))
    duty, period = rng.choice((0.0, 0.3, 0.6, 0.8, 0.9, 1.0)), rng.uniform(0.01, 0.05)
    while (t := time.monotonic()) < until:
        while time.monotonic() - t < duty * period:
            pass
        if duty < 1:
            time.sleep((1 - duty) * period)
"""
CONTENDERS = 3
"""Contenders on this 2-CPU machine: together they want 0-3 CPUs, 1.8 on average."""


@contextlib.contextmanager
def contenders(seconds: float, n: int = CONTENDERS) -> Iterator[list[Owned]]:
    """A busy machine for `seconds` at most: `n` CPU contenders at normal priority, outside any
    recording, ended when the block ends."""
    owned = [start([sys.executable, "-c", CONTENDER, str(seed), f"{seconds:g}"], "contender") for seed in range(n)]
    try:
        yield owned
    finally:
        for c in owned:
            stop(c)


def contended(recipe: Recipe) -> Recipe:
    """`recipe` recorded again on a busy machine (contenders() beside it), same label and source."""
    def run(r: Recipe, work: Path, out: Path) -> Labeller:
        with contenders(r.duration_s + 30):
            return recipe.run(r, work, out)
    return dataclasses.replace(recipe, name=f"{recipe.name}-contended", run=run,
                               notes=f"{recipe.notes}; on a busy machine ({CONTENDERS} CPU contenders)")


def variants(recipes: Sequence[Recipe], names: Sequence[str], make: Callable[[Recipe], Recipe]) -> list[Recipe]:
    """`make(recipe)` for each of `names`, in that order (a KeyError names a recipe that is missing)."""
    by_name = {r.name: r for r in recipes}
    return [make(by_name[n]) for n in names]


MIN_WINDOWS = 2
"""A process seen in fewer windows than this stays unlabelled: it exits before any smoothed
label (k of n windows) could place it, and its one window is mostly exec/startup noise that
looks the same whichever job spawned it."""


def relabel(path: Path, keep: Labeller, label: str, source: str) -> dict[str, int]:
    """Keep `label` only on the windows `keep` selects of processes seen in MIN_WINDOWS windows or more."""
    trace = read_trace(path)
    frame = trace.frame.copy()
    seen = frame.groupby(["pid", "start_time"])["t_start"].transform("size").to_numpy()
    mask = keep(frame).to_numpy(dtype=bool) & (seen >= MIN_WINDOWS)
    frame["label"] = [label if m else None for m in mask]
    frame["source"] = source
    write_trace(path, frame, trace.meta)
    active = ~frame["insufficient"].to_numpy(dtype=bool)
    return {"windows": int(len(frame)), "labelled": int(mask.sum()), "labelled_active": int((mask & active).sum()),
            "processes": int(frame.groupby(["pid", "start_time"]).ngroups)}


def need(*programs: str) -> None:
    """Fail early, with the package to install, when a program is missing."""
    missing = [p for p in programs if shutil.which(p) is None]
    if missing:
        raise RuntimeError(f"missing programs: {', '.join(missing)} (run `make datasets`, which installs them)")


def by_comm(*names: str) -> Labeller:
    """Label windows of processes whose name is one of `names` (the programs the recipe launched)."""
    wanted = {n[:15] for n in names}
    return lambda f: f["comm"].isin(wanted)


def children_of(pid: int) -> Labeller:
    """Label windows of the direct children of `pid` (e.g. a server's workers, not its master)."""
    return lambda f: f["ppid"] == pid


def everything() -> Labeller:
    """Label every recorded window."""
    return lambda f: pd.Series(True, index=f.index)
