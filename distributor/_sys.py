"""Thin syscall helpers for the applier: /proc reads, ioprio and sched_attr via ctypes, errors mapped once.

Only apply.py (and this module's callers in it) change processes. Every function takes a
thread id where the kernel works per thread (nice, affinity, ioprio, sched policy all do).
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from procsift.distributor.errors import AccessDenied, ProcessGone

__all__ = [
    "Stat", "read_stat", "thread_ids", "is_kernel_thread", "get_nice", "set_nice", "get_affinity",
    "set_affinity", "ioprio_get", "ioprio_set", "get_policy", "set_policy", "sched_getattr",
    "sched_setattr", "probe_slice", "thread_alive", "read_autogroup", "write_autogroup", "IO_CLASS_NUM",
    "IO_CLASS_NAME", "POLICY_NUM", "POLICY_NAME", "PROC", "online_cpus",
]

PROC = "/proc"
PF_KTHREAD = 0x00200000  # include/linux/sched.h
IO_CLASS_NUM = {"none": 0, "realtime": 1, "best-effort": 2, "idle": 3}
IO_CLASS_NAME = {v: k for k, v in IO_CLASS_NUM.items()}
POLICY_NUM = {"other": os.SCHED_OTHER, "batch": os.SCHED_BATCH, "idle": os.SCHED_IDLE}
POLICY_NAME = {v: k for k, v in POLICY_NUM.items()}
_IOPRIO_WHO_PROCESS = 1
_IOPRIO_CLASS_SHIFT = 13
# Syscall numbers (glibc wraps neither ioprio_* nor sched_*attr).
_NR = {
    "x86_64": {"ioprio_set": 251, "ioprio_get": 252, "sched_setattr": 314, "sched_getattr": 315},
    "aarch64": {"ioprio_set": 30, "ioprio_get": 31, "sched_setattr": 274, "sched_getattr": 275},
}.get(platform.machine(), {})
_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long

T = TypeVar("T")


@dataclass(frozen=True)
class Stat:
    """The few /proc/PID/stat fields the applier needs."""

    pid: int
    comm: str
    state: str
    ppid: int
    flags: int
    nice: int
    start_time: int


def online_cpus() -> tuple[int, ...]:
    """The CPUs online on this machine (/sys/devices/system/cpu/online; else this process's own set)."""
    from procsift.distributor.policy import parse_cpulist  # noqa: PLC0415 (policy is pure; no cycle at import)

    try:
        with open("/sys/devices/system/cpu/online") as f:
            return parse_cpulist(f.read().strip())
    except (OSError, ValueError):
        return tuple(sorted(os.sched_getaffinity(0)))


def _os_call(pid: int, what: str, fn: Callable[[], T]) -> T:
    """Run a syscall on `pid`, turning ESRCH/ENOENT into ProcessGone and EPERM/EACCES into AccessDenied."""
    try:
        return fn()
    except (ProcessLookupError, FileNotFoundError) as err:
        raise ProcessGone(pid) from err
    except PermissionError as err:
        raise AccessDenied(pid, what) from err
    except OSError as err:
        if err.errno == errno.ESRCH:
            raise ProcessGone(pid) from err
        raise


def _proc(pid: int, tid: int | None = None) -> str:
    return f"{PROC}/{pid}" if tid is None else f"{PROC}/{pid}/task/{tid}"


def read_stat(pid: int, tid: int | None = None) -> Stat:
    """Parse /proc/PID/stat (or a thread's); comm may hold spaces and ')' so split at the last ')'."""
    def read() -> str:
        with open(f"{_proc(pid, tid)}/stat") as f:
            return f.read()
    text = _os_call(pid, "stat", read)
    lpar, rpar = text.index("("), text.rindex(")")
    rest = text[rpar + 2:].split()  # rest[0] is field 3
    return Stat(pid=int(text[:lpar]), comm=text[lpar + 1:rpar], state=rest[0], ppid=int(rest[1]),
                flags=int(rest[6]), nice=int(rest[16]), start_time=int(rest[19]))


def thread_ids(pid: int) -> list[int]:
    """The thread ids of a process now."""
    return sorted(int(t) for t in _os_call(pid, "list threads", lambda: os.listdir(f"{_proc(pid)}/task")))


def thread_alive(pid: int, tid: int) -> bool:
    """Whether `tid` is still a thread of `pid` (checked right before a per-thread write)."""
    return os.path.exists(f"{_proc(pid, tid)}/stat")


def is_kernel_thread(pid: int) -> bool:
    """Kernel threads carry PF_KTHREAD in stat field 9 (and have no exe)."""
    return bool(read_stat(pid).flags & PF_KTHREAD)


def get_nice(tid: int) -> int:
    """The nice value of one thread."""
    return _os_call(tid, "getpriority", lambda: os.getpriority(os.PRIO_PROCESS, tid))


def set_nice(tid: int, nice: int) -> None:
    """setpriority(PRIO_PROCESS, tid): on Linux this changes that one thread."""
    _os_call(tid, "setpriority", lambda: os.setpriority(os.PRIO_PROCESS, tid, nice))


def get_affinity(tid: int) -> tuple[int, ...]:
    """The CPUs one thread may run on."""
    return tuple(sorted(_os_call(tid, "sched_getaffinity", lambda: os.sched_getaffinity(tid))))


def set_affinity(tid: int, cpus: tuple[int, ...]) -> None:
    """sched_setaffinity for one thread."""
    _os_call(tid, "sched_setaffinity", lambda: os.sched_setaffinity(tid, cpus))


def _syscall(tid: int, what: str, *args: object) -> int:
    if what not in _NR:
        raise OSError(errno.ENOSYS, f"{what} not known on {platform.machine()}")
    r = _libc.syscall(_NR[what], *args)
    if r < 0:
        e = ctypes.get_errno()
        err = OSError(e, f"{what}({tid}): {os.strerror(e)}")
        if e == errno.ESRCH:
            raise ProcessGone(tid) from err
        if e in (errno.EPERM, errno.EACCES):
            raise AccessDenied(tid, what) from err
        raise err
    return int(r)


def ioprio_get(tid: int) -> tuple[str, int]:
    """(class, level) of one thread; class "none" means it follows its nice value."""
    v = _syscall(tid, "ioprio_get", ctypes.c_int(_IOPRIO_WHO_PROCESS), ctypes.c_int(tid))
    return IO_CLASS_NAME.get(v >> _IOPRIO_CLASS_SHIFT, "none"), v & 0xFF


def ioprio_set(tid: int, io_class: str, level: int) -> None:
    """ioprio_set(IOPRIO_WHO_PROCESS, tid, class<<13 | level) for one thread."""
    value = (IO_CLASS_NUM[io_class] << _IOPRIO_CLASS_SHIFT) | (level if io_class != "none" else 0)
    _syscall(tid, "ioprio_set", ctypes.c_int(_IOPRIO_WHO_PROCESS), ctypes.c_int(tid), ctypes.c_int(value))


def get_policy(tid: int) -> int:
    """The scheduling policy number of one thread (without SCHED_RESET_ON_FORK)."""
    return _os_call(tid, "sched_getscheduler", lambda: os.sched_getscheduler(tid)) & ~0x40000000


def set_policy(tid: int, policy: int) -> None:
    """sched_setscheduler for a non-realtime policy; the kernel keeps the thread's nice."""
    _os_call(tid, "sched_setscheduler", lambda: os.sched_setscheduler(tid, policy, os.sched_param(0)))


class _SchedAttr(ctypes.Structure):
    _fields_ = [("size", ctypes.c_uint32), ("sched_policy", ctypes.c_uint32),
                ("sched_flags", ctypes.c_uint64), ("sched_nice", ctypes.c_int32),
                ("sched_priority", ctypes.c_uint32), ("sched_runtime", ctypes.c_uint64),
                ("sched_deadline", ctypes.c_uint64), ("sched_period", ctypes.c_uint64),
                ("sched_util_min", ctypes.c_uint32), ("sched_util_max", ctypes.c_uint32)]


def sched_getattr(tid: int) -> tuple[int, int, int]:
    """(policy, nice, sched_runtime ns) of one thread; for fair tasks runtime is the slice."""
    attr = _SchedAttr()
    _syscall(tid, "sched_getattr", ctypes.c_int(tid), ctypes.byref(attr),
             ctypes.c_uint(ctypes.sizeof(attr)), ctypes.c_uint(0))
    return attr.sched_policy, attr.sched_nice, attr.sched_runtime


def sched_setattr(tid: int, policy: int, nice: int, runtime_ns: int) -> None:
    """Set policy, nice and the EEVDF custom slice together (sched_setattr sets all three at once)."""
    attr = _SchedAttr(size=ctypes.sizeof(_SchedAttr), sched_policy=policy, sched_nice=nice,
                      sched_runtime=runtime_ns)
    _syscall(tid, "sched_setattr", ctypes.c_int(tid), ctypes.byref(attr), ctypes.c_uint(0))


def probe_slice() -> int | None:
    """The default slice (ns) if this kernel honours a custom EEVDF slice (6.12+), else None.

    Probed on the calling thread and put back. A kernel before 6.12 silently ignores
    sched_runtime for SCHED_OTHER, so support is judged by reading the value back.
    sched_getattr reports the current slice even when it is not custom, so the value
    read after writing 0 (the "no custom slice" request) is the default to compare with.
    """
    tid = threading.get_native_id()
    try:
        policy, nice, original = sched_getattr(tid)
        if policy not in POLICY_NAME:
            return None
        sched_setattr(tid, policy, nice, 0)
        default = sched_getattr(tid)[2]
        probe = 2_000_000 if default != 2_000_000 else 3_000_000
        sched_setattr(tid, policy, nice, probe)
        ok = sched_getattr(tid)[2] == probe
        sched_setattr(tid, policy, nice, 0 if original == default else original)
        return default if ok and default else None
    except (OSError, AccessDenied, ProcessGone):
        return None


def read_autogroup(pid: int) -> tuple[str, int] | None:
    """(autogroup name, its nice) from /proc/PID/autogroup; None without autogroup."""
    def read() -> str:
        with open(f"{_proc(pid)}/autogroup") as f:
            return f.read()
    try:
        text = _os_call(pid, "autogroup", read)
    except OSError:
        return None  # CONFIG_SCHED_AUTOGROUP=n, or the task is not in an autogroup
    parts = text.split()
    return (parts[0], int(parts[2])) if len(parts) >= 3 else None


def write_autogroup(pid: int, nice: int) -> None:
    """Set the nice of the autogroup (session) `pid` belongs to; it weighs the whole group."""
    def write() -> None:
        with open(f"{_proc(pid)}/autogroup", "w") as f:
            f.write(str(nice))
    _os_call(pid, "autogroup", write)
