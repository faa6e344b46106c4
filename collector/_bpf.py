"""The only module that imports bcc: compiles collector.bpf.c, attaches it, and drains its maps."""

from __future__ import annotations

import os
import time
from collections.abc import Iterable
from importlib import resources

from procsift.collector.errors import BPFUnavailable
from procsift.collector.samples import Drain, TaskSample

__all__ = ["BpfProbe", "bpf_source"]

SC_ENTRIES = 65536
TASK_ENTRIES = 65536


def bpf_source() -> str:
    """The BPF C program as shipped in the package (what `--ebpf` prints)."""
    return resources.files("procsift.collector").joinpath("collector.bpf.c").read_text()


def _import_bcc():  # type: ignore[no-untyped-def]
    try:
        import bcc  # noqa: PLC0415  (only this module may import bcc)
    except ImportError as err:
        raise BPFUnavailable("bcc's Python bindings are not installed (apt: python3-bpfcc)") from err
    return bcc


class BpfProbe:
    """The loaded BPF program: per-(tgid, syscall) counts and per-task run/wait figures.

    Parameters
    ----------
    tracked : tids to follow (with their descendants), or None for every task.
    raw : attach sys_enter as a raw tracepoint; None picks it when the kernel has them.
    syscalls : count syscalls at all (False leaves only the scheduler probes).
    """

    def __init__(self, tracked: Iterable[int] | None = None, raw: bool | None = None,
                 syscalls: bool = True) -> None:
        if os.geteuid() != 0:
            raise BPFUnavailable("loading BPF needs root")
        bcc = _import_bcc()
        self.raw = bcc.BPF.support_raw_tracepoint() if raw is None else raw
        cflags = [f"-DSC_ENTRIES={SC_ENTRIES}", f"-DTASK_ENTRIES={TASK_ENTRIES}", "-w"]
        if self.raw:
            cflags.append("-DRAW_SYS_ENTER")
        self.filtered = tracked is not None
        if self.filtered:
            cflags.append("-DFILTER_TRACKED")
        try:
            self._bpf = bcc.BPF(text=bpf_source(), cflags=cflags)
        except Exception as err:  # bcc raises bare Exception on compile/load failure
            raise BPFUnavailable(f"the BPF program did not load ({str(err).splitlines()[0]})") from err
        self._tasks = self._bpf[b"tasks"]
        self._syscounts = self._bpf[b"syscounts"]
        self._seq = self._bpf[b"window_seq"]
        self._dropped = self._bpf[b"dropped"]
        self._seq_value = 0
        # bcc attaches every *_PROBE function at load, sys_enter included.
        self._sys_attached = True
        if self.filtered:
            self.track(tracked or ())
        if not syscalls:
            self.detach_syscalls()

    # -- syscall probe (may be attached for part of a window: the duty cycle) --
    def attach_syscalls(self) -> None:
        """Attach the sys_enter probe (idempotent)."""
        if self._sys_attached:
            return
        if self.raw:
            self._bpf.attach_raw_tracepoint(tp="sys_enter", fn_name="raw_tracepoint__sys_enter")
        else:
            self._bpf.attach_tracepoint(tp="raw_syscalls:sys_enter", fn_name="tracepoint__raw_syscalls__sys_enter")
        self._sys_attached = True

    def detach_syscalls(self) -> None:
        """Detach the sys_enter probe, so the syscall fast path is back (idempotent)."""
        if not self._sys_attached:
            return
        if self.raw:
            self._bpf.detach_raw_tracepoint(tp="sys_enter")
        else:
            self._bpf.detach_tracepoint(tp="raw_syscalls:sys_enter")
        self._sys_attached = False

    @property
    def counts_syscalls(self) -> bool:
        return self._sys_attached

    def track(self, tids: Iterable[int]) -> None:
        """Add tasks to the followed set (their future children follow automatically)."""
        if not self.filtered:
            return
        table = self._bpf[b"tracked"]
        for tid in tids:
            table[table.Key(tid)] = table.Leaf(1)

    def drain(self) -> Drain:
        """Close the current window: cumulative task figures plus this window's syscall counts."""
        old = self._seq_value
        self._seq_value = old + 1
        self._seq[self._seq.Key(0)] = self._seq.Leaf(self._seq_value)
        # bpf_ktime_get_ns() is CLOCK_MONOTONIC, so an in-progress span is now - ts.
        now = time.monotonic_ns()
        slot = old & 1
        tasks = []
        for key, v in self._tasks.items_lookup_batch():
            max_wait = v.max_wait[slot] if v.max_seq[slot] == old else 0
            tasks.append(TaskSample(
                tid=int(key), tgid=v.tgid, ppid=v.ppid, state=v.state, ts=v.ts,
                run_ns=v.run_ns, runq_ns=v.runq_ns, sleep_ns=v.sleep_ns, block_ns=v.block_ns,
                switches_in=v.switches_in, voluntary=v.voluntary, involuntary=v.involuntary,
                transitions=v.transitions, wakeups=v.wakeups, wakes_others=v.wakes_others,
                start_ns=v.start_ns, max_wait_ns=max_wait, exited=bool(v.exited),
                comm=bytes(v.comm).split(b"\0", 1)[0].decode("utf-8", "replace"),
                uid=v.uid if v.exited else -1,
            ))
        syscalls: dict[int, dict[int, int]] = {}
        for key, percpu in self._syscounts.items_lookup_and_delete_batch():
            total = sum(percpu)
            if total:
                per = syscalls.setdefault(key.tgid, {})
                per[key.nr] = per.get(key.nr, 0) + total
        dropped = sum(self._dropped[self._dropped.Key(0)])
        return Drain(now_ns=now, tasks=tasks, syscalls=syscalls, dropped=dropped,
                     counts_syscalls=self._sys_attached)

    def forget(self, tids: Iterable[int]) -> None:
        """Drop the map entries of tasks that exited and were reported."""
        tracked = self._bpf[b"tracked"] if self.filtered else None
        for tid in tids:
            key = self._tasks.Key(tid)
            try:
                del self._tasks[key]
            except KeyError:
                pass
            if tracked is not None:
                try:
                    del tracked[tracked.Key(tid)]
                except KeyError:
                    pass

    def close(self) -> None:
        """Detach everything and free the maps."""
        self._bpf.cleanup()
