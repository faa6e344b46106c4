"""Property-based fuzzing of bundle metadata (and of damaged model.joblib bytes, which the recorded
hash refuses before unpickling): one BundleError, or a bundle every later step may trust — it
predicts, and /v1/model can show its metadata as JSON. Time-bounded (max_examples); counts in
fuzz_tally."""

from __future__ import annotations

import collections
import copy
import hashlib
import json
import math
import os
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from procsift.models import BundleError, TraceSet, load_bundle, public_metadata, save_bundle, train_bundle

FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
SPECIAL = [0, 1, -1, 2, 0.5, 1e308, float("nan"), float("inf"), -2, "", "tree", "em", "pos", "abc", "2.0",
           "interactive", "background", "cluster-2", "gaming", None, True, False, [], {}, [1, 2], ["a"],
           "ab" * 32, "AB" * 32, "/etc/passwd", "a" * 5000]
SCALAR = st.one_of(st.sampled_from(SPECIAL), st.integers(-(2**64), 2**64), st.floats(), st.text(max_size=8))
VALUE = st.recursive(SCALAR, lambda kids: st.lists(kids, max_size=3) | st.dictionaries(
    st.text(max_size=6), kids, max_size=3), max_leaves=6)


@pytest.fixture(scope="module")
def bundle_dir(tmp_path_factory: pytest.TempPathFactory, frame: pd.DataFrame) -> Path:
    ts = TraceSet(frame, 1.0, ("bpf",), [{"name": "t.parquet", "sha256": "ab" * 32}])
    return save_bundle(train_bundle("tree", ts), tmp_path_factory.mktemp("fuzz-bundle") / "b")


def _paths(v: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix] if prefix else []
    if isinstance(v, dict):
        for k, x in v.items():
            out += _paths(x, (*prefix, k))
    elif isinstance(v, list) and len(v) < 6:
        for i, x in enumerate(v):
            out += _paths(x, (*prefix, i))
    return out


def check(path: Path, tally: collections.Counter[str], name: str, frame: pd.DataFrame) -> None:
    try:
        bundle = load_bundle(path)
    except BundleError:
        tally[f"{name}: refused with a BundleError"] += 1
        return
    tally[f"{name}: loaded"] += 1
    assert math.isfinite(bundle.window_s) and bundle.window_s > 0
    label, proba = bundle.predict_row(frame.iloc[0])
    assert label in bundle.labels and np.isclose(proba.sum(), 1)
    json.dumps(public_metadata(bundle.metadata), allow_nan=False)  # what GET /v1/model sends


@FUZZ
@given(edits=st.lists(st.tuples(st.integers(0, 10**6), st.one_of(st.just(...), VALUE)), min_size=1, max_size=3),
       new_keys=st.dictionaries(st.text(max_size=8), VALUE, max_size=2))
def test_hostile_metadata(bundle_dir: Path, tmp_path_factory: pytest.TempPathFactory, frame: pd.DataFrame,
                          fuzz_tally: collections.Counter[str], edits: list[tuple[int, Any]],
                          new_keys: dict[str, Any]) -> None:
    good = json.loads((bundle_dir / "metadata.json").read_text())
    paths = _paths(good)
    meta = copy.deepcopy(good)
    for pick, value in edits:
        path = paths[pick % len(paths)]
        d: Any = meta
        try:
            for key in path[:-1]:
                d = d[key]
            if value is ...:
                del d[path[-1]]
            else:
                d[path[-1]] = value
        except (KeyError, IndexError, TypeError):
            continue
    meta.update(new_keys)
    target = _copy(bundle_dir, tmp_path_factory.getbasetemp() / "fuzz-meta")
    (target / "metadata.json").write_text(json.dumps(meta))
    fuzz_tally["bundle metadata"] += 1
    check(target, fuzz_tally, "bundle metadata", frame)


@settings(max_examples=100, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.binary(max_size=400))
def test_metadata_of_any_bytes(bundle_dir: Path, tmp_path_factory: pytest.TempPathFactory, frame: pd.DataFrame,
                               fuzz_tally: collections.Counter[str], data: bytes) -> None:
    target = _copy(bundle_dir, tmp_path_factory.getbasetemp() / "fuzz-meta-bytes")
    (target / "metadata.json").write_bytes(data)
    fuzz_tally["bundle metadata bytes"] += 1
    check(target, fuzz_tally, "bundle metadata bytes", frame)


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(mutations=st.lists(st.tuples(st.sampled_from(["flip", "cut", "zero"]), st.integers(0, 10**7),
                                    st.integers(0, 255)), min_size=1, max_size=3))
def test_a_damaged_model_is_refused_by_its_hash_before_unpickling(
        bundle_dir: Path, tmp_path_factory: pytest.TempPathFactory, fuzz_tally: collections.Counter[str],
        mutations: list[tuple[str, int, int]]) -> None:
    """Damaged model bytes never reach the unpickler: the recorded sha256 refuses them first.
    (Bytes that match their hash are the owner's code, trusted as such: damage made to match
    the hash crashed this test's interpreter once — a segfault in joblib's numpy array reading —
    so no test unpickles them.)"""
    target = _copy(bundle_dir, tmp_path_factory.getbasetemp() / "fuzz-model")
    original = (target / "model.joblib").read_bytes()
    data = bytearray(original)
    for op, where, byte in mutations:
        i = where % len(data)
        if op == "flip":
            data[i] ^= 1 << (byte % 8 or 1)
        elif op == "cut":
            del data[max(i, 1):]
        else:
            data[i] = 0 if data[i] else 1
    assume(bytes(data) != original)  # two flips of one bit undo each other: that is no damage
    (target / "model.joblib").write_bytes(bytes(data))
    fuzz_tally["bundle model bytes"] += 1
    with pytest.raises(BundleError, match="sha256|hash"):
        load_bundle(target)
    fuzz_tally["bundle model bytes: refused by the hash"] += 1


def _copy(src: Path, dst: Path) -> Path:
    dst.mkdir(exist_ok=True)
    os.chmod(dst, 0o755)
    for f in src.iterdir():
        (dst / f.name).write_bytes(f.read_bytes())
        os.chmod(dst / f.name, 0o644)
    return dst
