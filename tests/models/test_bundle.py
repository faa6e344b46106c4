"""Bundles: round trip, and every way a bundle can be refused (one clear error each)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from procsift.models import (
    BundleError, BundleVersionWarning, IncompatibleModel, TraceSet, UntrustedBundle, default_bundle_path,
    load_bundle, save_bundle, train_bundle,
)


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory, frame: pd.DataFrame) -> Path:
    ts = TraceSet(frame, 1.0, ("bpf",), [{"name": "mem", "sha256": "ab" * 32}])
    return save_bundle(train_bundle("tree", ts), tmp_path_factory.mktemp("b") / "bundle")


def _copy(saved: Path, tmp_path: Path) -> Path:
    dst = tmp_path / "copy"
    dst.mkdir()
    for f in saved.iterdir():
        (dst / f.name).write_bytes(f.read_bytes())
    return dst


def _edit_meta(path: Path, **changes: object) -> None:
    meta = json.loads((path / "metadata.json").read_text())
    meta.update(changes)
    (path / "metadata.json").write_text(json.dumps(meta))


def test_round_trip_keeps_predictions_and_metadata(saved: Path, frame: pd.DataFrame) -> None:
    b = load_bundle(saved)
    assert b.kind == "tree" and b.window_s == 1.0
    assert set(b.labels) == {"interactive", "background", "html-serving"}
    meta = b.metadata
    for key in ("feature_names", "labels", "window_s", "versions", "training", "scores", "model_sha256"):
        assert key in meta
    assert meta["training"]["sha256"] and meta["versions"]["scikit-learn"]
    labels, proba = b.predict_frame(frame)
    assert (labels == frame["label"].to_numpy()).mean() > 0.95
    label, p = b.predict_row(frame.iloc[3])
    assert label == labels[3]
    np.testing.assert_allclose(p, proba[3])
    assert sorted(os.listdir(saved)) == ["metadata.json", "model.joblib"]  # no temp files left


def test_feature_mismatch_is_refused(saved: Path, tmp_path: Path) -> None:
    b = _copy(saved, tmp_path)
    meta = json.loads((b / "metadata.json").read_text())
    _edit_meta(b, feature_names=meta["feature_names"][:-1] + ["log_rate_teleports"])
    with pytest.raises(IncompatibleModel, match="log_rate_teleports"):
        load_bundle(b)


def test_unknown_label_in_bundle_is_refused(saved: Path, tmp_path: Path) -> None:
    b = _copy(saved, tmp_path)
    _edit_meta(b, labels=["gaming", "background"])
    with pytest.raises(IncompatibleModel, match="unknown label 'gaming'"):
        load_bundle(b)


def test_corrupt_model_file_is_refused(saved: Path, tmp_path: Path) -> None:
    b = _copy(saved, tmp_path)
    data = (b / "model.joblib").read_bytes()
    (b / "model.joblib").write_bytes(data[: len(data) // 2])
    with pytest.raises(BundleError, match="sha256"):
        load_bundle(b)
    # even with a matching hash, garbage is refused without a traceback-worthy error
    (b / "model.joblib").write_bytes(b"not a pickle at all")
    import hashlib
    _edit_meta(b, model_sha256=hashlib.sha256(b"not a pickle at all").hexdigest())
    with pytest.raises(BundleError, match="cannot be loaded"):
        load_bundle(b)


def test_bad_metadata_json_is_refused(saved: Path, tmp_path: Path) -> None:
    b = _copy(saved, tmp_path)
    (b / "metadata.json").write_text("{ not json")
    with pytest.raises(BundleError, match="not JSON"):
        load_bundle(b)


def test_missing_or_wrong_paths_are_refused(tmp_path: Path) -> None:
    with pytest.raises(BundleError, match="no such bundle"):
        load_bundle(tmp_path / "nope")
    (tmp_path / "file").write_text("x")
    with pytest.raises(BundleError, match="is a file"):
        load_bundle(tmp_path / "file")
    (tmp_path / "empty").mkdir()
    with pytest.raises(BundleError, match="not a bundle"):
        load_bundle(tmp_path / "empty")


def test_world_writable_bundle_is_refused(saved: Path, tmp_path: Path) -> None:
    b = _copy(saved, tmp_path)
    os.chmod(b / "model.joblib", 0o666)
    with pytest.raises(UntrustedBundle, match="writable by every user"):
        load_bundle(b)


def test_bundle_owned_by_another_user_is_refused(saved: Path, tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root to chown a file to another user")
    b = _copy(saved, tmp_path)
    os.chown(b / "metadata.json", 65534, 65534)
    with pytest.raises(UntrustedBundle, match="owned by uid 65534"):
        load_bundle(b)


def test_version_mismatch_warns_but_loads(saved: Path, tmp_path: Path) -> None:
    b = _copy(saved, tmp_path)
    meta = json.loads((b / "metadata.json").read_text())
    _edit_meta(b, versions=dict(meta["versions"], **{"scikit-learn": "0.0.1"}))
    with pytest.warns(BundleVersionWarning, match="scikit-learn 0.0.1"):
        assert load_bundle(b).kind == "tree"


def test_saving_over_a_non_bundle_folder_is_refused(saved: Path, tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "precious.txt").write_text("keep me")
    with pytest.raises(BundleError, match="not a bundle"):
        save_bundle(load_bundle(saved), tmp_path / "docs")
    assert (tmp_path / "docs" / "precious.txt").exists()


def test_default_bundle_lives_in_the_package() -> None:
    assert default_bundle_path().name == "default"
    assert default_bundle_path().parent.name == "models"
