"""Pure aggregation: cumulative per-task samples in, one Window row per active process out.

Threads fold into their process; a process that exits mid-window still yields its last
row; a PID reused within a run is told apart by its start_time.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from procsift.collector.proc import CLK_TCK
from procsift.collector.samples import (
    STATE_BLOCK, STATE_RUNNABLE, STATE_RUNNING, STATE_SLEEP, Drain, ProcInfo, TaskSample,
)
from procsift.collector.schema import Window
from procsift.collector.syscalls import name_of

__all__ = ["Aggregator"]

# Cumulative counters diffed per window, in TaskSample attribute order.
_COUNTERS = ("run_ns", "runq_ns", "sleep_ns", "block_ns", "switches_in", "voluntary",
             "involuntary", "transitions", "wakeups", "wakes_others")
_SPAN_INDEX = {STATE_RUNNING: 0, STATE_RUNNABLE: 1, STATE_SLEEP: 2, STATE_BLOCK: 3}


@dataclass(slots=True)
class _Fold:
    """A process' figures for one window, summed over its threads."""

    counters: list[int]
    max_wait_ns: int = 0
    threads: int = 0
    leader: TaskSample | None = None
    leader_exited: bool = False
    ppid: int = 0


def _cumulative(s: TaskSample, now_ns: int) -> list[int]:
    """A task's counters now, including the span of the state it is in."""
    values = [getattr(s, c) for c in _COUNTERS]
    i = _SPAN_INDEX.get(s.state)
    if i is not None and s.ts and now_ns > s.ts:
        values[i] += now_ns - s.ts
    return values


class Aggregator:
    """Turns each window's Drain into Window rows; keeps what it needs between windows.

    Parameters
    ----------
    host : host name written into every row.
    info : pid -> ProcInfo now, or None when the process is gone.
    tgid_of : tid -> its process id, or None when it is gone.
    """

    def __init__(self, host: str, info: Callable[[int], ProcInfo | None],
                 tgid_of: Callable[[int], int | None], clk_tck: int = CLK_TCK) -> None:
        self.host = host
        self._info = info
        self._tgid_of = tgid_of
        self._ns_per_tick = 1_000_000_000 // clk_tck
        self._prev: dict[int, tuple[int, list[int]]] = {}   # tid -> (start_ns, cumulative)
        self._tgids: dict[int, int] = {}                   # tid -> tgid, once learnt
        self._known: dict[int, ProcInfo] = {}              # tgid -> last ProcInfo seen
        self._io: dict[tuple[int, int], tuple[int, int]] = {}
        self.first_window = True

    def build(self, drain: Drain, t_start: float, dur_s: float) -> tuple[list[Window], list[int]]:
        """Rows for the window that `drain` closes, and the tids the probe may now forget."""
        folds: dict[int, _Fold] = {}
        forget: list[int] = []
        for s in drain.tasks:
            tgid = s.tgid or self._tgids.get(s.tid) or self._tgid_of(s.tid)
            if s.exited:
                forget.append(s.tid)
            if not tgid:
                continue
            self._tgids[s.tid] = tgid
            cur = _cumulative(s, drain.now_ns)
            prev = self._prev.get(s.tid)
            base = prev[1] if prev is not None and prev[0] == s.start_ns else None
            delta = cur if base is None else [max(0, c - b) for c, b in zip(cur, base)]
            self._prev[s.tid] = (s.start_ns, cur)
            fold = folds.get(tgid)
            if fold is None:
                fold = folds[tgid] = _Fold(counters=[0] * len(_COUNTERS))
            fold.counters = [a + b for a, b in zip(fold.counters, delta)]
            fold.max_wait_ns = max(fold.max_wait_ns, s.max_wait_ns)
            fold.threads += 0 if s.exited else 1
            if s.tid == tgid:
                fold.leader = s
                fold.leader_exited = s.exited
            if s.ppid and not fold.ppid:
                fold.ppid = s.ppid
        for tgid in drain.syscalls:
            if tgid not in folds:
                folds[tgid] = _Fold(counters=[0] * len(_COUNTERS))

        rows = []
        for tgid, fold in folds.items():
            sys_counts = self._names(drain.syscalls.get(tgid, {}))
            c = dict(zip(_COUNTERS, fold.counters))
            active = c["switches_in"] or c["wakeups"] or sys_counts or fold.leader_exited
            info = None if fold.leader_exited else self._info(tgid)
            if info is not None and fold.leader is not None and fold.leader.start_ns:
                # The PID may already belong to a newer process than the one sampled.
                if abs(info.start_time - fold.leader.start_ns // self._ns_per_tick) > 1:
                    info = None
            exited = fold.leader_exited or info is None
            if info is None:
                info = self._remembered(tgid, fold)
            else:
                self._known[tgid] = info
            if not active or info is None:
                continue
            read_b, write_b = self._io_delta(info, fold)
            rows.append(Window(
                host=self.host, t_start=t_start, dur_s=dur_s, pid=tgid, start_time=info.start_time,
                ppid=info.ppid, comm=info.comm, exe=info.exe, uid=info.uid,
                nthreads=info.nthreads if not exited else max(fold.threads, 1), cgroup=info.cgroup,
                run_ns=c["run_ns"], runq_ns=c["runq_ns"], sleep_ns=c["sleep_ns"],
                block_ns=c["block_ns"], switches_in=c["switches_in"], voluntary=c["voluntary"],
                involuntary=c["involuntary"], max_wait_ns=fold.max_wait_ns,
                run_wait_transitions=c["transitions"], wakeups=c["wakeups"],
                wakes_others=c["wakes_others"], read_bytes=read_b, write_bytes=write_b,
                rss_bytes=info.rss_bytes, syscalls=sys_counts, exited=exited,
            ))
            if exited:
                self._known.pop(tgid, None)
                self._io.pop((tgid, info.start_time), None)
        for tid in forget:
            self._prev.pop(tid, None)
            self._tgids.pop(tid, None)
        self.first_window = False
        return rows, forget

    def remember(self, info: ProcInfo) -> None:
        """Note a process' identity now, so its row is complete even if it exits unseen."""
        self._known[info.pid] = info

    @staticmethod
    def _names(counts: dict[int, int]) -> dict[str, int]:
        out: dict[str, int] = {}
        for nr, n in counts.items():
            name = name_of(nr)
            out[name] = out.get(name, 0) + n
        return out

    def _remembered(self, tgid: int, fold: _Fold) -> ProcInfo | None:
        """Identity of a process /proc no longer shows: last seen, else what BPF saw."""
        known = self._known.get(tgid)
        leader = fold.leader
        if known is not None and (leader is None or not leader.start_ns
                                  or abs(known.start_time - leader.start_ns // self._ns_per_tick) <= 1):
            return known
        if leader is None:
            return None
        return ProcInfo(pid=tgid, start_time=leader.start_ns // self._ns_per_tick, ppid=fold.ppid,
                        comm=leader.comm, exe="", uid=leader.uid, nthreads=max(fold.threads, 1), cgroup="",
                        rss_bytes=0, read_bytes=0, write_bytes=0)

    def _io_delta(self, info: ProcInfo, fold: _Fold) -> tuple[int, int]:
        key = (info.pid, info.start_time)
        prev = self._io.get(key)
        self._io[key] = (info.read_bytes, info.write_bytes)
        if prev is None:
            # Seen for the first time: count its bytes only if it started under the probe.
            new = fold.leader is not None and fold.leader.start_ns > 0
            return (info.read_bytes, info.write_bytes) if new else (0, 0)
        return max(0, info.read_bytes - prev[0]), max(0, info.write_bytes - prev[1])
