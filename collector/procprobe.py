"""The /proc-only fallback probe: scheduler figures from schedstat and status, no syscall counts."""

from __future__ import annotations

import os
import time
from collections.abc import Iterable

from procsift.collector.proc import CLK_TCK, read_stat
from procsift.collector.samples import Drain, TaskSample

__all__ = ["ProcProbe"]


def _schedstat(path: str) -> tuple[int, int, int]:
    """(on-CPU ns, run-queue ns, timeslices) of one task."""
    try:
        with open(path, encoding="ascii") as fh:
            a, b, c = fh.read().split()[:3]
        return int(a), int(b), int(c)
    except (OSError, ValueError):
        return 0, 0, 0


def _switches(path: str) -> tuple[int, int]:
    vol = invol = 0
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if line.startswith("voluntary_ctxt_switches:"):
                    vol = int(line.split()[1])
                elif line.startswith("nonvoluntary_ctxt_switches:"):
                    invol = int(line.split()[1])
    except (OSError, ValueError):
        pass
    return vol, invol


class ProcProbe:
    """Cumulative per-task figures read from /proc each window (slower, coarser than BPF).

    It has no syscall counts, no sleep/blocked split and no per-wait maximum; voluntary
    switches stand in for run/wait transitions and wake-ups.
    """

    counts_syscalls = False

    def __init__(self, tracked: Iterable[int] | None = None, root: str = "/proc") -> None:
        self.root = root
        self.followed: set[int] | None = set(tracked) if tracked is not None else None
        self._ns_per_tick = 1_000_000_000 // CLK_TCK

    def track(self, pids: Iterable[int]) -> None:
        if self.followed is not None:
            self.followed.update(pids)

    def _pids(self) -> list[int]:
        pids = [int(p) for p in os.listdir(self.root) if p.isdigit()]
        if self.followed is None:
            return pids
        # Follow descendants: a process whose parent is followed is followed too.
        parents = {}
        for pid in pids:
            st = read_stat(pid, self.root)
            if st is not None:
                parents[pid] = st.ppid
        changed = True
        while changed:
            changed = False
            for pid, ppid in parents.items():
                if ppid in self.followed and pid not in self.followed:
                    self.followed.add(pid)
                    changed = True
        return [p for p in pids if p in self.followed]

    def drain(self) -> Drain:
        now = time.monotonic_ns()
        tasks = []
        for pid in self._pids():
            st = read_stat(pid, self.root)
            if st is None or st.flags & 0x00200000:  # gone, or a kernel thread
                continue
            start_ns = st.start_time * self._ns_per_tick
            try:
                tids = [int(t) for t in os.listdir(f"{self.root}/{pid}/task")]
            except OSError:
                continue
            for tid in tids:
                base = f"{self.root}/{pid}/task/{tid}"
                run, runq, slices = _schedstat(f"{base}/schedstat")
                vol, invol = _switches(f"{base}/status")
                tasks.append(TaskSample(
                    tid=tid, tgid=pid, ppid=st.ppid, run_ns=run, runq_ns=runq, switches_in=slices,
                    voluntary=vol, involuntary=invol, transitions=2 * vol, wakeups=vol,
                    start_ns=start_ns if tid == pid else 0,
                ))
        return Drain.of(now, tasks, counts_syscalls=False)

    def forget(self, tids: Iterable[int]) -> None:
        """Nothing to forget: /proc drops exited tasks by itself."""

    def close(self) -> None:
        """Nothing to release."""
