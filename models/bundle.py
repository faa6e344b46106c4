"""Model bundles: a folder with model.joblib and metadata.json, saved atomically and checked on load.

joblib is pickle: loading runs code. A bundle is only loaded from a folder this user
(or root) owns and nobody else can write, and only after model.joblib matches the sha256
recorded in metadata.json — never load a bundle that came over the network.
"""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import re
import shutil
import tempfile
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import joblib
import numpy as np
import pandas as pd
from sklearn.pipeline import Pipeline

from procsift.collector.schema import LABELS
from procsift.models.errors import BundleError, IncompatibleModel, UntrustedBundle
from procsift.models.explain import Explanation, explain_pipeline
from procsift.models.fastpath import row_proba
from procsift.models.features import FEATURE_NAMES, PROC_FEATURE_NAMES, RAW_COLUMNS, TREE_FEATURE_NAMES
from procsift.models.kinds import MODEL_KINDS, input_columns

__all__ = ["Bundle", "BundleVersionWarning", "load_bundle", "save_bundle", "default_bundle_path",
           "library_versions", "file_sha256"]

BUNDLE_FORMAT = 1
MODEL_FILE = "model.joblib"
META_FILE = "metadata.json"
_CLUSTER = re.compile(r"^cluster-\d+$")


class BundleVersionWarning(UserWarning):
    """The bundle was saved by other library versions than the ones loading it."""


def library_versions() -> dict[str, str]:
    """Versions of the libraries a bundle depends on."""
    import platform

    import sklearn
    try:
        from importlib.metadata import version
        procsift_version = version("procsift")
    except Exception:  # noqa: BLE001 - not installed as a distribution (e.g. a source checkout)
        procsift_version = "unknown"
    return {"procsift": procsift_version, "scikit-learn": sklearn.__version__, "numpy": np.__version__,
            "joblib": joblib.__version__, "python": platform.python_version()}


