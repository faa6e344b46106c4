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
_MAX = ["max_wait_ns", "rss_bytes"]
_LAST = ["nthreads"]  # the collector reads it at the window's end
_FIRST = ["host", "pid", "start_time", "ppid", "comm", "exe", "uid", "cgroup", "label", "source"]
assert set(_SUM + _MAX + _LAST + _FIRST + ["t_start", "insufficient", "exited"]) >= set(COLUMNS) - set(IO_COLUMNS) - {"rss_bytes"}


def reaggregate(frame: pd.DataFrame, from_s: float, to_s: float) -> pd.DataFrame:
    """Fold windows of `from_s` seconds into windows of `to_s` (an integer multiple), per process.

    The result is what the collector would have written with `to_s` windows. Counts and times
    add up, the longest wait is the largest of its parts, a process's label and source are
    kept, and every row spans its whole long window (`dur_s`, `t_start`). The collector writes
    no row for a window in which a process did nothing, so the sleep of such a quiet short
    window is in no row; it is added back (every thread asleep for the window) for each quiet
    window in which the process was alive: from its first row until its exit, or the trace's
    end if it did not exit. (A process already running but quiet when the trace began counts
    from its first row.) Windows are grouped by count from the trace's first window.
    """
    ratio = to_s / from_s
    if abs(ratio - round(ratio)) > 1e-6 or round(ratio) < 1:
        raise TrainingDataError(f"cannot make {to_s:g} s windows from {from_s:g} s ones (not a whole multiple)")
    if round(ratio) == 1 or frame.empty:
        return frame
    r = int(round(ratio))
    # Windows of one trace share their t_start; real windows jitter around their nominal
    # length, so count windows (the rank of t_start) rather than seconds.
    starts, rank = np.unique(frame["t_start"].to_numpy(), return_inverse=True)
    order = np.argsort(rank, kind="stable")  # time order, so a group's last row is its latest
    frame, rank = frame.iloc[order], rank[order]
    short_dur = np.zeros(len(starts))
    np.maximum.at(short_dur, rank, frame["dur_s"].to_numpy(dtype=np.float64))
    bucket = (rank // r).astype(np.int64)
    long_dur = np.bincount(np.arange(len(starts)) // r, weights=short_dur)
    # NaN labels would be dropped by groupby keys; they are values here, not keys.
    keys = [frame["host"], frame["pid"], frame["start_time"], pd.Series(bucket, index=frame.index, name="_b")]
    g = frame.groupby(keys, sort=False)
    parts = {
        **{c: g[c].sum() for c in _SUM if c != "dur_s"},
        **{c: g[c].max() for c in _MAX},
        **{c: g[c].last() for c in _LAST},
        **{c: g[c].first() for c in _FIRST if c not in ("host", "pid", "start_time")},
        "exited": g["exited"].any(),
        "_present": g["t_start"].size(),
    }
    out = pd.DataFrame(parts).reset_index()
    # Each process's life in short-window numbers: first row to exit (or the trace's end).
    life = frame.assign(_rank=rank).groupby(["host", "pid", "start_time"], sort=False).agg(
        _first=("_rank", "min"), _last=("_rank", "max"), _exited=("exited", "any"))
    life["_last"] = life["_last"].where(life["_exited"], len(starts) - 1)
    out = out.join(life[["_first", "_last"]], on=["host", "pid", "start_time"])
    b = out["_b"].to_numpy(dtype=np.int64)
    lo = np.maximum(b * r, out["_first"].to_numpy(dtype=np.int64))
    hi = np.minimum(np.minimum(b * r + r, len(starts)) - 1, out["_last"].to_numpy(dtype=np.int64))
    quiet = np.maximum(hi - lo + 1 - out["_present"].to_numpy(dtype=np.int64), 0)
    threads = np.maximum(out["nthreads"].to_numpy(dtype=np.int64), 1)
    out["sleep_ns"] = out["sleep_ns"].to_numpy(dtype=np.int64) + np.rint(quiet * from_s * 1e9).astype(np.int64) * threads
    out["dur_s"] = long_dur[b]
    out["t_start"] = starts[b * r]
    out["insufficient"] = [is_insufficient(int(s), int(n)) for s, n in zip(out["switches_in"], out["syscalls"])]
    out["label"] = out["label"].where(out["label"].notna(), None)
    out["source"] = out["source"].where(out["source"].notna(), None)
    return out.loc[:, list(COLUMNS)].sort_values(["t_start", "pid"], kind="stable").reset_index(drop=True)
