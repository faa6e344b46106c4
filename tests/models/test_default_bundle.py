"""The default bundle shipped in the package: loads, matches its report, labels shipped traces."""

from __future__ import annotations

import json
from pathlib import Path

from procsift.collector.traceio import read_trace
from procsift.models import default_bundle_path, load_bundle, reaggregate

DATA = Path(__file__).resolve().parents[2] / "datasets" / "data"


def test_default_bundle_loads_and_its_report_shows_its_scores() -> None:
    bundle = load_bundle()
    assert bundle.path == default_bundle_path()
    assert set(bundle.labels) == {"interactive", "background", "html-serving"}
    scores = bundle.metadata["scores"]
    report = (default_bundle_path() / "report" / "report.md").read_text()
    assert f"macro-F1 {scores['macro_f1']:.3f}" in report
    # one held-out fold per application (`source`); two recordings may share one (html-nginx*)
    manifest = json.loads((DATA / "manifest.json").read_text())
    assert len(list(DATA.glob("*.parquet"))) == len(manifest)
    assert sorted(f["source"] for f in scores["folds"]) == sorted({e["source"] for e in manifest.values()})


def test_default_bundle_labels_a_shipped_trace() -> None:
    bundle = load_bundle(None)
    trace = read_trace(DATA / "bg-xz.parquet")
    frame = reaggregate(trace.frame, trace.meta.window_s, bundle.window_s)
    frame = frame[frame["label"].notna() & ~frame["insufficient"]]
    labels, proba = bundle.predict_frame(frame)
    assert (labels == "background").mean() > 0.8
    assert proba.shape == (len(frame), 3)