def file_sha256(path: str | os.PathLike[str]) -> str:
    """Hex sha256 of a file's bytes."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def default_bundle_path() -> Path:
    """Where the default bundle (trained on the shipped datasets) lives inside the package."""
    return Path(__file__).resolve().parent / "default"


@dataclass
class Bundle:
    """A fitted model with what it needs to be trusted: labels, window length, features, scores."""

    kind: str
    pipeline: Pipeline
    fallback: Pipeline | None
    metadata: dict[str, Any]
    path: Path | None = None

    @property
    def labels(self) -> tuple[str, ...]:
        """Labels in the column order of predict_frame's probabilities."""
        return tuple(str(c) for c in self.pipeline.classes_)

    @property
    def window_s(self) -> float:
        """Window length the model was trained on, in seconds."""
        return float(self.metadata["window_s"])

    @property
    def input_columns(self) -> tuple[str, ...]:
        """Trace columns the model reads."""
        return input_columns(self.kind)

    @property
    def row_columns(self) -> list[str]:
        """Trace columns a window needs for predict_row / predict_frame: the model's, its /proc
        fallback's, and the two that tell which of them applies."""
        return sorted({*self.input_columns, *RAW_COLUMNS, "syscalls", "switches_in"})

    def _fallback_proba(self, raw: np.ndarray) -> np.ndarray:
        assert self.fallback is not None
        p = self.fallback.predict_proba(raw)
        out = np.zeros((len(raw), len(self.labels)))
        for j, c in enumerate(self.fallback.classes_):
            if c in self.labels:
                out[:, self.labels.index(c)] = p[:, j]
        return out

    def needs_fallback(self, frame: pd.DataFrame, collector: str | None = None) -> bool:
        """True when the rows carry no syscall counts (the /proc collector) and a fallback exists."""
        if self.fallback is None or frame.empty:
            return False
        if collector is not None:
            return collector == "proc"
        return bool((frame["syscalls"].to_numpy() == 0).all() and (frame["switches_in"].to_numpy() > 0).any())

    def predict_frame(self, frame: pd.DataFrame, collector: str | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Label and probabilities of every window of a trace frame.

        Parameters
        ----------
        frame : DataFrame of trace rows (n_windows rows)
        collector : "bpf", "proc" or None (None: guess from the rows)

        Returns
        -------
        labels : ndarray of shape (n_windows,), str
        proba : ndarray of shape (n_windows, len(self.labels))
        """
        if frame.empty:
            return np.array([], dtype=object), np.zeros((0, len(self.labels)))
        if self.needs_fallback(frame, collector):
            proba = self._fallback_proba(frame.loc[:, list(RAW_COLUMNS)].to_numpy(dtype=np.float64))
        else:
            proba = self.pipeline.predict_proba(frame.loc[:, list(self.input_columns)].to_numpy(dtype=np.float64))
        return np.asarray(self.labels, dtype=object)[np.argmax(proba, axis=1)], proba

    def predict_row(self, row: Mapping[str, Any] | pd.Series, collector: str | None = None) -> tuple[str, np.ndarray]:
        """Label and probabilities of one window (a trace row or Window.as_record()); the daemon's hot path.

        For pos this uses the fitted SLP/RW (one window has no period to re-predict them from).
        """
        use_fallback = self.fallback is not None and (
            collector == "proc" or (collector is None and float(row["syscalls"]) == 0 and float(row["switches_in"]) > 0))
        if use_fallback:
            proba = self._fallback_proba(np.array([[float(row[c]) for c in RAW_COLUMNS]]))[0]
        else:
            proba = row_proba(self.kind, self.pipeline, np.array([[float(row[c]) for c in self.input_columns]]))[0]
        return self.labels[int(np.argmax(proba))], proba

    def explain_row(self, row: Mapping[str, Any] | pd.Series) -> Explanation:
        """The decision path (tree), cluster likelihoods (em) or thresholds (pos) behind one window's label."""
        raw = np.array([[float(row[c]) for c in self.input_columns]])
        return explain_pipeline(self.kind, self.pipeline, raw)


def _expected_features(kind: str) -> list[str]:
    return {"pos": [], "tree": list(TREE_FEATURE_NAMES)}.get(kind, list(FEATURE_NAMES))


def build_metadata(kind: str, pipeline: Pipeline, fallback: Pipeline | None, window_s: float,
                   training: dict[str, Any], scores: dict[str, Any] | None = None) -> dict[str, Any]:
    """The metadata.json content of a freshly trained bundle."""
    return {
        "format": BUNDLE_FORMAT, "kind": kind, "labels": [str(c) for c in pipeline.classes_],
        "window_s": float(window_s), "input_columns": list(input_columns(kind)),
        "feature_names": _expected_features(kind),
        "fallback_feature_names": list(PROC_FEATURE_NAMES) if fallback is not None else [],
        "params": {k: repr(v) for k, v in pipeline[-1].get_params().items()},
        "versions": library_versions(), "training": training, "scores": scores or {},
    }


def save_bundle(bundle: Bundle, path: str | os.PathLike[str]) -> Path:
    """Write a bundle folder atomically (a temporary folder renamed into place); returns its path."""
    target = Path(path)
    parent = target.parent if str(target.parent) else Path(".")
    if not parent.is_dir():
        raise BundleError(str(target), f"folder {parent} does not exist")
    if target.exists() and not (target / META_FILE).exists() and any(target.iterdir()):
        raise BundleError(str(target), "exists and is not a bundle; refusing to replace it")
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=parent))
    try:
        joblib.dump({"format": BUNDLE_FORMAT, "kind": bundle.kind, "pipeline": bundle.pipeline,
                     "fallback": bundle.fallback}, tmp / MODEL_FILE)
        meta = dict(bundle.metadata, model_sha256=file_sha256(tmp / MODEL_FILE))
        (tmp / META_FILE).write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        os.chmod(tmp, 0o755)
        old = None
        if target.exists():
            old = parent / f".{target.name}.old.{os.getpid()}"
            os.replace(target, old)
        os.replace(tmp, target)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    bundle.metadata = meta
    bundle.path = target
    return target


def _check_trusted(path: Path) -> None:
    """Refuse a folder or file that another user owns or that anyone else may write."""
    me = os.geteuid()
    for p in (path, path / MODEL_FILE, path / META_FILE):
        st = p.stat()
        if st.st_uid not in (me, 0):
            raise UntrustedBundle(str(path), f"{p.name} is owned by uid {st.st_uid}, not by you (uid {me}) or root; "
                                             "refusing to load a pickle others control")
        if st.st_mode & 0o002:
            raise UntrustedBundle(str(path), f"{p.name} is writable by every user; refusing to load it")


