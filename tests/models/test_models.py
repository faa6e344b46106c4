"""Training each model kind; EM without labels; the POS thresholds as the paper defines them."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd
import pytest

from procsift.collector.schema import Window
from procsift.collector.traceio import windows_to_frame
from procsift.models import (
    MODEL_KINDS, POSDetector, TraceSet, TrainingDataError, cross_validate, reaggregate, train_bundle,
)
from procsift.models.pos import POS_COLUMNS



def _set(frame: pd.DataFrame) -> TraceSet:
    return TraceSet(frame, float(frame["dur_s"].iloc[0]), ("bpf",), [{"name": "mem", "sha256": "0" * 64}])


@pytest.mark.parametrize("kind", MODEL_KINDS)
def test_each_model_trains_predicts_and_explains(kind: str, frame: pd.DataFrame) -> None:
    bundle = train_bundle(kind, _set(frame))
    labels, proba = bundle.predict_frame(frame)
    assert proba.shape == (len(frame), len(bundle.labels))
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    truth = frame["label"].to_numpy()
    if kind == "pos":
        html = truth == "html-serving"
        assert (labels[html] == "html-serving").mean() > 0.9
        assert (labels[truth == "background"] == "background").mean() > 0.9
    else:
        assert (labels == truth).mean() > 0.95
    exp = bundle.explain_row(frame.iloc[0])
    assert exp.label in bundle.labels and exp.steps
    assert bundle.metadata["training"]["active_windows"] == len(frame)


def test_tree_explanation_is_its_decision_path(frame: pd.DataFrame) -> None:
    bundle = train_bundle("tree", _set(frame))
    exp = bundle.explain_row(frame.iloc[-1])
    assert exp.steps[-1].startswith("leaf")
    assert all(step["feature"] for step in exp.details["path"])


def test_em_without_labels_yields_cluster_groups(make_frame: Callable[..., pd.DataFrame]) -> None:
    unlabelled = make_frame(labelled=False)
    bundle = train_bundle("em", _set(unlabelled))
    assert all(lab.startswith("cluster-") for lab in bundle.labels)
    assert len(bundle.labels) >= 2
    labels, _ = bundle.predict_frame(unlabelled)
    # each cluster holds (almost) only one hidden behaviour
    hidden = make_frame()["label"].to_numpy()
    purity = pd.Series(hidden).groupby(labels).agg(lambda s: s.value_counts().iloc[0] / len(s))
    assert purity.min() > 0.9


def test_em_bic_picks_a_size_and_maps_clusters_to_labels(frame: pd.DataFrame) -> None:
    bundle = train_bundle("em", _set(frame))
    em = bundle.pipeline.named_steps["em"]
    assert min(em.bic_, key=em.bic_.get) == em.mixture_.n_components
    assert set(bundle.labels) == {"interactive", "background", "html-serving"}


def _pos_rows(rows: list[tuple[int, float, float, int, int]]) -> np.ndarray:
    """(pid, t, max_wait_ns, transitions, requests) -> POS input rows."""
    return np.array([[pid, pid, t, 1.0, wait, tr, rq, rq, rq] for pid, t, wait, tr, rq in rows], dtype=float)


def test_pos_learns_slp_and_rw_by_the_papers_rules() -> None:
    # one period, two server processes: longest waits 100 ms and 50 ms, fewest cycles/request 2 and 3
    X = _pos_rows([(1, 0.0, 100e6, 4, 2), (1, 1.0, 20e6, 8, 2), (2, 0.0, 50e6, 6, 2), (2, 1.0, 10e6, 9, 2)])
    pos = POSDetector(period_s=5.0).fit(X, np.array(["html-serving"] * 4))
    assert pos.slp_ == pytest.approx(50e6)  # smallest of the longest waits
    assert pos.rw_ == pytest.approx(3.0)  # greatest of the fewest cycles per request


def test_pos_re_predicts_thresholds_each_period() -> None:
    X = _pos_rows([(1, 0.0, 100e6, 2, 1), (2, 0.0, 100e6, 2, 1)])
    pos = POSDetector(period_s=1.0).fit(X, np.array(["html-serving"] * 2))
    later = _pos_rows([(1, 0.0, 400e6, 2, 1), (1, 1.0, 300e6, 2, 1), (1, 2.0, 300e6, 2, 1)])
    slp, rw = pos.thresholds(later)
    assert slp[0] == pytest.approx(100e6)  # first period: the fitted value
    assert slp[1] == pytest.approx(np.sqrt(100e6 * 400e6))  # then blended with what period 0 logged
    assert pos.predict(later).tolist() == ["html-serving"] * 3


def test_pos_without_html_windows_is_refused(make_frame: Callable[..., pd.DataFrame]) -> None:
    with pytest.raises(TrainingDataError):
        train_bundle("pos", _set(make_frame(n=5).query("label != 'html-serving'")))
    assert "comm" not in POS_COLUMNS and "cat_net_recv" in POS_COLUMNS


def test_unlabelled_traces_cannot_train_a_tree(make_frame: Callable[..., pd.DataFrame]) -> None:
    with pytest.raises(TrainingDataError, match="no labels"):
        train_bundle("tree", _set(make_frame(n=5, labelled=False)))


def test_cross_validation_holds_out_whole_applications(frame: pd.DataFrame) -> None:
    scores = cross_validate("tree", frame)
    assert sorted(f["source"] for f in scores["folds"]) == sorted(frame["source"].unique())
    assert scores["macro_f1"] > 0.95
    assert np.sum(scores["confusion"]) == len(frame)
    only_one = frame[frame["source"] == frame["source"].iloc[0]]
    with pytest.raises(TrainingDataError, match="two sources"):
        cross_validate("tree", only_one)


def test_reaggregation_adds_counts_and_keeps_the_longest_wait(make_frame: Callable[..., pd.DataFrame]) -> None:
    f = make_frame(n=10, dur=0.5, sources_per_label=1)
    g = reaggregate(f, 0.5, 1.0)
    assert len(g) == len(f) // 2
    assert g["syscalls"].sum() == f["syscalls"].sum()
    assert g["run_ns"].sum() == f["run_ns"].sum()
    assert (g["dur_s"] == 1.0).all()
    first = f[f["pid"] == f["pid"].iloc[0]].head(2)
    assert g["max_wait_ns"].iloc[0] == first["max_wait_ns"].max()
    assert set(g["label"]) == set(f["label"])
    with pytest.raises(TrainingDataError, match="whole multiple"):
        reaggregate(f, 0.5, 0.75)


@pytest.mark.parametrize("kind", MODEL_KINDS)
def test_single_window_fast_path_matches_the_pipeline(kind: str, frame: pd.DataFrame) -> None:
    from procsift.models.fastpath import row_proba
    from procsift.models.kinds import input_columns
    bundle = train_bundle(kind, _set(frame))
    raw = frame.loc[:, list(input_columns(kind))].to_numpy(dtype=float)
    fast = np.vstack([row_proba(kind, bundle.pipeline, raw[i:i + 1]) for i in range(len(raw))])
    if kind == "pos":  # the pipeline replays periods; a lone window uses the fitted thresholds
        slow = np.vstack([bundle.pipeline.predict_proba(raw[i:i + 1]) for i in range(len(raw))])
    else:
        slow = bundle.pipeline.predict_proba(raw)
    np.testing.assert_allclose(fast, slow, atol=1e-9)
    label, proba = bundle.predict_row(frame.iloc[7])
    np.testing.assert_allclose(proba, slow[7], atol=1e-9)


def test_em_maps_a_cluster_to_the_label_it_holds_the_largest_share_of() -> None:
    from procsift.models.em import EMClassifier
    rng = np.random.default_rng(0)
    a = rng.normal(0.0, 0.3, size=(1000, 2))             # 1000 background windows
    b = rng.normal(5.0, 0.3, size=(90, 2))               # 50 background + all 40 html-serving
    X = np.vstack([a, b])
    y = np.array(["background"] * 1050 + ["html-serving"] * 40, dtype=object)
    em = EMClassifier(max_components=3, random_state=0).fit(X, y)
    # By count the second cluster is background (50 > 40); by share it is html-serving (40/40).
    assert em.predict(np.array([[5.0, 5.0]]))[0] == "html-serving"
    assert em.predict(np.array([[0.0, 0.0]]))[0] == "background"


def test_reaggregation_gives_what_a_long_window_would_have_measured() -> None:
    """The collector writes no row for a quiet window: the long row still spans its whole window,
    and the quiet windows of a live process count as asleep (not those after its exit)."""
    def w(t: int, pid: int, **kw: object) -> Window:
        return Window(host="h", t_start=1000.0 + 0.5 * t, dur_s=0.5, pid=pid, start_time=pid, comm="p",
                      nthreads=kw.pop("nthreads", 2), run_ns=1_000_000, sleep_ns=900_000_000,  # type: ignore[arg-type]
                      switches_in=3, syscalls={"read": 5}, **kw)  # type: ignore[arg-type]
    rows = [w(0, 7), w(3, 7, nthreads=3), w(5, 7),   # idle-ish: quiet in windows 1, 2 and 4
            w(0, 8), w(1, 8, exited=True, nthreads=1),  # exits in window 1 of 4
            *[w(t, 9) for t in range(6)]]              # busy in every window: the trace has 6
    g = reaggregate(windows_to_frame(rows), 0.5, 2.0).set_index(["pid", "t_start"])
    assert (g["dur_s"] == 2.0).sum() == 3 and (g["dur_s"] == 1.0).sum() == 2  # the last long window has 2 short ones
    assert g.loc[(7, 1000.0), "sleep_ns"] == 2 * 900_000_000 + 2 * 3 * 500_000_000  # 2 quiet windows x 3 threads
    assert g.loc[(7, 1000.0), "nthreads"] == 3  # as read at the window's end
    assert g.loc[(7, 1002.0), "sleep_ns"] == 900_000_000 + 1 * 2 * 500_000_000  # window 4 quiet, 5 not
    assert g.loc[(8, 1000.0), "sleep_ns"] == 2 * 900_000_000 and bool(g.loc[(8, 1000.0), "exited"])
    assert g.loc[(9, 1000.0), "sleep_ns"] == 4 * 900_000_000 and g.loc[(9, 1000.0), "run_ns"] == 4_000_000
    # Windows in which no recorded process did anything have no rows; they still take their time.
    lone = reaggregate(windows_to_frame([w(0, 7), w(7, 7), w(8, 7)]), 0.5, 1.0)
    assert lone["t_start"].tolist() == [1000.0, 1003.0, 1004.0]
    assert lone["sleep_ns"].tolist() == [900_000_000 + 2 * 500_000_000, 900_000_000 + 2 * 500_000_000, 900_000_000]
    # Another phase: the long windows start `phase` short windows later.
    later = reaggregate(windows_to_frame(rows), 0.5, 2.0, phase=1).set_index(["pid", "t_start"])
    assert (9, 1000.5) in later.index and (9, 1000.0) not in later.index
    assert later.loc[(9, 1000.5), "run_ns"] == 4_000_000 and later.loc[(9, 1002.5), "run_ns"] == 1_000_000


def test_every_offset_stacks_each_cut_of_the_long_windows(make_frame: Callable[..., pd.DataFrame]) -> None:
    from procsift.models import reaggregate_cuts
    f = make_frame(n=12, dur=0.5, sources_per_label=1)
    every = pd.concat(reaggregate_cuts(f, 0.5, 2.0), ignore_index=True)
    cuts = [reaggregate(f, 0.5, 2.0, phase=k) for k in range(4)]
    assert len(every) == sum(len(c) for c in cuts)
    pd.testing.assert_frame_equal(every.iloc[:len(cuts[0])], cuts[0])
    # Each cut holds the same work (the first cuts just drop a trace's first short windows).
    assert every["run_ns"].sum() == sum(c["run_ns"].sum() for c in cuts)
    assert sorted(every["t_start"].unique()) != sorted(cuts[0]["t_start"].unique())
    (only,) = reaggregate_cuts(f, 0.5, 0.5)
    pd.testing.assert_frame_equal(only, reaggregate(f, 0.5, 0.5))


def test_cross_validation_learns_from_the_training_frame_without_the_held_out_application(
        frame: pd.DataFrame) -> None:
    """With `train_frame`, each fold learns from it (minus the held-out source) and tests on `frame`."""
    seen: list[set[str]] = []
    import procsift.models.evaluation as ev
    real = ev.fit_pipeline

    def spy(kind: str, train: pd.DataFrame, random_state: int = 0):  # type: ignore[no-untyped-def]
        seen.append(set(train["source"].dropna()))
        return real(kind, train, random_state)

    extra = frame.assign(source=frame["source"] + "-copy")  # sources only the training frame has
    ev.fit_pipeline = spy
    try:
        scores = cross_validate("tree", frame, train_frame=pd.concat([frame, extra], ignore_index=True))
    finally:
        ev.fit_pipeline = real
    sources = sorted(frame["source"].unique())
    assert [f["source"] for f in scores["folds"]] == sources  # folds: the test frame's sources only
    for src, learnt in zip(sources, seen):
        assert src not in learnt and f"{src}-copy" in learnt
    assert np.sum(scores["confusion"]) == len(frame)


def test_a_trace_set_loaded_at_every_offset_trains_on_all_of_them(tmp_path, make_frame) -> None:  # type: ignore[no-untyped-def]
    from procsift.collector.traceio import TraceMeta, write_trace
    from procsift.models import load_traces
    f = make_frame(n=20, dur=0.5)
    write_trace(tmp_path / "t.parquet", f, TraceMeta(window_s=0.5, collector="bpf"))
    ts = load_traces([tmp_path / "t.parquet"], 2.0, every_offset=True)
    assert ts.offsets == 4 and len(ts.fit_frame) > 3 * len(ts.frame)
    bundle = train_bundle("tree", ts)
    assert bundle.metadata["training"]["offsets"] == 4
    assert bundle.metadata["training"]["fit_windows"] == len(ts.fit_frame)
    assert bundle.metadata["training"]["windows"] == len(ts.frame)
    plain = load_traces([tmp_path / "t.parquet"], 2.0)
    assert plain.offsets == 1 and plain.fit_frame is plain.frame
