"""Re-aggregating short windows into longer ones (0.5 s recordings → 1, 2, 5, 10 s)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from procsift.collector.schema import (
    CATEGORY_COLUMNS, COLUMNS, IO_COLUMNS, SCHED_COLUMNS, SOCKET_COLUMNS, SYSCALL_COLUMNS,
    is_insufficient,
)
from procsift.models.errors import TrainingDataError

__all__ = ["reaggregate", "reaggregate_cuts"]

_SUM = [c for c in SCHED_COLUMNS if c != "max_wait_ns"] + ["read_bytes", "write_bytes", "rchar", "wchar", "syscalls"] + \
    list(SOCKET_COLUMNS) + list(CATEGORY_COLUMNS) + list(SYSCALL_COLUMNS) + ["dur_s"]
_MAX = ["max_wait_ns", "rss_bytes"]
_LAST = ["nthreads"]  # the collector reads it at the window's end
_FIRST = ["host", "pid", "start_time", "ppid", "comm", "exe", "uid", "cgroup", "label", "source"]
assert set(_SUM + _MAX + _LAST + _FIRST + ["t_start", "insufficient", "exited"]) >= set(COLUMNS) - set(IO_COLUMNS) - {"rss_bytes"}


def reaggregate(frame: pd.DataFrame, from_s: float, to_s: float, phase: int = 0) -> pd.DataFrame:
    """Fold windows of `from_s` seconds into windows of `to_s` (an integer multiple), per process.

    The result is what the collector would have written with `to_s` windows. Counts and times
    add up, the longest wait is the largest of its parts, a process's label and source are
    kept, and every row spans its whole long window (`dur_s`, `t_start`). The collector writes
    no row for a window in which a process did nothing, so the sleep of such a quiet short
    window is in no row; it is added back (every thread asleep for the window) for each quiet
    window in which the process was alive: from its first row until its exit, or the trace's
    end if it did not exit. (A process already running but quiet when the trace began counts
    from its first row.) Windows are grouped by their place in time from the trace's first
    window, empty windows included; `frame` is one trace. The `insufficient` flag is
    recomputed by today's rule, even when no folding is needed. `phase` drops the trace's first
    `phase` short windows, so the long windows start that much later (as if the recording had):
    the same data cut at another of the `to_s / from_s` possible offsets.
    """
    ratio = to_s / from_s
    if abs(ratio - round(ratio)) > 1e-6 or round(ratio) < 1:
        raise TrainingDataError(f"cannot make {to_s:g} s windows from {from_s:g} s ones (not a whole multiple)")
    if phase:
        t = frame["t_start"].to_numpy(dtype=np.float64)
        frame = frame[t >= t.min() + (phase - 0.5) * from_s] if len(t) else frame
    if round(ratio) == 1 or frame.empty:
        # The flag follows today's rule, whichever rule the recording was made under.
        return frame.assign(insufficient=is_insufficient(frame["switches_in"], frame["syscalls"], frame["run_ns"]))
    r = int(round(ratio))
    # A window's place on the trace's grid: whole windows since the first. Real windows jitter
    # by milliseconds around their length, and a window in which no recorded process did
    # anything has no row at all but still takes its time (so ranks of t_start won't do).
    t = frame["t_start"].to_numpy(dtype=np.float64)
    t0 = float(t.min())
    slot = np.rint((t - t0) / from_s).astype(np.int64)
    order = np.argsort(slot, kind="stable")  # time order, so a group's last row is its latest
    frame, slot = frame.iloc[order], slot[order]
    n_slots = int(slot[-1]) + 1
    slot_dur = np.full(n_slots, float(from_s))
    slot_dur[slot] = frame["dur_s"].to_numpy(dtype=np.float64)  # as measured, where known
    long_dur = np.bincount(np.arange(n_slots) // r, weights=slot_dur)
    bucket = slot // r
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
    # Each process's life in short windows: its first row to its exit (or the trace's end).
    life = frame.assign(_slot=slot).groupby(["host", "pid", "start_time"], sort=False).agg(
        _first=("_slot", "min"), _last=("_slot", "max"), _exited=("exited", "any"))
    life["_last"] = life["_last"].where(life["_exited"], n_slots - 1)
    out = out.join(life[["_first", "_last"]], on=["host", "pid", "start_time"])
    b = out["_b"].to_numpy(dtype=np.int64)
    lo = np.maximum(b * r, out["_first"].to_numpy(dtype=np.int64))
    hi = np.minimum(np.minimum(b * r + r, n_slots) - 1, out["_last"].to_numpy(dtype=np.int64))
    quiet = np.maximum(hi - lo + 1 - out["_present"].to_numpy(dtype=np.int64), 0)
    threads = np.maximum(out["nthreads"].to_numpy(dtype=np.int64), 1)
    out["sleep_ns"] = out["sleep_ns"].to_numpy(dtype=np.int64) + np.rint(quiet * from_s * 1e9).astype(np.int64) * threads
    out["dur_s"] = long_dur[b]
    out["t_start"] = t0 + b * r * from_s
    out["insufficient"] = is_insufficient(out["switches_in"], out["syscalls"], out["run_ns"])
    out["label"] = out["label"].where(out["label"].notna(), None)
    out["source"] = out["source"].where(out["source"].notna(), None)
    return out.loc[:, list(COLUMNS)].sort_values(["t_start", "pid"], kind="stable").reset_index(drop=True)


def reaggregate_cuts(frame: pd.DataFrame, from_s: float, to_s: float) -> list[pd.DataFrame]:
    """The long windows cut at every offset: `reaggregate` at phase 0, 1, ... (one cut when
    no folding is needed).

    A 5 s window made from 0.5 s windows may start at any of ten offsets; each cut is an
    equally valid copy of the recording. Training on all of them (overlapping windows, as a
    sliding window would give) shows a model ten times as many long windows per application
    without recording anything new, so what it learns depends less on where the cut fell.
    For evaluation the held-out application is still cut at one offset.
    """
    return [reaggregate(frame, from_s, to_s, k) for k in range(max(1, int(round(to_s / from_s))))]
