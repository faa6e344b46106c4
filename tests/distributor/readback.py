"""Reading placement back from the kernel, independently of the code under test."""

from __future__ import annotations

import ctypes
import os

_libc = ctypes.CDLL(None, use_errno=True)
_NR_IOPRIO_GET, _NR_SCHED_GETATTR = 252, 315  # x86_64


def stat_fields(pid: int, tid: int) -> list[str]:
    """/proc/PID/task/TID/stat as a list indexed so that [n] is field n (1-based, as in proc(5))."""
    text = open(f"/proc/{pid}/task/{tid}/stat").read()
    rest = text[text.rindex(")") + 2:].split()
    return ["", text[:text.index(" ")], "comm"] + rest


def nice(pid: int, tid: int) -> int:
    return int(stat_fields(pid, tid)[19])


def policy(pid: int, tid: int) -> int:
    return int(stat_fields(pid, tid)[41])


def affinity(pid: int, tid: int) -> str:
    for line in open(f"/proc/{pid}/task/{tid}/status"):
        if line.startswith("Cpus_allowed_list:"):
            return line.split()[1]
    raise AssertionError("no Cpus_allowed_list")


def ioprio(tid: int) -> tuple[int, int]:
    """(class, level) from ioprio_get(IOPRIO_WHO_PROCESS, tid): 0 none, 1 rt, 2 be, 3 idle."""
    v = _libc.syscall(_NR_IOPRIO_GET, 1, tid)
    assert v >= 0, os.strerror(ctypes.get_errno())
    return v >> 13, v & 0xFF


def slice_ns(tid: int) -> int:
    buf = (ctypes.c_uint8 * 56)()
    assert _libc.syscall(_NR_SCHED_GETATTR, tid, buf, 56, 0) == 0
    return int.from_bytes(bytes(buf[24:32]), "little")


def autogroup(pid: int) -> tuple[str, int] | None:
    """(name, nice) of the process's autogroup; None in the kernel's default one.

    A session that never called setsid() (e.g. everything under a CI runner started by init)
    shares init's default autogroup, for which /proc/PID/autogroup reads empty
    (kernel/sched/autogroup.c, proc_sched_autogroup_show_task).
    """
    text = open(f"/proc/{pid}/autogroup").read().split()
    return (text[0], int(text[2])) if text else None


def cpu_cgroup(pid: int, controller: str = "cpu") -> str:
    for line in open(f"/proc/{pid}/cgroup"):
        _, ctl, path = line.rstrip("\n").split(":", 2)
        if controller in ctl.split(","):
            return path
    return "/"


def snapshot(pid: int) -> dict[int, tuple[int, int, str, tuple[int, int], int]]:
    """Everything per thread: (nice, policy, affinity, ioprio, slice)."""
    return {int(t): (nice(pid, int(t)), policy(pid, int(t)), affinity(pid, int(t)), ioprio(int(t)),
                     slice_ns(int(t)))
            for t in os.listdir(f"/proc/{pid}/task")}
