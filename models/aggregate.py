"""Re-aggregating short windows into longer ones (0.5 s recordings → 1, 2, 5, 10 s)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from procsift.collector.schema import (
    CATEGORY_COLUMNS, COLUMNS, IO_COLUMNS, SCHED_COLUMNS, SOCKET_COLUMNS, SYSCALL_COLUMNS,
    is_insufficient,
)
from procsift.models.errors import TrainingDataError

__all__ = ["reaggregate"]

_SUM = [c for c in SCHED_COLUMNS if c != "max_wait_ns"] + ["read_bytes", "write_bytes", "rchar", "wchar", "syscalls"] + \
    list(SOCKET_COLUMNS) + list(CATEGORY_COLUMNS) + list(SYSCALL_COLUMNS) + ["dur_s"]
_MAX = ["max_wait_ns", "rss_bytes", "nthreads"]
_FIRST = ["host", "pid", "start_time", "ppid", "comm", "exe", "uid", "cgroup", "label", "source"]
assert set(_SUM + _MAX + _FIRST + ["t_start", "insufficient", "exited"]) >= set(COLUMNS) - set(IO_COLUMNS) - {"rss_bytes"}


def reaggregate(frame: pd.DataFrame, from_s: float, to_s: float) -> pd.DataFrame:
    """Fold windows of `from_s` seconds into windows of `to_s` (an integer multiple), per process.

    Counts and times add up, the longest wait is the largest of its parts, a process's
    label and source are kept. Windows are grouped by count from the trace's first window.
    """
    ratio = to_s / from_s
    if abs(ratio - round(ratio)) > 1e-6 or round(ratio) < 1:
        raise TrainingDataError(f"cannot make {to_s:g} s windows from {from_s:g} s ones (not a whole multiple)")
    if round(ratio) == 1 or frame.empty:
        return frame
    # Windows of one trace share their t_start; real windows jitter around their nominal
    # length, so count windows (the rank of t_start) rather than seconds.
    _, rank = np.unique(frame["t_start"].to_numpy(), return_inverse=True)
    bucket = (rank // int(round(ratio))).astype(np.int64)
    # NaN labels would be dropped by groupby keys; they are values here, not keys.
    keys = [frame["host"], frame["pid"], frame["start_time"], pd.Series(bucket, index=frame.index, name="_b")]
    g = frame.groupby(keys, sort=False)
    parts = {
        "t_start": g["t_start"].min(),
        **{c: g[c].sum() for c in _SUM},
        **{c: g[c].max() for c in _MAX},
        **{c: g[c].first() for c in _FIRST if c not in ("host", "pid", "start_time")},
        "exited": g["exited"].any(),
    }
    out = pd.DataFrame(parts).reset_index()
    out["insufficient"] = [is_insufficient(int(s), int(n)) for s, n in zip(out["switches_in"], out["syscalls"])]
    out["label"] = out["label"].where(out["label"].notna(), None)
    out["source"] = out["source"].where(out["source"].notna(), None)
    return out.loc[:, list(COLUMNS)].sort_values(["t_start", "pid"], kind="stable").reset_index(drop=True)
