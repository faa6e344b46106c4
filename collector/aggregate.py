"""Pure aggregation: cumulative per-task samples in, one Window row per active process out.

Threads fold into their process; a process that exits mid-window still yields its last
row; a PID reused within a run is told apart by its start_time. The per-task arithmetic
is vectorised (numpy): with ~1,000 live processes a window must cost milliseconds.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np

from procsift.collector.proc import CLK_TCK, read_schedstat
from procsift.collector.samples import (
    STATE_BLOCK, STATE_RUNNABLE, STATE_RUNNING, STATE_SLEEP, Drain, ProcInfo,
)
from procsift.collector.schema import SOCKET_COLUMNS, Window
from procsift.collector.syscalls import SYSCALL_NAMES, UNKNOWN, X86_64 as _NAME, category_of, name_of

__all__ = ["Aggregator"]

# Cumulative counters diffed per window (TASK_DTYPE field names).
_COUNTERS = ("run_ns", "runq_ns", "sleep_ns", "block_ns", "switches_in", "voluntary",
             "involuntary", "transitions", "wakeups", "wakes_others")
_C = {name: i for i, name in enumerate(_COUNTERS)}
_SPAN_COLUMN = {STATE_RUNNING: 0, STATE_RUNNABLE: 1, STATE_SLEEP: 2, STATE_BLOCK: 3}
_EMPTY = np.zeros(0, dtype=np.int64)
_NO_SOCKETS = (0,) * len(SOCKET_COLUMNS)


_IO_NAMES = frozenset(n for n in SYSCALL_NAMES
                      if category_of(n) in ("file_read", "file_write", "memory", "net_send", "net_recv"))


def _may_have_done_io(sys_counts: dict[str, int], block_ns: int, counts_syscalls: bool) -> bool:
    """Whether /proc/PID/io is worth reading: bytes move through file, socket and sendfile
    calls (and page faults), or show as D-state waits. Skipping it only defers bytes (the counters are cumulative)."""
    if not counts_syscalls or block_ns:
        return True
    return not _IO_NAMES.isdisjoint(sys_counts)


Schedstat = Callable[[int], "tuple[int, int, int] | None"]


def _cumulative(tasks: np.ndarray, now_ns: int, schedstat: Schedstat | None = None) -> np.ndarray:
    """(n, counters) of each task's figures now, including the span of the state it is in.

    The span goes to the column of the state the probe last saw. A task on a CPU or its queue
    whose probe kept the kernel's own counters (k_seen) is read from them instead, when
    `schedstat` (tid -> the kernel's counters now) can: the kernel can dispatch a task without
    the event that says so, and then a "queued" task has in fact been running.
    """
    cum = np.stack([tasks[c] for c in _COUNTERS], axis=1)
    ts = tasks["ts"]
    span = np.where((ts > 0) & (ts < now_ns), now_ns - ts, 0)
    state = tasks["state"]
    exact = np.zeros(len(tasks), dtype=bool)
    if schedstat is not None:
        on_cpu = ((state == STATE_RUNNING) | (state == STATE_RUNNABLE)) & (tasks["k_seen"] != 0) & (tasks["exited"] == 0)
        for i in np.flatnonzero(on_cpu).tolist():
            now = schedstat(int(tasks["tid"][i]))
            if now is None:
                continue
            ran = now[0] - int(tasks["k_exec"][i])
            waited = now[1] - int(tasks["k_delay"][i])
            runs = now[2] - int(tasks["k_pcount"][i])
            if ran < 0 or waited < 0 or runs < 0:
                continue  # another task under a reused tid
            if state[i] == STATE_RUNNABLE and ran == 0:
                continue  # really waiting for a CPU: the span is queue time
            exact[i] = True
            cum[i, _C["run_ns"]] += ran
            cum[i, _C["runq_ns"]] += max(waited - int(tasks["ev_runq"][i]), 0)
            cum[i, _C["switches_in"]] += max(runs - int(tasks["ev_sw"][i]), 0)
    for st, col in _SPAN_COLUMN.items():
        mask = (state == st) & ~exact
        cum[mask, col] += span[mask]
    return cum


@dataclass
class _Held:
    """A window's figures for a process that left /proc before BPF reported its exit."""

    counts: np.ndarray
    max_wait: int
    syscalls: dict[str, int]
    sockets: tuple[int, ...]
    start_ns: int
    info: ProcInfo


def _add_counts(out: dict[str, int], pairs: Iterable[tuple[str, int]]) -> dict[str, int]:
    """Add (name, count) pairs into `out` (in place) and return it."""
    for name, n in pairs:
        out[name] = out.get(name, 0) + n
    return out


class Aggregator:
    """Turns each window's Drain into Window rows; keeps what it needs between windows.

    Parameters
    ----------
    host : host name written into every row.
    info : (pid, io) -> ProcInfo now, or None when the process is gone; io=False may skip
        the I/O byte counters (then -1).
    tgid_of : tid -> its process id, or None when it is gone.
    schedstat : tid -> the kernel's (on-CPU ns, queue wait ns, dispatches) now, or None; read
        only for tasks on a CPU or its queue whose probe keeps the kernel's counters.
    """

    def __init__(self, host: str, info: Callable[[int, bool], ProcInfo | None],
                 tgid_of: Callable[[int], int | None], clk_tck: int = CLK_TCK,
                 schedstat: Schedstat | None = read_schedstat) -> None:
        self.host = host
        self._schedstat = schedstat
        self._info = info
        self._tgid_of = tgid_of
        self._ns_per_tick = 1_000_000_000 // clk_tck
        # The previous window's cumulative figures, sorted by tid.
        self._prev_tid = _EMPTY
        self._prev_start = _EMPTY
        self._prev_cum = np.zeros((0, len(_COUNTERS)), dtype=np.int64)
        self._tgids: dict[int, int] = {}                   # tid -> tgid, for tasks BPF hasn't placed
        self._known: dict[int, ProcInfo] = {}              # tgid -> last ProcInfo seen
        self._io: dict[tuple[int, int], tuple[int, int, int, int]] = {}
        # tgid -> figures held for one window: the process left /proc between the drain and
        # the /proc read, so its exit (and its comm) come with the next drain, into one row.
        self._held: dict[int, _Held] = {}

    def remember(self, info: ProcInfo) -> None:
        """Note a process' identity now, so its row is complete even if it exits unseen."""
        self._known[info.pid] = info

    def _resolve_tgids(self, tasks: np.ndarray) -> np.ndarray:
        tgid = tasks["tgid"].copy()
        for i in np.flatnonzero(tgid == 0):
            tid = int(tasks["tid"][i])
            found = self._tgids.get(tid) or self._tgid_of(tid)
            if found:
                self._tgids[tid] = found
                tgid[i] = found
        return tgid

    def _deltas(self, tasks: np.ndarray, cum: np.ndarray) -> np.ndarray:
        """This window's share of each task's cumulative figures (a new task: all of them)."""
        tid, start = tasks["tid"], tasks["start_ns"]
        delta = cum.copy()
        if len(self._prev_tid):
            idx = np.clip(np.searchsorted(self._prev_tid, tid), 0, len(self._prev_tid) - 1)
            same = (self._prev_tid[idx] == tid) & (self._prev_start[idx] == start)
            delta[same] -= self._prev_cum[idx[same]]
            np.maximum(delta, 0, out=delta)
        live = tasks["exited"] == 0
        order = np.argsort(tid[live], kind="stable")
        self._prev_tid = tid[live][order]
        self._prev_start = start[live][order]
        self._prev_cum = cum[live][order]
        return delta

    def build(self, drain: Drain, t_start: float, dur_s: float) -> tuple[list[Window], list[int]]:
        """Rows for the window that `drain` closes, and the tids the probe may now forget."""
        tasks = drain.tasks
        forget = [int(t) for t in tasks["tid"][tasks["exited"] != 0]]
        tgid = self._resolve_tgids(tasks)
        delta = self._deltas(tasks, _cumulative(tasks, drain.now_ns, self._schedstat))

        placed = tgid > 0
        groups, inv = np.unique(tgid[placed], return_inverse=True)
        sums = np.zeros((len(groups), len(_COUNTERS)), dtype=np.int64)
        np.add.at(sums, inv, delta[placed])
        max_wait = np.zeros(len(groups), dtype=np.int64)
        np.maximum.at(max_wait, inv, tasks["max_wait_ns"][placed])
        threads = np.bincount(inv, weights=(tasks["exited"][placed] == 0), minlength=len(groups))
        ppids = np.zeros(len(groups), dtype=np.int64)
        np.maximum.at(ppids, inv, tasks["ppid"][placed])  # any thread's fork-time parent
        # The leader (tid == tgid) carries the process' start and exit.
        leaders = {int(tgid[i]): int(i) for i in np.flatnonzero(placed & (tasks["tid"] == tgid))}
        index = {int(g): k for k, g in enumerate(groups)}

        rows = []
        held, self._held = self._held, {}
        for g in set(index) | set(drain.syscalls) | set(drain.sockets) | set(held):
            k = index.get(g)
            c = sums[k] if k is not None else np.zeros(len(_COUNTERS), dtype=np.int64)
            wait = int(max_wait[k]) if k is not None else 0
            sys_counts = self._names(drain.syscalls.get(g, {}))
            socks = drain.sockets.get(g, _NO_SOCKETS)
            li = leaders.get(g)
            leader_exited = li is not None and bool(tasks["exited"][li])
            start_ns = int(tasks["start_ns"][li]) if li is not None else 0
            h = held.pop(g, None)
            if h is not None and li is not None and start_ns != h.start_ns:
                # The PID is another process now: the held figures make a row of their own.
                rows.append(self._row(g, h.info, t_start, dur_s, h.counts, h.max_wait, h.syscalls,
                                      h.sockets, 1, (0, 0, 0, 0), True))
                h = None
            if h is not None:
                c = c + h.counts
                wait = max(wait, h.max_wait)
                sys_counts = _add_counts(dict(h.syscalls), sys_counts.items())
                socks = tuple(a + b for a, b in zip(h.sockets, socks))
            # Quiet means no dispatch, wake-up or syscall *and* no time on a CPU or its queue: a
            # CPU loop that kept its core (or waited for one) all window did all three of nothing.
            if not (c[_C["switches_in"]] or c[_C["wakeups"]] or c[_C["run_ns"]] or c[_C["runq_ns"]]
                    or sys_counts or leader_exited or g in drain.sockets or h is not None):
                continue
            io = _may_have_done_io(sys_counts, int(c[3]), drain.counts_syscalls)
            info = None if leader_exited else self._info(g, io)
            if info is not None and start_ns and abs(info.start_time - start_ns // self._ns_per_tick) > 1:
                info = None  # the PID already belongs to a newer process than the one sampled
            exited = leader_exited or info is None
            if info is None:
                info = self._remembered(g, start_ns, li, tasks, drain.comms,
                                        int(ppids[k]) if k is not None else 0)
                if info is None:
                    if h is not None:  # its exit never came (a probe that reports none): emit what was held
                        rows.append(self._row(g, h.info, t_start, dur_s, c, wait, sys_counts, socks, 1,
                                              (0, 0, 0, 0), True))
                    continue
                if h is None and li is not None and not leader_exited:
                    # Gone from /proc, but BPF has not seen it exit yet: the exit, with the
                    # comm, comes in the next drain. One row then, not an anonymous one now.
                    self._held[g] = _Held(c, wait, sys_counts, socks, start_ns, info)
                    continue
                if h is not None and not info.comm and h.info.comm:
                    info = h.info
            else:
                self._known[g] = info
            nthreads = info.nthreads if not exited else max(int(threads[k]) if k is not None else 1, 1)
            read_b, write_b, rchar, wchar = self._io_delta(info, start_ns)
            rows.append(self._row(g, info, t_start, dur_s, c, wait, sys_counts, socks, nthreads,
                                  (read_b, write_b, rchar, wchar), exited))
            if exited:
                self._known.pop(g, None)
                self._io.pop((g, info.start_time), None)
        for tid in forget:
            self._tgids.pop(tid, None)
        return rows, forget

    def _row(self, g: int, info: ProcInfo, t_start: float, dur_s: float, c: np.ndarray, wait: int,
             sys_counts: dict[str, int], socks: tuple[int, ...], nthreads: int,
             io: tuple[int, int, int, int], exited: bool) -> Window:
        return Window(
            host=self.host, t_start=t_start, dur_s=dur_s, pid=g, start_time=info.start_time,
            ppid=info.ppid, comm=info.comm, exe=info.exe, uid=info.uid, nthreads=nthreads,
            cgroup=info.cgroup, run_ns=int(c[0]), runq_ns=int(c[1]), sleep_ns=int(c[2]),
            block_ns=int(c[3]), switches_in=int(c[4]), voluntary=int(c[5]),
            involuntary=int(c[6]), max_wait_ns=wait,
            run_wait_transitions=int(c[7]), wakeups=int(c[8]), wakes_others=int(c[9]),
            read_bytes=io[0], write_bytes=io[1], rchar=io[2], wchar=io[3], rss_bytes=info.rss_bytes,
            syscalls=sys_counts, exited=exited, **dict(zip(SOCKET_COLUMNS, socks)),
        )

    @staticmethod
    def _names(counts: dict[int, int]) -> dict[str, int]:
        out = {_NAME.get(nr, UNKNOWN): n for nr, n in counts.items()}
        if len(out) == len(counts):
            return out
        # several numbers without a name: they add up under UNKNOWN
        return _add_counts({}, ((name_of(nr), n) for nr, n in counts.items()))

    def _remembered(self, tgid: int, start_ns: int, li: int | None, tasks: np.ndarray,
                    comms: dict[int, str], ppid: int) -> ProcInfo | None:
        """Identity of a process /proc no longer shows: last seen, else what BPF saw."""
        known = self._known.get(tgid)
        if known is not None and (not start_ns or abs(known.start_time - start_ns // self._ns_per_tick) <= 1):
            return known
        if li is None:
            return None
        return ProcInfo(pid=tgid, start_time=start_ns // self._ns_per_tick, ppid=ppid,
                        comm=comms.get(tgid, ""), exe="", uid=int(tasks["uid"][li]), nthreads=1,
                        cgroup="", rss_bytes=0, read_bytes=0, write_bytes=0)

    def _io_delta(self, info: ProcInfo, start_ns: int) -> tuple[int, int, int, int]:
        """This window's (read_bytes, write_bytes, rchar, wchar) from the cumulative counters."""
        key = (info.pid, info.start_time)
        if info.read_bytes < 0:  # not read this window: nothing new counted, nothing lost
            return 0, 0, 0, 0
        now = (info.read_bytes, info.write_bytes, info.rchar, info.wchar)
        prev = self._io.get(key)
        self._io[key] = now
        if prev is None:
            # Seen for the first time: count its bytes only if it started under the probe.
            return now if start_ns > 0 else (0, 0, 0, 0)
        return (max(0, now[0] - prev[0]), max(0, now[1] - prev[1]),
                max(0, now[2] - prev[2]), max(0, now[3] - prev[3]))
