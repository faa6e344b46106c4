"""Plain data handed from a probe (BPF or /proc) to the aggregator: cumulative per-task figures."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, fields

import numpy as np

__all__ = ["TaskSample", "Drain", "ProcInfo", "TASK_DTYPE", "samples_to_array",
           "STATE_RUNNING", "STATE_RUNNABLE", "STATE_SLEEP", "STATE_BLOCK", "STATE_DEAD"]

# Task states as collector.bpf.c records them (DEAD: switched out for good; no span accrues).
STATE_UNKNOWN, STATE_RUNNING, STATE_RUNNABLE, STATE_SLEEP, STATE_BLOCK, STATE_DEAD = range(6)


@dataclass(frozen=True, slots=True)
class TaskSample:
    """One task's cumulative figures since the probe first saw it (times in ns)."""

    tid: int
    tgid: int = 0          # 0: not known yet (never seen running)
    ppid: int = 0
    state: int = STATE_UNKNOWN
    ts: int = 0            # monotonic ns when `state` began
    run_ns: int = 0
    runq_ns: int = 0
    sleep_ns: int = 0
    block_ns: int = 0
    switches_in: int = 0
    voluntary: int = 0
    involuntary: int = 0
    transitions: int = 0
    wakeups: int = 0
    wakes_others: int = 0
    start_ns: int = 0      # boot-clock ns at fork, 0 when it predates the probe
    max_wait_ns: int = 0   # longest wait that ended in the window just closed
    exited: bool = False
    comm: str = ""         # set at exit
    uid: int = -1          # set at exit
    # The kernel's own counters (/proc/PID/schedstat: on-CPU ns, run-queue wait ns, dispatches)
    # as of the task's last switch-out, when k_seen; ev_*: what switch-in events credited since.
    k_seen: bool = False
    k_exec: int = 0
    k_delay: int = 0
    k_pcount: int = 0
    ev_runq: int = 0
    ev_sw: int = 0


_NUMERIC = [f.name for f in fields(TaskSample) if f.name != "comm"]
TASK_DTYPE = np.dtype([(name, np.int64) for name in _NUMERIC])
"""One TaskSample per array row: the form probes hand over (BPF fills it without Python loops)."""


def samples_to_array(samples: Sequence[TaskSample]) -> tuple[np.ndarray, dict[int, str]]:
    """TaskSamples as a TASK_DTYPE array, plus the comm of those that carry one (tid -> comm)."""
    arr = np.zeros(len(samples), dtype=TASK_DTYPE)
    for i, s in enumerate(samples):
        arr[i] = tuple(int(getattr(s, n)) for n in _NUMERIC)
    return arr, {s.tid: s.comm for s in samples if s.comm}


@dataclass(frozen=True, slots=True)
class Drain:
    """Everything a probe hands over when a window closes."""

    now_ns: int
    tasks: np.ndarray                          # TASK_DTYPE, cumulative per task
    syscalls: dict[int, dict[int, int]] = field(default_factory=dict)  # tgid -> {nr: count}
    comms: dict[int, str] = field(default_factory=dict)                # tid -> comm (exited tasks)
    dropped: int = 0
    counts_syscalls: bool = True
    # tgid -> this window's socket figures, in SOCKET_COLUMNS order
    sockets: dict[int, tuple[int, ...]] = field(default_factory=dict)

    @classmethod
    def of(cls, now_ns: int, samples: Sequence[TaskSample], **kw: object) -> "Drain":
        """A Drain built from TaskSamples (the /proc probe and tests)."""
        arr, comms = samples_to_array(samples)
        return cls(now_ns=now_ns, tasks=arr, comms=comms, **kw)  # type: ignore[arg-type]


@dataclass(frozen=True, slots=True)
class ProcInfo:
    """What /proc says about a process (thread group) at one moment."""

    pid: int
    start_time: int      # clock ticks since boot: field 22 of /proc/PID/stat
    ppid: int
    comm: str
    exe: str
    uid: int
    nthreads: int
    cgroup: str
    rss_bytes: int
    read_bytes: int      # cumulative, from /proc/PID/io
    write_bytes: int
    rchar: int = 0       # cumulative bytes through read/write-like calls (sockets, sendfile too)
    wchar: int = 0
