"""The three model kinds as scikit-learn Pipelines, and how each is fitted on a trace frame."""

from __future__ import annotations

import numpy as np
import pandas as pd
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.tree import DecisionTreeClassifier

from procsift.models.em import EMClassifier
from procsift.models.errors import TrainingDataError
from procsift.models.features import RAW_COLUMNS, FeatureTransform
from procsift.models.pos import POS_COLUMNS, POSDetector

__all__ = ["MODEL_KINDS", "make_pipeline", "input_columns", "fit_pipeline", "fit_fallback",
           "balanced_weights", "trainable_rows"]

MODEL_KINDS: tuple[str, ...] = ("tree", "em", "pos")


def make_pipeline(kind: str, random_state: int = 0) -> Pipeline:
    """A fresh, unfitted pipeline of `kind` ("tree", "em" or "pos")."""
    if kind == "tree":
        return Pipeline([
            ("features", FeatureTransform(feature_set="tree")),
            ("tree", DecisionTreeClassifier(criterion="entropy", max_depth=10, min_samples_leaf=5,
                                            random_state=random_state)),
        ])
    if kind == "em":
        return Pipeline([
            ("features", FeatureTransform()),
            ("scale", StandardScaler()),
            ("em", EMClassifier(random_state=random_state)),
        ])
    if kind == "pos":
        return Pipeline([("pos", POSDetector())])
    raise TrainingDataError(f"unknown model {kind!r}; choose {', '.join(MODEL_KINDS)}")


def input_columns(kind: str) -> tuple[str, ...]:
    """The trace columns a pipeline of `kind` reads, in order."""
    return POS_COLUMNS if kind == "pos" else RAW_COLUMNS


def trainable_rows(frame: pd.DataFrame, need_labels: bool = True) -> pd.DataFrame:
    """Rows a model may learn from: active windows, labelled ones when labels are needed."""
    rows = frame[~frame["insufficient"].to_numpy(dtype=bool)]
    if need_labels:
        rows = rows[rows["label"].notna()]
    return rows


def balanced_weights(labels: np.ndarray, groups: np.ndarray) -> np.ndarray:
    """Sample weights giving every application the same weight within its label, and every label the same total.

    Returns
    -------
    ndarray of shape (n_windows,)
    """
    labels = np.asarray(labels, dtype=object)
    groups = np.asarray(groups, dtype=object)
    key = pd.Series(list(zip(labels, groups)))
    w = 1.0 / key.map(key.value_counts()).to_numpy(dtype=np.float64)
    for lab in np.unique(labels):
        m = labels == lab
        w[m] /= w[m].sum()
    return w * (len(w) / w.sum())


def fit_pipeline(kind: str, frame: pd.DataFrame, random_state: int = 0) -> Pipeline:
    """Fit a pipeline of `kind` on the trainable rows of `frame` (labelled; unlabelled too for em)."""
    rows = trainable_rows(frame, need_labels=kind != "em")
    if rows.empty:
        raise TrainingDataError("no active labelled windows to train on")
    pipe = make_pipeline(kind, random_state)
    X = rows.loc[:, list(input_columns(kind))].to_numpy(dtype=np.float64)
    y = rows["label"].to_numpy(dtype=object)
    if kind == "tree":
        if len(set(y)) < 2:
            raise TrainingDataError("a tree needs windows of at least two labels")
        groups = rows["source"].fillna("").to_numpy(dtype=object)
        pipe.fit(X, y, tree__sample_weight=balanced_weights(y, groups))
    elif kind == "em":
        pipe.fit(X, np.where(pd.isna(y), None, y))
    else:
        try:
            pipe.fit(X, y)
        except ValueError as err:
            raise TrainingDataError(str(err)) from err
    return pipe


def fit_fallback(frame: pd.DataFrame, random_state: int = 0) -> Pipeline | None:
    """A tree on the /proc-only features, for rows without syscall counts; None without labels."""
    rows = trainable_rows(frame)
    y = rows["label"].to_numpy(dtype=object)
    if len(set(y)) < 2:
        return None
    pipe = Pipeline([
        ("features", FeatureTransform(feature_set="proc")),
        ("tree", DecisionTreeClassifier(criterion="entropy", max_depth=8, min_samples_leaf=5,
                                        random_state=random_state)),
    ])
    groups = rows["source"].fillna("").to_numpy(dtype=object)
    pipe.fit(rows.loc[:, list(RAW_COLUMNS)].to_numpy(dtype=np.float64), y,
             tree__sample_weight=balanced_weights(y, groups))
    return pipe
