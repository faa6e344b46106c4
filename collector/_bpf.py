"""The only module that imports bcc: compiles collector.bpf.c, attaches it, and drains its maps."""

from __future__ import annotations

import ctypes as ct
import errno
import os
import time
from collections.abc import Iterable
from importlib import resources

import numpy as np

from pathlib import Path

from procsift.collector._btf import VMLINUX, BtfError, task_offsets
from procsift.collector.errors import BPFUnavailable
from procsift.collector.samples import TASK_DTYPE, Drain
from procsift.collector.schema import SOCKET_COLUMNS  # struct sock_io's fields, in order

# task_stats fields copied as they are into TASK_DTYPE.
_COPIED = ("tgid", "ppid", "state", "ts", "run_ns", "runq_ns", "sleep_ns", "block_ns",
           "switches_in", "voluntary", "involuntary", "transitions", "wakeups", "wakes_others",
           "start_ns", "exited", "k_seen", "k_exec", "k_delay", "k_pcount", "ev_runq", "ev_sw")

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


class _Batch:
    """Reads a whole map with BPF_MAP_LOOKUP(_AND_DELETE)_BATCH into numpy arrays.

    Buffers are allocated once (bcc's own batch helpers allocate per call and yield
    ctypes objects one by one: too slow for thousands of entries per window).
    """

    def __init__(self, table, delete: bool, capacity: int | None = None) -> None:  # type: ignore[no-untyped-def]
        from bcc.libbcc import lib  # noqa: PLC0415

        self._fn = lib.bpf_lookup_and_delete_batch if delete else lib.bpf_lookup_batch
        self._fd = table.map_fd
        self._n = capacity or table.max_entries
        self._ksize, self._vsize = ct.sizeof(table.Key), ct.sizeof(table.Leaf)
        self._keys = (table.Key * self._n)()
        self._vals = (table.Leaf * self._n)()
        self._kdtype, self._vdtype = np.dtype(table.Key), np.dtype(table.Leaf)

    def read(self) -> tuple[np.ndarray, np.ndarray]:
        total = 0
        token_in, token_out, count = ct.c_uint32(0), ct.c_uint32(0), ct.c_uint32(0)
        while total < self._n:
            count.value = self._n - total
            res = self._fn(self._fd, ct.byref(token_in) if total else None, ct.byref(token_out),
                           ct.byref(self._keys, self._ksize * total), ct.byref(self._vals, self._vsize * total),
                           ct.byref(count))
            err = ct.get_errno()
            total += count.value
            if res != 0:
                if err == errno.ENOENT:  # the whole map was read
                    break
                # ENOSPC: the next bucket holds more entries than the buffer has room left, which
                # happens when tasks keep inserting while a nearly full map is read. What was
                # read is good; with delete=True the rest stays in the map for the next read.
                if err == errno.ENOSPC and total > 0:
                    break
                raise OSError(err, f"BPF map batch read failed: {os.strerror(err)}")
            if count.value == 0:
                break
            token_in.value = token_out.value
        keys = np.frombuffer(self._keys, dtype=self._kdtype, count=total).copy()
        vals = np.frombuffer(self._vals, dtype=self._vdtype, count=total).copy()
        return keys, vals


def _group_counts(keys: np.ndarray, vals: np.ndarray) -> dict[int, dict[int, int]]:
    """Per-CPU syscall counts keyed (tgid, nr) -> {tgid: {nr: count}}, zero counts left out.

    A hash map holds each (tgid, nr) once, so grouping needs no summing; numpy sorts and
    splits, so Python loops once per process rather than once per entry.
    """
    if not len(keys):
        return {}
    totals = vals.sum(axis=1)
    keep = totals > 0
    order = np.argsort(keys["tgid"][keep], kind="stable")
    tgid, nr, n = keys["tgid"][keep][order], keys["nr"][keep][order], totals[keep][order]
    cuts = [0, *(np.flatnonzero(np.diff(tgid)) + 1).tolist(), len(tgid)]
    tgids, nrs, ns = tgid.tolist(), nr.tolist(), n.tolist()
    return {tgids[a]: dict(zip(nrs[a:b], ns[a:b])) for a, b in zip(cuts, cuts[1:])}


def delete_keys(table, keys: list[int]) -> None:  # type: ignore[no-untyped-def]
    """Delete u32 `keys` from a hash map in one BPF_MAP_DELETE_BATCH call where it can.

    The kernel stops a delete batch at the first key that is absent (ENOENT) and reports how
    many it deleted before it: that key is skipped and the batch goes on after it.
    """
    from bcc.libbcc import lib  # noqa: PLC0415

    if not keys:
        return
    arr = (ct.c_uint32 * len(keys))(*keys)
    done, count = 0, ct.c_uint32(0)
    while done < len(keys):
        count.value = len(keys) - done
        res = lib.bpf_delete_batch(table.map_fd, ct.byref(arr, 4 * done), ct.byref(count))
        done += count.value
        if res != 0:
            if ct.get_errno() not in (errno.ENOENT, 0):
                raise OSError(ct.get_errno(), f"BPF map batch delete failed: {os.strerror(ct.get_errno())}")
            done += 1  # the absent key


