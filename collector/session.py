"""A collection session: opens a probe (BPF, or /proc when BPF can't load) and yields windows.

This is the collector's one room with a clock: `windows()` sleeps until each window ends.
"""

from __future__ import annotations

import os
import socket
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace
from typing import Protocol

import psutil

from procsift.collector.aggregate import Aggregator
from procsift.collector.errors import BPFUnavailable, ProcsiftError
from procsift.collector.proc import ProcReader, task_ids, tgid_of
from procsift.collector.procprobe import ProcProbe
from procsift.collector.samples import Drain
from procsift.collector.schema import Window

__all__ = ["Collector", "RowFilter"]


class _Probe(Protocol):
    counts_syscalls: bool

    def drain(self) -> Drain: ...
    def forget(self, tids: Iterable[int]) -> None: ...
    def track(self, tids: Iterable[int]) -> None: ...
    def close(self) -> None: ...


@dataclass(frozen=True)
class RowFilter:
    """Which rows to keep, beyond the followed PIDs (applied to every row)."""

    uid: int | None = None
    cgroup: str | None = None   # a cgroup path prefix
    comm: str | None = None     # exact comm

    def keep(self, w: Window) -> bool:
        if self.uid is not None and w.uid != self.uid:
            return False
        if self.cgroup is not None and not w.cgroup.startswith(self.cgroup):
            return False
        return self.comm is None or w.comm == self.comm


def _announce(message: str) -> None:
    print(f"procsift: {message}", file=sys.stderr, flush=True)


def _with_descendants(pids: Iterable[int]) -> tuple[set[int], set[int]]:
    """The given processes with their descendants, and all of their threads, now."""
    procs: set[int] = set()
    for pid in pids:
        procs.add(pid)
        try:
            procs.update(c.pid for c in psutil.Process(pid).children(recursive=True))
        except psutil.Error:
            pass
    tids = set(procs)
    for p in procs:
        tids.update(task_ids(p))
    return procs, tids


class Collector:
    """Per-process Window rows, one list per window.

    Parameters
    ----------
    window_s : window length in seconds.
    pids : follow only these processes and their descendants (None: every process).
    row_filter : uid / cgroup / comm filter applied to rows.
    force_proc : use the /proc fallback even where BPF loads.
    syscall_duty : share of each window during which syscalls are counted (0 < d <= 1);
        counts are scaled by 1/d. Attaching sys_enter slows every syscall on the machine,
        so a duty cycle below 1 trades count accuracy for overhead (bench/README.md).
    announce : called once, with one plain line, when the fallback is used.
    """

    def __init__(self, window_s: float = 1.0, pids: Iterable[int] | None = None,
                 row_filter: RowFilter | None = None, force_proc: bool = False,
                 syscall_duty: float = 1.0, announce: Callable[[str], None] = _announce) -> None:
        if not window_s > 0:
            raise ProcsiftError(f"window length must be > 0 seconds, not {window_s}")
        if not 0 < syscall_duty <= 1:
            raise ProcsiftError(f"syscall duty cycle must be in (0, 1], not {syscall_duty}")
        self.window_s = window_s
        self.syscall_duty = syscall_duty
        self.filter = row_filter or RowFilter()
        self.fallback_reason: str | None = None
        procs, tracked = (None, None) if pids is None else _with_descendants(pids)
        self.probe: _Probe
        if force_proc:
            self.fallback_reason = "the /proc collector was asked for"
        else:
            try:
                from procsift.collector._bpf import BpfProbe  # noqa: PLC0415
                self.probe = BpfProbe(tracked=tracked)
            except BPFUnavailable as err:
                self.fallback_reason = str(err)
        if self.fallback_reason is not None:
            self.probe = ProcProbe(tracked=tracked)
            announce(f"using the /proc collector (no syscall counts): {self.fallback_reason}")
        elif getattr(self.probe, "btf_missing", None):
            announce(f"run and queue times from scheduler events alone, which can miss a dispatch "
                     f"({self.probe.btf_missing})")  # type: ignore[attr-defined]
        self.kind = "proc" if self.fallback_reason is not None else "bpf"
        self._reader = ProcReader()
        self._agg = Aggregator(socket.gethostname(), self._reader.info, tgid_of)
        self.dropped = 0
        self._closed = False
        self._mark = time.time()
        self._probe_baseline(procs)

    def _probe_baseline(self, procs: set[int] | None) -> None:
        """Take the figures as they stand now as the start of the first window."""
        self._remember(procs if procs is not None else
                       (int(p) for p in os.listdir("/proc") if p.isdigit()))
        drain = self.probe.drain()
        _, forget = self._agg.build(drain, self._mark, 0.0)
        self.probe.forget(forget)
        self._mark = time.time()

    def _remember(self, pids: Iterable[int]) -> None:
        for pid in pids:
            info = self._reader.info(pid)
            if info is not None:
                self._agg.remember(info)

    def track(self, pids: Iterable[int]) -> None:
        """Follow more processes (with their threads) from now on."""
        procs, tids = _with_descendants(pids)
        self.probe.track(tids)
        self._remember(procs)

    def close_window(self) -> list[Window]:
        """End the current window now and return its rows (no sleeping)."""
        drain = self.probe.drain()
        now = time.time()
        if self.syscall_duty < 1:
            drain = replace(drain, syscalls={
                tgid: {nr: round(n / self.syscall_duty) for nr, n in per.items()}
                for tgid, per in drain.syscalls.items()})
        rows, forget = self._agg.build(drain, self._mark, now - self._mark)
        self.probe.forget(forget)
        self.dropped = drain.dropped
        self._mark = now
        return [w for w in rows if self.filter.keep(w)]

    def windows(self, count: int | None = None,
                stop: Callable[[], bool] = lambda: False) -> Iterator[list[Window]]:
        """Yield each window's rows as it ends; `stop()` ends early (the last partial window is yielded)."""
        n = 0
        deadline = time.monotonic() + self.window_s
        duty = self.syscall_duty < 1 and hasattr(self.probe, "detach_syscalls")
        while count is None or n < count:
            if duty:
                self._sleep_until(deadline - (1 - self.syscall_duty) * self.window_s, stop)
                self.probe.detach_syscalls()  # type: ignore[attr-defined]
            self._sleep_until(deadline, stop)
            rows = self.close_window()
            if duty:
                self.probe.attach_syscalls()  # type: ignore[attr-defined]
            yield rows
            n += 1
            if stop():
                return
            deadline += self.window_s
            if deadline < time.monotonic():  # fell behind (suspended?): restart the grid
                deadline = time.monotonic() + self.window_s

    @staticmethod
    def _sleep_until(deadline: float, stop: Callable[[], bool]) -> None:
        while not stop():
            left = deadline - time.monotonic()
            if left <= 0:
                return
            time.sleep(min(left, 0.05))

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self.probe.close()

    def __enter__(self) -> "Collector":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
