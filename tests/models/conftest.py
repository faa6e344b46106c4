"""Synthetic Window frames for the models' unit tests (pure logic; real data lives in datasets/)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from procsift.collector.schema import Window
from procsift.collector.traceio import windows_to_frame


def _window(kind: str, rng: np.random.Generator, pid: int, t: float, dur: float, **kw: object) -> Window:
    """One window shaped like `kind` (rough caricatures of the real behaviours, with noise)."""
    j = lambda x: max(0, int(x * rng.uniform(0.7, 1.3)))  # noqa: E731
    if kind == "html-serving":
        req = j(400 * dur)
        sys = {"epoll_wait": req, "accept4": req, "recvfrom": req, "sendfile": req, "writev": req,
               "openat": req, "close": 2 * req, "newfstatat": req}
        sched = dict(run_ns=j(2e7 * dur), runq_ns=j(1e6 * dur), sleep_ns=j(9e8 * dur), switches_in=req,
                     voluntary=req, involuntary=j(2), max_wait_ns=j(8e7), run_wait_transitions=2 * req,
                     wakeups=req, wakes_others=j(3))
    elif kind == "background":
        sys = {"read": j(300 * dur), "write": j(300 * dur), "mmap": j(5), "brk": j(10)}
        sched = dict(run_ns=j(9e8 * dur), runq_ns=j(5e7 * dur), sleep_ns=j(1e6), block_ns=j(2e7),
                     switches_in=j(60 * dur), voluntary=j(10 * dur), involuntary=j(50 * dur), max_wait_ns=j(3e6),
                     run_wait_transitions=j(20 * dur), wakeups=j(10 * dur))
    else:
        keys = j(8 * dur)
        sys = {"read": keys, "write": 2 * keys, "pselect6": keys, "ioctl": keys, "rt_sigprocmask": 2 * keys}
        sched = dict(run_ns=j(3e6 * dur), runq_ns=j(1e5), sleep_ns=j(9.9e8 * dur), switches_in=keys + 1,
                     voluntary=keys + 1, involuntary=0, max_wait_ns=j(4e8), run_wait_transitions=2 * keys + 2,
                     wakeups=keys + 1, wakes_others=keys)
    return Window(host="h", t_start=t, dur_s=dur, pid=pid, start_time=pid * 10, syscalls=sys, **sched, **kw)  # type: ignore[arg-type]


def make_frame(n: int = 40, dur: float = 1.0, seed: int = 0, sources_per_label: int = 2,
               comm: str | None = None, labelled: bool = True) -> pd.DataFrame:
    """`n` windows per (label, source), one process per source, 3 labels."""
    rng = np.random.default_rng(seed)
    rows = []
    pid = 100
    for label in ("interactive", "background", "html-serving"):
        for s in range(sources_per_label):
            pid += 1
            for i in range(n):
                rows.append(_window(label, rng, pid, 1000.0 + i * dur, dur, comm=comm or f"{label[:4]}{s}",
                                    label=label if labelled else None,
                                    source=f"{label}-app{s}" if labelled else None))
    return windows_to_frame(rows)


@pytest.fixture(scope="session")
def frame() -> pd.DataFrame:
    """A labelled synthetic frame: 3 labels x 2 applications x 40 windows of 1 s."""
    return make_frame()
