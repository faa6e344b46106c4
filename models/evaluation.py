"""Grouped cross-validation that holds out whole applications (by `source`), and the scores it yields."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
from sklearn.metrics import confusion_matrix, precision_recall_fscore_support

from procsift.collector.schema import LABELS
from procsift.models.errors import TrainingDataError
from procsift.models.kinds import fit_pipeline, input_columns, trainable_rows
from procsift.models.pos import HTML
from procsift.models.smoothing import Smoother

__all__ = ["cross_validate", "score_predictions", "smooth_labels", "bootstrap_macro_f1"]

FoldProgress = Callable[[int, int, str], None]


def score_predictions(y_true: np.ndarray, y_pred: np.ndarray, labels: list[str]) -> dict[str, Any]:
    """Per-class precision/recall/F1, macro-F1, accuracy and the confusion matrix (rows = truth)."""
    y_true = np.asarray(y_true, dtype=object)
    y_pred = np.asarray(y_pred, dtype=object)
    p, r, f, s = precision_recall_fscore_support(y_true, y_pred, labels=labels, zero_division=0)
    return {
        "labels": labels,
        "per_class": {lab: {"precision": float(p[i]), "recall": float(r[i]), "f1": float(f[i]),
                            "support": int(s[i])} for i, lab in enumerate(labels)},
        "macro_f1": float(np.mean(f)),
        "accuracy": float(np.mean(y_true == y_pred)) if len(y_true) else 0.0,
        "confusion": confusion_matrix(y_true, y_pred, labels=labels).tolist(),
        "windows": int(len(y_true)),
    }


def _macro_f1(counts: np.ndarray) -> float:
    """Macro-F1 from a truth x (labels + "other") count matrix; "other" predictions only miss."""
    k = counts.shape[0]
    tp = np.diag(counts[:, :k]).astype(np.float64)
    denom = counts.sum(axis=1) + counts[:, :k].sum(axis=0)
    f1 = np.divide(2 * tp, denom, out=np.zeros_like(tp), where=denom > 0)
    return float(f1.mean())


def bootstrap_macro_f1(y_true: np.ndarray, y_pred: np.ndarray, groups: np.ndarray, labels: list[str],
                       n_boot: int = 2000, seed: int = 0, level: float = 0.95) -> tuple[float, float]:
    """Percentile interval of macro-F1 when the *applications* are resampled.

    The held-out predictions are fixed; each replicate draws, within every label, as many
    applications (`groups`) as that label has, with replacement, and scores the windows of the
    drawn applications together. It says how much the figure depends on which applications
    happen to be in the data set (the dominant uncertainty with ~30 of them), not on the
    model's own randomness. Predictions outside `labels` count as misses.
    """
    y_true = np.asarray(y_true, dtype=object)
    y_pred = np.asarray(y_pred, dtype=object)
    groups = np.asarray(groups, dtype=object)
    index = {lab: i for i, lab in enumerate(labels)}
    k = len(labels)
    apps, app_of = np.unique(groups.astype(str), return_inverse=True)
    truth = np.array([index[t] for t in y_true])
    pred = np.array([index.get(p, k) for p in y_pred])
    per_app = np.zeros((len(apps), k, k + 1), dtype=np.int64)
    np.add.at(per_app, (app_of, truth, pred), 1)
    app_label = np.empty(len(apps), dtype=object)
    app_label[app_of] = y_true
    rng = np.random.default_rng(seed)
    by_label = [idx for lab in labels if len(idx := np.flatnonzero(app_label == lab))]
    stats = np.empty(n_boot)
    for b in range(n_boot):
        pick = np.concatenate([rng.choice(idx, size=len(idx), replace=True) for idx in by_label])
        stats[b] = _macro_f1(per_app[pick].sum(axis=0))
    lo, hi = np.quantile(stats, [(1 - level) / 2, (1 + level) / 2])
    return float(lo), float(hi)


def smooth_labels(frame: pd.DataFrame, labels: np.ndarray, k: int = 2, n: int = 3) -> np.ndarray:
    """Each window's process-level label after the Smoother has seen it (windows taken in time order)."""
    order = np.argsort(frame["t_start"].to_numpy(), kind="stable")
    keys = list(zip(frame["pid"].to_numpy(), frame["start_time"].to_numpy()))
    insufficient = frame["insufficient"].to_numpy(dtype=bool)
    sm = Smoother(k, n)
    out = np.empty(len(frame), dtype=object)
    for i in order:
        out[i] = sm.update(keys[i], labels[i], None, bool(insufficient[i])) or labels[i]
    return out


def cross_validate(kind: str, frame: pd.DataFrame, random_state: int = 0,
                   progress: FoldProgress | None = None, train_frame: pd.DataFrame | None = None) -> dict[str, Any]:
    """Leave-one-application-out scores of a model of `kind` on labelled, active windows.

    Each fold trains on every source but one and predicts the held-out source's windows.
    `pos` labels html-serving vs. not, so it is scored on that binary split. `train_frame`:
    what the folds learn from, when not `frame` itself (e.g. the same traces cut at every
    offset, `TraceSet.fit_frame`); the held-out application is left out of it too.
    """
    rows = trainable_rows(frame)
    rows = rows[rows["source"].notna()].reset_index(drop=True)
    sources = sorted(rows["source"].unique())
    if len(sources) < 2:
        raise TrainingDataError("cross-validation needs labelled windows from at least two sources")
    truth = rows["label"].to_numpy(dtype=object)
    if kind == "pos":
        other = "background"
        truth = np.where(truth == HTML, HTML, other)
        labels = sorted({HTML, other})
    else:
        labels = [lab for lab in LABELS if lab in set(truth)]
    pred = np.empty(len(rows), dtype=object)
    folds = []
    untrainable: dict[str, str] = {}
    for i, src in enumerate(sources):
        if progress:
            progress(i, len(sources), str(src))
        test = (rows["source"] == src).to_numpy()
        learn = frame if train_frame is None else train_frame
        train = learn[learn["source"] != src]  # fit_pipeline keeps the rows its kind learns from
        try:
            pipe = fit_pipeline(kind, train, random_state)
        except TrainingDataError as err:
            pred[test] = "untrainable"
            untrainable[str(src)] = str(err)
            continue
        X = rows.loc[test, list(input_columns(kind))].to_numpy(dtype=np.float64)
        pred[test] = pipe.predict(X)
        held = rows[test]
        folds.append({"source": str(src), "label": str(held["label"].iloc[0]), "windows": int(test.sum()),
                      "accuracy": float(np.mean(pred[test] == truth[test]))})
    if progress:
        progress(len(sources), len(sources), "done")
    if not folds:
        why = next(iter(untrainable.values()))
        raise TrainingDataError(f"no held-out application could be scored: with any one of the {len(sources)} "
                                f"applications left out, the rest cannot be trained on ({why}); evaluate needs "
                                "windows of at least two labels besides each held-out application")
    scores = score_predictions(truth, pred, labels)
    scores["untrainable"] = sorted(untrainable)
    smoothed = np.empty(len(rows), dtype=object)
    for src in sources:
        m = (rows["source"] == src).to_numpy()
        smoothed[m] = smooth_labels(rows[m], pred[m])
    scores["smoothed_macro_f1"] = score_predictions(truth, smoothed, labels)["macro_f1"]
    scores["macro_f1_ci95"] = list(bootstrap_macro_f1(truth, pred, rows["source"].to_numpy(dtype=object), labels))
    scores["folds"] = folds
    scores["kind"] = kind
    scores["binary"] = kind == "pos"
    return scores
