"""The model verbs end to end on synthetic traces, and every bad input as one line with exit 1."""

from __future__ import annotations

from collections.abc import Callable

import json
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from procsift.collector.traceio import TraceMeta, write_trace
from procsift.service.cli import main



@pytest.fixture(scope="module")
def trace(tmp_path_factory: pytest.TempPathFactory, make_frame: Callable[..., pd.DataFrame]) -> Path:
    path = tmp_path_factory.mktemp("t") / "synthetic.parquet"
    write_trace(path, make_frame(n=30, dur=0.5), TraceMeta(window_s=0.5))
    return path


@pytest.fixture(scope="module")
def bundle(trace: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("b") / "bundle"
    assert main(["train", "--model", "tree", str(trace), "-o", str(out), "-w", "1"]) == 0
    return out


def _one_error_line(capsys: pytest.CaptureFixture[str], argv: list[str], match: str) -> None:
    assert main(argv) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("procsift: error:"), err
    assert match in err[0]
    assert "Traceback" not in err[0]


def test_train_writes_a_bundle_with_scores(bundle: Path) -> None:
    meta = json.loads((bundle / "metadata.json").read_text())
    assert meta["window_s"] == 1.0
    assert meta["scores"]["macro_f1"] > 0.9
    assert len(meta["scores"]["folds"]) == 6


def test_evaluate_report_and_json(bundle: Path, trace: Path, tmp_path: Path,
                                  capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["evaluate", str(bundle), str(trace), "--report", str(tmp_path / "rep"), "--json"]) == 0
    scores = json.loads(capsys.readouterr().out)
    assert set(scores["per_class"]) == {"interactive", "background", "html-serving"}
    meta = json.loads((bundle / "metadata.json").read_text())
    assert scores["macro_f1"] == meta["scores"]["macro_f1"]  # evaluate reproduces train's numbers
    for f in ("report.md", "confusion_matrix.png", "tree.png", "feature_importances.png"):
        assert (tmp_path / "rep" / f).stat().st_size > 0
    assert f"{scores['macro_f1']:.3f}" in (tmp_path / "rep" / "report.md").read_text()


def test_predict_gives_one_label_per_process(bundle: Path, trace: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["predict", str(bundle), str(trace), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert len(rows) == 6
    for r in rows:
        assert r["label"] == {"inte": "interactive", "back": "background", "html": "html-serving"}[r["comm"][:4]]
        assert abs(sum(r["proba"].values()) - 1) < 1e-6


def test_explain_shows_path_and_windows(bundle: Path, trace: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["explain", str(bundle), str(trace), "--pid", "101"]) == 0
    out = capsys.readouterr().out
    assert "interactive" in out and "node 0:" in out and "windows behind the label" in out


def test_explain_pid_alone_is_the_daemon_form(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PROCSIFT_STATE_DIR", str(tmp_path))  # no daemon publishes here
    _one_error_line(capsys, ["explain", "1234"], "no running procsift daemon")


def test_explain_unknown_pid(bundle: Path, trace: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _one_error_line(capsys, ["explain", str(bundle), str(trace), "--pid", "99999"], "pid 99999 is not in")


def test_wrong_schema_trace(bundle: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "other.parquet"
    pq.write_table(pa.table({"a": [1, 2]}), bad)
    _one_error_line(capsys, ["predict", str(bundle), str(bad)], "not a procsift trace")
    _one_error_line(capsys, ["train", str(bad), "-o", str(tmp_path / "x")], "not a procsift trace")


def test_unknown_label_in_trace(tmp_path: Path, capsys: pytest.CaptureFixture[str], make_frame: Callable[..., pd.DataFrame]) -> None:
    f = make_frame(n=3)
    f["label"] = "gaming"
    path = tmp_path / "bad.csv"
    f.to_csv(path, index=False)
    _one_error_line(capsys, ["train", str(path), "-o", str(tmp_path / "x")], "unknown label 'gaming'")


def test_empty_trace(tmp_path: Path, capsys: pytest.CaptureFixture[str], make_frame: Callable[..., pd.DataFrame]) -> None:
    path = tmp_path / "empty.parquet"
    write_trace(path, make_frame(n=1).iloc[0:0], TraceMeta(window_s=1.0))
    _one_error_line(capsys, ["train", str(path), "-o", str(tmp_path / "x")], "no windows")


def test_unlabelled_trace_for_tree(tmp_path: Path, capsys: pytest.CaptureFixture[str], make_frame: Callable[..., pd.DataFrame]) -> None:
    path = tmp_path / "u.parquet"
    write_trace(path, make_frame(n=3, labelled=False), TraceMeta(window_s=1.0))
    _one_error_line(capsys, ["train", "--model", "tree", str(path), "-o", str(tmp_path / "x")], "no labels")


def test_corrupt_bundle(bundle: Path, trace: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "metadata.json").write_text((bundle / "metadata.json").read_text())
    (broken / "model.joblib").write_bytes(b"\x80\x04garbage")
    _one_error_line(capsys, ["predict", str(broken), str(trace)], "does not match the sha256")


def test_window_shorter_than_the_traces(bundle: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], make_frame: Callable[..., pd.DataFrame]) -> None:
    path = tmp_path / "long.parquet"
    write_trace(path, make_frame(n=4, dur=1.5), TraceMeta(window_s=1.5))
    _one_error_line(capsys, ["predict", str(bundle), str(path)], "cannot make 1 s windows from 1.5 s")
