"""A bundle is a pickle, so code: who may have written it, which bytes are unpickled, and what
its metadata may say. Every refusal is one BundleError naming the bundle (and the field)."""

from __future__ import annotations

import hashlib
import io
import json
import os
import pickle
import subprocess
import sys
import zlib
from pathlib import Path

import joblib
import pandas as pd
import pytest

from procsift.models import BundleError, TraceSet, UntrustedBundle, load_bundle, save_bundle, train_bundle

PROCSIFT = [sys.executable, "-m", "procsift.service.cli"]


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory, frame: pd.DataFrame) -> Path:
    ts = TraceSet(frame, 1.0, ("bpf",), [{"name": "secret-training-file.parquet", "sha256": "ab" * 32}])
    return save_bundle(train_bundle("tree", ts), tmp_path_factory.mktemp("b") / "bundle")


@pytest.fixture
def bundle(saved: Path, tmp_path: Path) -> Path:
    dst = tmp_path / "copy"
    dst.mkdir(mode=0o755)
    os.chmod(dst, 0o755)
    for f in saved.iterdir():
        (dst / f.name).write_bytes(f.read_bytes())
        os.chmod(dst / f.name, 0o644)
    return dst


class _Marker:
    """A pickle that, when loaded, leaves a file behind: proof that it ran."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self):  # type: ignore[no-untyped-def]
        return (open, (self.path, "w"))


def _inject(bundle: Path, payload: bytes) -> None:
    """What the attacker of issue 18 did: replace model.joblib and the sha256 beside it."""
    (bundle / "model.joblib").write_bytes(payload)
    meta = json.loads((bundle / "metadata.json").read_text())
    meta["model_sha256"] = hashlib.sha256(payload).hexdigest()
    (bundle / "metadata.json").write_text(json.dumps(meta))


@pytest.mark.parametrize("target, mode", [("folder", 0o775), ("model.joblib", 0o664), ("metadata.json", 0o664),
                                          ("folder", 0o757), ("model.joblib", 0o646)])
def test_a_bundle_others_can_write_is_refused_before_anything_is_unpickled(
        bundle: Path, tmp_path: Path, target: str, mode: int) -> None:
    marker = tmp_path / "pwned"
    _inject(bundle, pickle.dumps(_Marker(str(marker))))
    os.chmod(bundle if target == "folder" else bundle / target, mode)
    with pytest.raises(UntrustedBundle, match="writable by"):
        load_bundle(bundle)
    assert not marker.exists()


def test_a_bundle_owned_by_another_user_is_refused(bundle: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root to give a file to another user")
    os.chown(bundle / "model.joblib", 65534, 65534)
    with pytest.raises(UntrustedBundle, match="owned by uid 65534"):
        load_bundle(bundle)


def test_a_symlinked_model_file_is_refused(bundle: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere.joblib"
    (bundle / "model.joblib").rename(elsewhere)
    (bundle / "model.joblib").symlink_to(elsewhere)
    with pytest.raises(UntrustedBundle, match="symbolic link"):
        load_bundle(bundle)


def test_the_bytes_hashed_are_the_bytes_unpickled(bundle: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """model.joblib is read once: what joblib unpickles is an in-memory copy of the hashed bytes,
    never the file reopened (a swap between the hash and the load is then harmless)."""
    seen: list[object] = []
    real = joblib.load

    def spy(source, *a, **kw):  # type: ignore[no-untyped-def]
        seen.append(source)
        return real(source, *a, **kw)
    monkeypatch.setattr(joblib, "load", spy)
    opened: list[str] = []
    real_open = os.open

    def spy_open(path, *a, **kw):  # type: ignore[no-untyped-def]
        opened.append(os.fsdecode(path))
        return real_open(path, *a, **kw)
    monkeypatch.setattr(os, "open", spy_open)
    load_bundle(bundle)
    assert len(seen) == 1 and isinstance(seen[0], io.BytesIO)
    want = json.loads((bundle / "metadata.json").read_text())["model_sha256"]
    assert hashlib.sha256(seen[0].getvalue()).hexdigest() == want
    assert sum(p.endswith("model.joblib") for p in opened) == 1


def test_a_tampered_model_is_never_unpickled(bundle: Path, tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    (bundle / "model.joblib").write_bytes(pickle.dumps(_Marker(str(marker))))  # sha256 left as it was
    with pytest.raises(BundleError, match="does not match the sha256"):
        load_bundle(bundle)
    assert not marker.exists()


@pytest.mark.parametrize("payload", [
    b"\x78\x9c" + b"\x00" * 64,                      # zlib header, corrupt stream (issue 18: zlib.error)
    zlib.compress(b"not a pickle at all"),
    b"\x80\x04\x95",                                 # a pickle cut short
    pickle.dumps({"format": 1, "kind": "tree", "pipeline": "not a pipeline"}),
    pickle.dumps(("builtins", "no_such_attr")),
])
def test_a_corrupt_model_with_a_matching_hash_is_one_bundle_error(bundle: Path, payload: bytes) -> None:
    _inject(bundle, payload)
    with pytest.raises(BundleError, match="model.joblib"):
        load_bundle(bundle)


@pytest.mark.parametrize("field, value", [
    ("feature_names", 5), ("labels", None), ("labels", []), ("labels", [1, 2]), ("window_s", "abc"),
    ("window_s", -2), ("window_s", 0), ("window_s", float("inf")), ("window_s", True), ("kind", ["tree"]),
    ("input_columns", "dur_s"), ("model_sha256", 12), ("model_sha256", "zz"), ("format", "1"),
    ("versions", "1.0"), ("fallback_feature_names", {"a": 1}), ("training", []), ("scores", 3),
])
def test_metadata_of_the_wrong_type_or_range_is_one_error_naming_the_field(
        bundle: Path, field: str, value: object) -> None:
    meta = json.loads((bundle / "metadata.json").read_text())
    meta[field] = value
    (bundle / "metadata.json").write_text(json.dumps(meta))
    with pytest.raises(BundleError) as info:
        load_bundle(bundle)
    assert field in str(info.value) and "allowed" in str(info.value)
    assert info.value.field == field


@pytest.mark.parametrize("text", ["[" * 100_000, "\"just a string\"", "{\"format\": 1e999}"])
def test_metadata_that_is_not_an_object_is_one_error(bundle: Path, text: str) -> None:
    (bundle / "metadata.json").write_text(text)
    with pytest.raises(BundleError, match="metadata.json"):
        load_bundle(bundle)


def test_saved_bundles_are_not_group_writable_whatever_the_umask(frame: pd.DataFrame, tmp_path: Path) -> None:
    old = os.umask(0o002)
    try:
        path = save_bundle(train_bundle("tree", TraceSet(frame, 1.0, ("bpf",), [])), tmp_path / "b")
    finally:
        os.umask(old)
    for p in (path, path / "model.joblib", path / "metadata.json"):
        assert p.stat().st_mode & 0o022 == 0, p
    load_bundle(path)


def test_train_onto_an_existing_file_is_one_line(tmp_path: Path) -> None:
    target = tmp_path / "notes.txt"
    target.write_text("keep me")
    trace = Path(__file__).resolve().parents[2] / "datasets" / "data" / "bg-bc-pi.parquet"
    res = subprocess.run([*PROCSIFT, "train", str(trace), "-o", str(target)], capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 1 and "Traceback" not in res.stderr, res.stderr
    assert res.stderr.strip().splitlines() == [
        f"procsift: error: {target}: is a file, not a bundle folder; refusing to replace it"]
    assert target.read_text() == "keep me"


def test_group_writable_bundle_is_refused_by_predict(bundle: Path, tmp_path: Path) -> None:
    """Issue 18's attack, end to end: files 664, folder 775, the pickle and its sha256 replaced."""
    marker = tmp_path / "pwned"
    _inject(bundle, pickle.dumps(_Marker(str(marker))))
    os.chmod(bundle, 0o775)
    for f in bundle.iterdir():
        os.chmod(f, 0o664)
    trace = Path(__file__).resolve().parents[2] / "datasets" / "data" / "bg-bc-pi.parquet"
    res = subprocess.run([*PROCSIFT, "predict", str(bundle), str(trace)], capture_output=True, text=True, timeout=120)
    assert res.returncode == 1 and not marker.exists()
    assert res.stderr.strip().splitlines() == [
        f"procsift: error: {bundle}: the folder is writable by its group; refusing to load a pickle others "
        "could have written (chmod g-w,o-w it)"]
