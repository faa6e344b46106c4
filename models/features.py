"""The shared feature transform: rates per second, syscall-category proportions, log1p of times and rates.

Three feature sets: "full" (every feature; `em`), "tree" (TREE_FEATURE_NAMES: scheduler and I/O
figures plus a few coarse syscall signals; the full per-category mix lets a tree memorise
programs instead of behaviour) and "proc" (what the /proc fallback collector can measure).

Features are behaviour only. Identity columns (comm, exe, uid, cgroup, pid) never enter:
a copy of a program under another name gets the same features.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.utils.validation import check_is_fitted

from procsift.collector.schema import CATEGORY_COLUMNS, SCHED_COLUMNS, SOCKET_COLUMNS
from procsift.collector.syscalls import CATEGORIES

__all__ = [
    "RAW_COLUMNS", "FEATURE_NAMES", "PROC_FEATURE_NAMES", "TREE_FEATURE_NAMES", "FEATURE_SETS",
    "FeatureTransform", "raw_matrix", "raw_vector",
]

RAW_COLUMNS: tuple[str, ...] = (
    ("dur_s", "nthreads") + SCHED_COLUMNS + ("read_bytes", "write_bytes", "syscalls") + CATEGORY_COLUMNS
    + ("rchar", "wchar") + SOCKET_COLUMNS
)
"""Trace columns the transform reads, in the order of its input matrix."""

_COUNT_RATES = ("switches_in", "voluntary", "involuntary", "run_wait_transitions", "wakeups", "wakes_others")
_TIMES = ("run_ns", "runq_ns", "sleep_ns", "block_ns")
_ALIVE_RATES = ("run_us", "runq_us", "switches_in", "voluntary", "involuntary", "read_bytes", "write_bytes",
                "rchar", "wchar", "futex", "net_calls")

FEATURE_NAMES: tuple[str, ...] = (
    tuple(f"prop_{c}" for c in CATEGORIES)
    + tuple(f"log_rate_{c}" for c in CATEGORIES)
    + ("log_rate_syscalls", "log_syscalls_per_switch")
    + tuple(f"log_{t[:-3]}_us_per_s" for t in _TIMES)
    + tuple(f"share_{t[:-3]}" for t in _TIMES)
    + ("log_max_wait_ms",)
    + tuple(f"log_rate_{c}" for c in _COUNT_RATES)
    + ("involuntary_share", "log_run_us_per_switch", "log_rate_read_bytes", "log_rate_write_bytes")
    + ("uses_network", "log_file_calls_per_wakeup")
    + ("log_rate_rchar", "log_rate_wchar", "log_io_bytes_per_switch", "log_io_bytes_per_call")
    + ("log_rate_net_calls", "net_call_share", "log_net_tx_bytes_per_call",
       "log_net_tx_bytes_per_rx", "log_rate_unix_calls", "log_idle_max_wait_ms")
    + tuple(f"log_{c}_per_alive_s" for c in _ALIVE_RATES)
)
"""Every feature the transform can produce, in output order."""

PROC_FEATURE_NAMES: tuple[str, ...] = (
    "log_run_us_per_s", "log_runq_us_per_s", "log_rate_switches_in", "log_rate_voluntary",
    "log_rate_involuntary", "involuntary_share", "log_run_us_per_switch",
    "log_rate_read_bytes", "log_rate_write_bytes",
    "log_rate_rchar", "log_rate_wchar", "log_io_bytes_per_switch",
)
"""The features the /proc fallback collector can feed (it has no syscall counts, no sleep/block split)."""

PER_ALIVE: dict[str, str] = {
    (f"log_{c}_per_s" if c.endswith("_us") else f"log_rate_{c}"): f"log_{c}_per_alive_s" for c in _ALIVE_RATES
}
"""A rate per second of window to the same rate per second the process was alive."""

TREE_FEATURE_NAMES: tuple[str, ...] = tuple(
    PER_ALIVE.get(n, n) for n in PROC_FEATURE_NAMES if n != "log_io_bytes_per_switch"
) + (
    "prop_ioctl", "log_futex_per_alive_s", "log_file_calls_per_wakeup",
    "log_io_bytes_per_call", "log_idle_max_wait_ms", "log_net_tx_bytes_per_call",
    "log_net_calls_per_alive_s",
)
"""The decision tree's features: the scheduler and byte figures of the /proc fallback (less
bytes per switch) plus coarse syscall signals (the share of ioctl, e.g. terminal control;
futex rate, i.e. thread hand-offs; file calls per wake-up), bytes per
read/write/send/recv call (request size: small pages vs. large files), the longest single
wait of a process that was mostly idle (think time, not a thread waiting on its sibling), and
the socket figures (IPv4/IPv6 calls per second and bytes per send, whatever syscall made
them). Rates are per second the process was alive (PER_ALIVE): a compiler pass that lived
0.3 s of a 5 s window ran flat out, it did not idle at 6 %. Chosen by greedy selection on the
leave-one-application-out macro-F1 at 1, 2 and 5 s (bench/CLASSIFIER.md), so the figures for
this set are optimistic. `uses_network` (any network-named syscall) is left out: the kernel's
socket counts measure the same thing directly, and the name proxy is 0 for servers that read
their sockets with read() (node)."""

FEATURE_SETS: dict[str, tuple[str, ...]] = {
    "full": FEATURE_NAMES, "tree": TREE_FEATURE_NAMES, "proc": PROC_FEATURE_NAMES,
}
"""Feature set name to the features it keeps, in output order."""

_IDX = {c: i for i, c in enumerate(RAW_COLUMNS)}


def raw_matrix(frame: pd.DataFrame) -> np.ndarray:
    """The transform's input from a trace frame.

    Returns
    -------
    ndarray of shape (n_windows, len(RAW_COLUMNS)), float64
    """
    return frame.loc[:, list(RAW_COLUMNS)].to_numpy(dtype=np.float64, copy=False)


def raw_vector(row: Mapping[str, object] | pd.Series) -> np.ndarray:
    """The transform's input for one window (a trace row or Window.as_record()).

    Returns
    -------
    ndarray of shape (1, len(RAW_COLUMNS)), float64
    """
    return np.array([[float(row[c]) for c in RAW_COLUMNS]], dtype=np.float64)  # type: ignore[arg-type]


def _safe_div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    out = np.zeros_like(a, dtype=np.float64)
    np.divide(a, b, out=out, where=b > 0)
    return out


def compute_features(raw: np.ndarray) -> np.ndarray:
    """Every feature in FEATURE_NAMES from raw rows.

    Parameters
    ----------
    raw : ndarray of shape (n_windows, len(RAW_COLUMNS))

    Returns
    -------
    ndarray of shape (n_windows, len(FEATURE_NAMES))
    """
    raw = np.asarray(raw, dtype=np.float64)
    col = lambda name: raw[:, _IDX[name]]  # noqa: E731
    dur = np.maximum(col("dur_s"), 1e-3)
    syscalls = col("syscalls")
    cats = raw[:, [_IDX[c] for c in CATEGORY_COLUMNS]]
    times = raw[:, [_IDX[t] for t in _TIMES]]
    counts = raw[:, [_IDX[c] for c in _COUNT_RATES]]
    switches = col("switches_in")
    net = cats[:, [CATEGORIES.index(c) for c in ("net_accept", "net_send", "net_recv")]].sum(axis=1)
    file_calls = cats[:, [CATEGORIES.index(c) for c in ("file_read", "file_write", "open_stat")]].sum(axis=1)
    io_calls = cats[:, [CATEGORIES.index(c) for c in ("file_read", "file_write", "net_send", "net_recv")]].sum(axis=1)
    io_bytes = np.maximum(col("rchar"), col("wchar"))  # sendfile counts its bytes in both
    net_calls = col("net_tx") + col("net_rx")
    # Share of the window the process did not run (0 for one busy thread or more): a long
    # wait of an idle process is think time, that of a busy one is a thread waiting on another.
    idle = 1.0 - np.minimum(col("run_ns") / 1e9 / dur, 1.0)
    # Seconds of the window the process was alive (born or exited inside it: less than the
    # window): its threads' accounted time per thread. Only BPF rows account for sleep; rows
    # without syscall counts (/proc) keep the window. Exited threads are not in nthreads, so a
    # many-threaded process that exited is credited too long a life (never beyond the window).
    accounted = times.sum(axis=1) / 1e9 / np.maximum(col("nthreads"), 1.0)
    alive = np.where(syscalls > 0, np.clip(accounted, 1e-3, dur), dur)
    amounts = {"run_us": col("run_ns") / 1e3, "runq_us": col("runq_ns") / 1e3, "switches_in": switches,
               "futex": cats[:, CATEGORIES.index("futex")], "net_calls": net_calls}
    per_alive = np.column_stack([amounts[c] if c in amounts else col(c) for c in _ALIVE_RATES]) / alive[:, None]
    parts = [
        _safe_div(cats, syscalls[:, None]),
        np.log1p(cats / dur[:, None]),
        np.log1p(syscalls / dur)[:, None],
        np.log1p(_safe_div(syscalls, switches))[:, None],
        np.log1p(times / 1e3 / dur[:, None]),
        _safe_div(times, times.sum(axis=1)[:, None]),
        np.log1p(col("max_wait_ns") / 1e6)[:, None],
        np.log1p(counts / dur[:, None]),
        _safe_div(col("involuntary"), col("voluntary") + col("involuntary"))[:, None],
        np.log1p(_safe_div(col("run_ns") / 1e3, switches))[:, None],
        np.log1p(col("read_bytes") / dur)[:, None],
        np.log1p(col("write_bytes") / dur)[:, None],
        (net > 0).astype(np.float64)[:, None],
        np.log1p(_safe_div(file_calls, col("wakeups")))[:, None],
        np.log1p(col("rchar") / dur)[:, None],
        np.log1p(col("wchar") / dur)[:, None],
        np.log1p(_safe_div(io_bytes, switches))[:, None],
        np.log1p(_safe_div(io_bytes, io_calls))[:, None],
        np.log1p(net_calls / dur)[:, None],
        np.minimum(_safe_div(net_calls, syscalls), 1.0)[:, None],
        np.log1p(_safe_div(col("net_tx_bytes"), col("net_tx")))[:, None],
        np.log1p(_safe_div(col("net_tx_bytes"), col("net_rx")))[:, None],
        np.log1p(col("unix_calls") / dur)[:, None],
        np.log1p(col("max_wait_ns") / 1e6 * idle)[:, None],
        np.log1p(per_alive),
    ]
    out = np.hstack(parts)
    np.maximum(out, 0.0, out=out)  # counters never go negative; clamp corrupt rows instead of NaN
    return out


class FeatureTransform(TransformerMixin, BaseEstimator):
    """Raw trace columns (RAW_COLUMNS) to behaviour features; stateless.

    Parameters
    ----------
    feature_set : {"full", "tree", "proc"}
        "full": every feature (BPF rows); "tree": TREE_FEATURE_NAMES, the decision tree's subset;
        "proc": only what the /proc fallback collector can measure.
    """

    def __init__(self, feature_set: str = "full") -> None:
        self.feature_set = feature_set

    def fit(self, X: np.ndarray, y: object = None) -> "FeatureTransform":
        """Check the input width and choose the output columns."""
        if self.feature_set not in FEATURE_SETS:
            raise ValueError(f"feature_set must be one of {', '.join(map(repr, FEATURE_SETS))}, "
                             f"not {self.feature_set!r}")
        X = np.asarray(X)
        if X.ndim != 2 or X.shape[1] != len(RAW_COLUMNS):
            raise ValueError(f"expected {len(RAW_COLUMNS)} raw columns, got shape {X.shape}")
        names = FEATURE_SETS[self.feature_set]
        self.columns_ = np.array([FEATURE_NAMES.index(n) for n in names])
        self.n_features_in_ = X.shape[1]
        return self

    def transform(self, X: np.ndarray) -> np.ndarray:
        """Features of each row.

        Parameters
        ----------
        X : ndarray of shape (n_windows, len(RAW_COLUMNS))

        Returns
        -------
        ndarray of shape (n_windows, n_features)
        """
        check_is_fitted(self, "columns_")
        return compute_features(X)[:, self.columns_]

    def get_feature_names_out(self, input_features: object = None) -> np.ndarray:
        """Names of the output features, in order."""
        check_is_fitted(self, "columns_")
        return np.array([FEATURE_NAMES[i] for i in self.columns_], dtype=object)