def _read_metadata(path: Path) -> dict[str, Any]:
    try:
        meta = json.loads((path / META_FILE).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise BundleError(str(path), f"{META_FILE} is unreadable or not JSON ({err.__class__.__name__})") from err
    if not isinstance(meta, dict):
        raise BundleError(str(path), f"{META_FILE} is not a JSON object")
    missing = [k for k in ("format", "kind", "labels", "window_s", "input_columns", "feature_names",
                           "model_sha256") if k not in meta]
    if missing:
        raise BundleError(str(path), f"{META_FILE} lacks {', '.join(missing)}")
    if meta["format"] != BUNDLE_FORMAT:
        raise IncompatibleModel(str(path), f"bundle format {meta['format']}; this procsift reads format {BUNDLE_FORMAT}")
    return meta


def _check_compatible(path: Path, meta: dict[str, Any]) -> None:
    kind = meta["kind"]
    if kind not in MODEL_KINDS:
        raise IncompatibleModel(str(path), f"unknown model kind {kind!r}")
    if list(meta["input_columns"]) != list(input_columns(kind)):
        raise IncompatibleModel(str(path), "bundle reads other trace columns than this procsift writes; retrain it")
    want = _expected_features(kind)
    got = list(meta["feature_names"])
    if got != want:
        diff = sorted(set(got) ^ set(want))
        hint = f" (differs in {', '.join(diff[:3])})" if diff else " (same names, other order)"
        raise IncompatibleModel(str(path), f"bundle has {len(got)} features, this procsift computes {len(want)}"
                                           f"{hint}; retrain it")
    if meta.get("fallback_feature_names") and list(meta["fallback_feature_names"]) != list(PROC_FEATURE_NAMES):
        raise IncompatibleModel(str(path), "bundle's /proc fallback uses other features; retrain it")
    bad = [lab for lab in meta["labels"] if lab not in LABELS and not _CLUSTER.match(str(lab))]
    if bad:
        raise IncompatibleModel(str(path), f"unknown label {bad[0]!r}; labels are {', '.join(LABELS)}")


def _warn_versions(path: Path, meta: dict[str, Any]) -> None:
    saved = meta.get("versions", {})
    now = library_versions()
    for lib in ("scikit-learn", "numpy", "joblib"):
        if saved.get(lib) and saved[lib] != now[lib]:
            warnings.warn(f"{path}: saved with {lib} {saved[lib]}, loading with {now[lib]}; "
                          "predictions may differ — retrain to be sure", BundleVersionWarning, stacklevel=3)


def load_bundle(path: str | os.PathLike[str] | None = None) -> Bundle:
    """Load and check a bundle folder (None: the default bundle); one clear BundleError on anything wrong."""
    p = Path(path) if path is not None else default_bundle_path()
    if not p.exists():
        what = "the default bundle is not installed" if path is None else "no such bundle folder"
        raise BundleError(str(p), what)
    if not p.is_dir():
        raise BundleError(str(p), "is a file; a bundle is a folder with model.joblib and metadata.json")
    for name in (MODEL_FILE, META_FILE):
        if not (p / name).is_file():
            raise BundleError(str(p), f"no {name} in it (not a bundle)")
    _check_trusted(p)
    meta = _read_metadata(p)
    _check_compatible(p, meta)
    if file_sha256(p / MODEL_FILE) != meta["model_sha256"]:
        raise BundleError(str(p), f"{MODEL_FILE} does not match the sha256 in {META_FILE} (corrupt or replaced)")
    _warn_versions(p, meta)
    try:
        obj = joblib.load(p / MODEL_FILE)
    except (pickle.UnpicklingError, EOFError, ValueError, KeyError, TypeError, IndexError,
            AttributeError, ImportError, OSError) as err:
        raise BundleError(str(p), f"{MODEL_FILE} cannot be loaded ({err.__class__.__name__}: corrupt?)") from err
    if not isinstance(obj, dict) or not isinstance(obj.get("pipeline"), Pipeline) or obj.get("kind") != meta["kind"]:
        raise BundleError(str(p), f"{MODEL_FILE} does not hold a procsift {meta['kind']} model")
    bundle = Bundle(meta["kind"], obj["pipeline"], obj.get("fallback"), meta, p)
    if list(bundle.labels) != list(meta["labels"]):
        raise IncompatibleModel(str(p), "model labels differ from metadata.json")
    return bundle
