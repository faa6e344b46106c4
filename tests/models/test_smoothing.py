"""Hysteresis: a label changes only when it wins k of the last n windows; quiet windows keep it."""

from __future__ import annotations

import pytest

from procsift.models import Smoother


def test_first_window_sets_the_label_and_one_outlier_does_not_flip_it() -> None:
    sm = Smoother(k=2, n=3)
    key = (10, 99)
    assert sm.update(key, "background") == "background"
    assert sm.update(key, "interactive") == "background"
    assert sm.update(key, "background") == "background"
    assert sm.update(key, "background") == "background"
    assert sm.update(key, "interactive") == "background"  # 1 of the last 3
    assert sm.state(key).changes == 0


def test_a_real_change_settles_within_two_windows() -> None:
    sm = Smoother(k=2, n=3)
    key = (1, 1)
    for _ in range(5):
        sm.update(key, "background")
    assert sm.update(key, "html-serving") == "background"
    assert sm.update(key, "html-serving") == "html-serving"
    assert sm.state(key).changes == 1


def test_insufficient_windows_keep_the_previous_label() -> None:
    sm = Smoother(k=2, n=3)
    key = (2, 2)
    sm.update(key, "interactive")
    for _ in range(5):
        assert sm.update(key, "background", insufficient=True) == "interactive"
    # quiet windows did not fill the history: one active background window is not enough
    assert sm.update(key, "background") == "interactive"
    assert sm.update(key, "background") == "background"


def test_processes_are_kept_apart_by_pid_and_start_time() -> None:
    sm = Smoother()
    sm.update((5, 100), "background")
    sm.update((5, 200), "interactive")  # PID reused by a new process
    assert sm.label((5, 100)) == "background"
    assert sm.label((5, 200)) == "interactive"
    sm.forget((5, 100))
    assert sm.label((5, 100)) is None


def test_proba_is_the_mean_of_the_remembered_windows() -> None:
    sm = Smoother(k=1, n=2)
    sm.update("a", "x", [1.0, 0.0])
    sm.update("a", "y", [0.0, 1.0])
    assert list(sm.proba("a")) == [0.5, 0.5]
    assert sm.label("a") == "y"  # k=1: any single window may change it


def test_bad_k_n_is_refused() -> None:
    with pytest.raises(ValueError):
        Smoother(k=4, n=3)


def test_update_many_leaves_the_states_update_would() -> None:
    """The batch path (POST /v1/predict) must smooth exactly as window-by-window updates do."""
    import numpy as np

    rng = np.random.default_rng(5)
    labels = ["interactive", "background", "html-serving"]
    n = 3000
    keys = [(int(p), 7) for p in rng.integers(1, 40, n)]
    labs = [labels[i] for i in rng.integers(0, 3, n)]
    proba = rng.dirichlet(np.ones(3), n)
    quiet = (rng.random(n) < 0.2).tolist()
    order = rng.permutation(n).tolist()
    one, many = Smoother(k=2, n=3), Smoother(k=2, n=3)
    for i in order:
        one.update(keys[i], labs[i], proba[i], quiet[i])
    many.update_many(keys, labs, proba, quiet, order=order)
    assert sorted(one.keys()) == sorted(many.keys())
    for key in one.keys():
        a, b = one.state(key), many.state(key)
        assert (a.label, list(a.history), a.windows, a.changes) == (b.label, list(b.history), b.windows, b.changes)
        if a.probas:
            assert np.allclose(one.proba(key), many.proba(key))