class BpfProbe:
    """The loaded BPF program: per-(tgid, syscall) counts and per-task run/wait figures.

    Parameters
    ----------
    tracked : tids to follow (with their descendants), or None for every task.
    raw : attach sys_enter as a raw tracepoint; None picks it when the kernel has them.
    syscalls : count syscalls at all (False leaves only the scheduler probes).
    btf : the kernel's BTF, for the task_struct offsets (missing: event-based times only).
    """

    def __init__(self, tracked: Iterable[int] | None = None, raw: bool | None = None,
                 syscalls: bool = True, btf: Path = VMLINUX) -> None:
        if os.geteuid() != 0:
            raise BPFUnavailable("loading BPF needs root")
        bcc = _import_bcc()
        self.raw = bcc.BPF.support_raw_tracepoint() if raw is None else raw
        cflags = [f"-DSC_ENTRIES={SC_ENTRIES}", f"-DTASK_ENTRIES={TASK_ENTRIES}", "-w"]
        if self.raw:
            cflags.append("-DRAW_SYS_ENTER")
        # Without sock:sock_{send,recv}_length (Linux 6.3+) the socket columns stay zero.
        self.counts_sockets = all(bcc.BPF.tracepoint_exists("sock", t)
                                  for t in ("sock_send_length", "sock_recv_length"))
        if self.counts_sockets:
            cflags.append("-DSOCK_TRACEPOINTS")
        # Struct offsets from the running kernel's BTF: without them (no BTF) the run and queue
        # times come from the sched_switch events alone, which can miss a task's dispatch.
        self.btf_missing: str | None
        try:
            offsets = task_offsets(btf)
        except BtfError as err:
            offsets, self.btf_missing = {}, str(err)
        else:
            self.btf_missing = None
            cflags += [f"-D{name}={off}" for name, off in offsets.items()]
            cflags += ["-DKERNEL_TIMES", "-DRAW_WAKEUP"] if self.raw else ["-DKERNEL_TIMES"]
        self.kernel_times = self.btf_missing is None
        self.filtered = tracked is not None
        if self.filtered:
            cflags.append("-DFILTER_TRACKED")
        try:
            self._bpf = bcc.BPF(text=bpf_source(), cflags=cflags)
        except Exception as err:  # bcc raises bare Exception on compile/load failure
            raise BPFUnavailable(f"the BPF program did not load ({str(err).splitlines()[0]})") from err
        self._tasks = self._bpf[b"tasks"]
        self._syscounts = self._bpf[b"syscounts"]
        self._task_batch = _Batch(self._tasks, delete=False)
        self._sc_batch = _Batch(self._syscounts, delete=True)
        self._sock_batch = _Batch(self._bpf[b"sockio"], delete=True)
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
        keys, raw = self._task_batch.read()
        tasks = np.zeros(len(raw), dtype=TASK_DTYPE)
        tasks["tid"] = keys
        for name in _COPIED:
            tasks[name] = raw[name]
        slot = old & 1
        tasks["max_wait_ns"] = np.where(raw["max_seq"][:, slot] == old, raw["max_wait"][:, slot], 0)
        exited = np.flatnonzero(raw["exited"])
        comms = {int(keys[i]): bytes(raw["comm"][i]).split(b"\0", 1)[0].decode("utf-8", "replace")
                 for i in exited}
        tasks["uid"] = np.where(raw["exited"] != 0, raw["uid"], -1)
        sc_keys, sc_vals = self._sc_batch.read()
        syscalls = _group_counts(sc_keys, sc_vals)
        dropped = sum(self._dropped[self._dropped.Key(0)])
        return Drain(now_ns=now, tasks=tasks, syscalls=syscalls, comms=comms, dropped=dropped,
                     counts_syscalls=self._sys_attached, sockets=self._read_sockets())

    def _read_sockets(self) -> dict[int, tuple[int, ...]]:
        """This window's socket figures per process (tgid -> SOCKET_COLUMNS), summed over CPUs."""
        keys, vals = self._sock_batch.read()
        if not len(keys):
            return {}
        sums = np.stack([vals[f].reshape(len(keys), -1).sum(axis=1) for f in SOCKET_COLUMNS], axis=1)
        return {int(k): tuple(int(x) for x in row) for k, row in zip(keys.tolist(), sums)}

    def forget(self, tids: Iterable[int]) -> None:
        """Drop the map entries of tasks that exited and were reported."""
        tids = list(tids)
        delete_keys(self._tasks, tids)
        if self.filtered:
            delete_keys(self._bpf[b"tracked"], tids)

    def close(self) -> None:
        """Detach everything and free the maps."""
        self._bpf.cleanup()
