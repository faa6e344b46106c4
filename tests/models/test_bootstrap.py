"""The application-level bootstrap interval of macro-F1 (pure logic)."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import f1_score

from procsift.models.evaluation import bootstrap_macro_f1

LABELS = ["interactive", "background", "html-serving"]


def test_perfect_predictions_give_a_point_interval() -> None:
    y = np.array(["interactive"] * 6 + ["background"] * 6 + ["html-serving"] * 6, dtype=object)
    groups = np.array([f"{lab}-{i % 3}" for i, lab in enumerate(y)], dtype=object)
    assert bootstrap_macro_f1(y, y, groups, LABELS, n_boot=200) == (1.0, 1.0)


def test_one_application_per_label_collapses_to_sklearns_macro_f1() -> None:
    # every replicate draws the same three applications: lo == hi == the plain macro-F1,
    # and a prediction outside the labels ("untrainable") is a miss, as for sklearn
    y = np.array(["interactive"] * 4 + ["background"] * 4 + ["html-serving"] * 4, dtype=object)
    p = y.copy()
    p[0], p[5], p[9] = "background", "html-serving", "untrainable"
    groups = np.array([lab for lab in y], dtype=object)
    lo, hi = bootstrap_macro_f1(y, p, groups, LABELS, n_boot=50)
    want = f1_score(y, p, labels=LABELS, average="macro", zero_division=0)
    assert lo == pytest.approx(want) and hi == pytest.approx(want)


def test_interval_widens_when_applications_disagree() -> None:
    # background app b0 is always right, b1 always wrong: resampling apps must move the score
    y = np.array(["interactive"] * 4 + ["background"] * 8 + ["html-serving"] * 4, dtype=object)
    p = y.copy()
    p[8:12] = "html-serving"
    groups = np.array(["i"] * 4 + ["b0"] * 4 + ["b1"] * 4 + ["h"] * 4, dtype=object)
    lo, hi = bootstrap_macro_f1(y, p, groups, LABELS, n_boot=500, seed=1)
    point = f1_score(y, p, labels=LABELS, average="macro")
    assert lo < point < hi
    assert hi == pytest.approx(1.0)  # a replicate with b0 twice is perfect
