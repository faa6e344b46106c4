"""The POS papers' SLP/RW detector (pos-cpu-scheduling-www §3.2) as a scikit-learn estimator.

A process becomes html-serving when it runs after a long wait (longest wait > SLP) and stays
so while it cycles between run and wait few times per wake-up (<= RW); as in the paper, the
flag is per process and sticky until characteristic 2 is lost. Each period, both thresholds are
re-predicted from the per-process log of the processes judged html-serving in that period:
SLP = the smallest of their longest waits, RW = the greatest of their smallest cycle counts.

Left alone that update only ever raises SLP and lowers RW (every judged process already
passed both thresholds), so each period's value is blended with the one learnt in `fit`
(geometric mean for SLP, arithmetic for RW): the paper's rule, anchored so it cannot run away.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils.validation import check_is_fitted

__all__ = ["POS_COLUMNS", "POSDetector"]

POS_COLUMNS: tuple[str, ...] = (
    "pid", "start_time", "t_start", "dur_s", "max_wait_ns", "run_wait_transitions", "wakeups",
    "switches_in",
)
"""Input columns: pid and start_time only key the per-process log; they never decide a label."""

HTML = "html-serving"


def _log(X: np.ndarray) -> pd.DataFrame:
    """The per-window state log: process key, period, longest wait, run/wait cycles per wake-up."""
    X = np.asarray(X, dtype=np.float64)
    wakes = X[:, 6]
    rw = np.divide(X[:, 5], wakes, out=np.full(len(X), np.inf), where=wakes > 0)
    return pd.DataFrame({
        "pid": X[:, 0], "start": X[:, 1], "t": X[:, 2], "wait": X[:, 4], "rw": rw,
        "active": X[:, 7] > 0,
    })


def _period_thresholds(log: pd.DataFrame) -> tuple[float, float] | None:
    """SLP and RW from one period's log of html-serving processes (paper §3.2), or None if empty."""
    if log.empty:
        return None
    per = log.groupby(["pid", "start"]).agg(longest=("wait", "max"), fewest=("rw", "min"))
    per = per[np.isfinite(per["fewest"])]
    if per.empty:
        return None
    return float(per["longest"].min()), float(per["fewest"].max())


class POSDetector(ClassifierMixin, BaseEstimator):
    """Html-serving vs. not, from the longest wait and run/wait cycles per wake-up.

    Parameters
    ----------
    period_s : float
        Length of a period; thresholds are re-predicted after each one.
    other_label : str
        Label given to windows that are not html-serving.
    """

    def __init__(self, period_s: float = 5.0, other_label: str = "background") -> None:
        self.period_s = period_s
        self.other_label = other_label

    def fit(self, X: np.ndarray, y: np.ndarray) -> "POSDetector":
        """Learn the starting SLP and RW: medians of the per-period values over html-serving windows.

        Parameters
        ----------
        X : ndarray of shape (n_windows, len(POS_COLUMNS))
        y : ndarray of shape (n_windows,)
        """
        X = np.asarray(X, dtype=np.float64)
        if X.ndim != 2 or X.shape[1] != len(POS_COLUMNS):
            raise ValueError(f"expected {len(POS_COLUMNS)} columns ({', '.join(POS_COLUMNS)})")
        log = _log(X)
        log = log[(np.asarray(y, dtype=object) == HTML) & log["active"].to_numpy()]
        if log.empty:
            raise ValueError("POS needs html-serving windows to learn SLP and RW")
        periods = np.floor(log["t"] / self.period_s)
        found = [t for _, g in log.groupby(periods) if (t := _period_thresholds(g)) is not None]
        if not found:
            raise ValueError("no html-serving window woke up; cannot learn RW")
        self.slp_ = float(np.median([f[0] for f in found]))
        self.rw_ = float(np.median([f[1] for f in found]))
        self.classes_ = np.array(sorted({self.other_label, HTML}), dtype=object)
        self.n_features_in_ = X.shape[1]
        return self

    def _run(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Replay the windows in time order: per-process flags and the thresholds in force.

        A process is flagged html-serving once it runs after a wait longer than SLP
        (characteristic 1) and loses the flag when its cycles per wake-up exceed RW
        (characteristic 2); quiet windows keep the flag as it was.
        """
        check_is_fitted(self, "slp_")
        log = _log(X)
        n = len(log)
        flags = np.zeros(n, dtype=bool)
        slp_at = np.empty(n)
        rw_at = np.empty(n)
        keys = list(zip(log["pid"].to_numpy(), log["start"].to_numpy()))
        wait, rwv, active = log["wait"].to_numpy(), log["rw"].to_numpy(), log["active"].to_numpy()
        periods = np.floor(log["t"].to_numpy() / self.period_s)
        order = np.lexsort((log["t"].to_numpy(), periods))
        state: dict[tuple[float, float], bool] = {}
        slp, rw = self.slp_, self.rw_
        start = 0
        while start < n:
            stop = start
            while stop < n and periods[order[stop]] == periods[order[start]]:
                stop += 1
            idx = order[start:stop]
            for i in idx:
                on = state.get(keys[i], False)
                if active[i]:
                    on = (on or wait[i] > slp) and rwv[i] <= rw
                state[keys[i]] = on
                flags[i], slp_at[i], rw_at[i] = on, slp, rw
            found = _period_thresholds(log.iloc[idx[flags[idx] & active[idx]]])
            if found is None:
                slp, rw = self.slp_, self.rw_
            else:
                slp = float(np.sqrt(max(self.slp_, 1.0) * max(found[0], 1.0)))
                rw = (self.rw_ + found[1]) / 2
            start = stop
        return flags, slp_at, rw_at

    def thresholds(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """SLP and RW in force for each window (re-predicted period by period, in time order).

        Returns
        -------
        slp, rw : ndarrays of shape (n_windows,)
        """
        _, slp, rw = self._run(X)
        return slp, rw

    def predict_proba(self, X: np.ndarray) -> np.ndarray:
        """1 for the label the rule gives, 0 for the other (the rule has no degrees).

        Returns
        -------
        ndarray of shape (n_windows, 2)
        """
        html, _, _ = self._run(X)
        out = np.zeros((len(html), 2))
        col = int(np.flatnonzero(self.classes_ == HTML)[0])
        out[html, col] = 1.0
        out[~html, 1 - col] = 1.0
        return out

    def predict(self, X: np.ndarray) -> np.ndarray:
        """Label per window, shape (n_windows,)."""
        return self.classes_[np.argmax(self.predict_proba(X), axis=1)]
