"""Model bundles: a folder with model.joblib and metadata.json, saved atomically and checked on load.

joblib is pickle: loading runs code. A bundle is a *trusted* folder: it, model.joblib and
metadata.json are owned by root or the user loading it, writable by nobody else (no group
or world write bit), and the files are regular files, not symbolic links. model.joblib is
read once into memory; the sha256 recorded in metadata.json is checked over those bytes and
the very same bytes are unpickled (the file is never reopened, so nothing can be swapped in
between). The hash proves the file is whole, not who wrote it: the ownership rule does
that. Never load a bundle that came over the network.
"""

from __future__ import annotations

import hashlib
import io
import json
import math
import os
import re
import shutil
import stat
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

from procsift.collector.schema import LABELS, WINDOW_RANGE_S
from procsift.collector.trust import open_member, read_all, trust_problem
from procsift.models.errors import BundleError, IncompatibleModel, UntrustedBundle
from procsift.models.explain import Explanation, explain_pipeline
from procsift.models.fastpath import row_proba
from procsift.models.features import FEATURE_NAMES, PROC_FEATURE_NAMES, RAW_COLUMNS, TREE_FEATURE_NAMES
from procsift.models.kinds import MODEL_KINDS, input_columns

__all__ = ["Bundle", "BundleVersionWarning", "load_bundle", "save_bundle", "default_bundle_path",
           "library_versions", "file_sha256", "check_bundle_target", "public_metadata"]

BUNDLE_FORMAT = 1
MODEL_FILE = "model.joblib"
META_FILE = "metadata.json"
MAX_META_BYTES = 16 << 20
MAX_MODEL_BYTES = 1 << 30
_CLUSTER = re.compile(r"^cluster-\d+$")
_SHA256 = re.compile(r"^[0-9a-f]{64}$")


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


def check_bundle_target(target: Path) -> None:
    """Refuse, before any work, a place a bundle cannot be saved to (a file, a folder of other things)."""
    parent = target.parent if str(target.parent) else Path(".")
    if not parent.is_dir():
        raise BundleError(str(target), f"folder {parent} does not exist")
    if target.exists() and not target.is_dir():
        raise BundleError(str(target), "is a file, not a bundle folder; refusing to replace it")
    try:
        foreign = target.exists() and not (target / META_FILE).exists() and any(target.iterdir())
    except OSError as err:
        raise BundleError(str(target), f"cannot look into it ({err.strerror})") from err
    if foreign:
        raise BundleError(str(target), "exists and is not a bundle; refusing to replace it")


def save_bundle(bundle: Bundle, path: str | os.PathLike[str]) -> Path:
    """Write a bundle folder atomically (a temporary folder renamed into place); returns its path."""
    target = Path(path)
    check_bundle_target(target)
    parent = target.parent if str(target.parent) else Path(".")
    try:
        tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=parent))
    except OSError as err:
        raise BundleError(str(target), f"cannot write in {parent} ({err.strerror})") from err
    try:
        joblib.dump({"format": BUNDLE_FORMAT, "kind": bundle.kind, "pipeline": bundle.pipeline,
                     "fallback": bundle.fallback}, tmp / MODEL_FILE)
        meta = dict(bundle.metadata, model_sha256=file_sha256(tmp / MODEL_FILE))
        (tmp / META_FILE).write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        for f in (MODEL_FILE, META_FILE):  # a trusted bundle whatever the umask (see load_bundle)
            os.chmod(tmp / f, 0o644)
        os.chmod(tmp, 0o755)
        old = None
        if target.exists():
            old = parent / f".{target.name}.old.{os.getpid()}"
            os.replace(target, old)
        os.replace(tmp, target)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    except BaseException as err:
        shutil.rmtree(tmp, ignore_errors=True)
        if isinstance(err, OSError):
            raise BundleError(str(target), f"cannot write the bundle ({err.strerror or err})") from err
        raise
    bundle.metadata = meta
    bundle.path = target
    return target


def _read_member(path: Path, dir_fd: int, name: str, limit: int) -> bytes:
    """One file of the bundle, opened relative to the folder already checked, checked, read once."""
    try:
        fd = open_member(name, dir_fd)
    except FileNotFoundError:
        raise BundleError(str(path), f"no {name} in it (not a bundle)") from None
    except OSError as err:
        if os.path.islink(path / name):
            raise UntrustedBundle(str(path), f"{name} is a symbolic link; a bundle's files must be in "
                                             "the folder itself") from err
        raise BundleError(str(path), f"cannot read {name} ({err.strerror})") from err
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise BundleError(str(path), f"{name} is not a regular file")
        _refuse_untrusted(path, st, name)
        data = read_all(fd, limit)
    except OSError as err:
        raise BundleError(str(path), f"cannot read {name} ({err.strerror})") from err
    finally:
        os.close(fd)
    if data is None:
        raise BundleError(str(path), f"{name} is over {limit >> 20} MiB; not a procsift bundle")
    return data


def _refuse_untrusted(path: Path, st: os.stat_result, what: str) -> None:
    why = trust_problem(st, what)
    if why is None:
        return
    if "owned by" in why:
        raise UntrustedBundle(str(path), f"{why}; refusing to load a pickle others control")
    raise UntrustedBundle(str(path), f"{why}; refusing to load a pickle others could have written "
                                     "(chmod g-w,o-w it)")


def _bad(path: Path, key: str, value: object, allowed: str) -> BundleError:
    shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:37] + "..."
    return BundleError(str(path), f"{META_FILE}: {key} = {shown} is not allowed; allowed: {allowed}", field=key)


def _str_list(value: object, nonempty: bool = False) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value) and (bool(value) or not nonempty)


def _non_finite(value: Any, where: str = "") -> tuple[str, float] | None:
    """The first NaN or infinity anywhere in a JSON document, as (dotted path, value)."""
    if isinstance(value, float) and not math.isfinite(value):
        return where, value
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for k, v in items:
        found = _non_finite(v, f"{where}.{k}" if where else str(k))
        if found:
            return found
    return None


def _read_metadata(path: Path, data: bytes) -> dict[str, Any]:
    """Parse metadata.json and check every field it must or may have (the bundle metadata schema)."""
    try:
        meta = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as err:
        raise BundleError(str(path), f"{META_FILE} is unreadable or not JSON ({err.__class__.__name__})") from err
    if not isinstance(meta, dict):
        raise BundleError(str(path), f"{META_FILE} is not a JSON object")
    missing = [k for k in ("format", "kind", "labels", "window_s", "input_columns", "feature_names",
                           "model_sha256") if k not in meta]
    if missing:
        raise BundleError(str(path), f"{META_FILE} lacks {', '.join(missing)}", field=missing[0])
    fmt = meta["format"]
    if isinstance(fmt, bool) or not isinstance(fmt, int):
        raise _bad(path, "format", fmt, f"the whole number {BUNDLE_FORMAT}")
    if fmt != BUNDLE_FORMAT:
        raise IncompatibleModel(str(path), f"bundle format {fmt}; this procsift reads format {BUNDLE_FORMAT}",
                                field="format")
    if not isinstance(meta["kind"], str):
        raise _bad(path, "kind", meta["kind"], ", ".join(MODEL_KINDS))
    labels = meta["labels"]
    if not _str_list(labels, nonempty=True) or len(set(labels)) != len(labels):
        raise _bad(path, "labels", labels, "a non-empty list of distinct labels (" + ", ".join(LABELS)
                   + ", cluster-N)")
    lo, hi = WINDOW_RANGE_S
    w = meta["window_s"]
    if isinstance(w, bool) or not isinstance(w, (int, float)) or not math.isfinite(w) or not lo <= w <= hi:
        raise _bad(path, "window_s", w, f"a number of seconds {lo:g} to {hi:g}")
    for key in ("input_columns", "feature_names"):
        if not _str_list(meta[key]):
            raise _bad(path, key, meta[key], "a list of names")
    if not _str_list(meta.get("fallback_feature_names", [])):
        raise _bad(path, "fallback_feature_names", meta["fallback_feature_names"], "a list of names")
    if not isinstance(meta["model_sha256"], str) or not _SHA256.match(meta["model_sha256"]):
        raise _bad(path, "model_sha256", meta["model_sha256"], "64 lowercase hex digits")
    versions = meta.get("versions", {})
    if not isinstance(versions, dict) or not all(isinstance(v, str) for v in versions.values()):
        raise _bad(path, "versions", versions, "an object of library name to version text")
    for key in ("training", "scores", "params"):
        if not isinstance(meta.get(key, {}), dict):
            raise _bad(path, key, meta[key], "an object")
    training = meta.get("training", {})
    rs = training.get("random_state", 0)
    if isinstance(rs, bool) or not isinstance(rs, int) or not 0 <= rs < 2**32:
        raise _bad(path, "training", {"random_state": rs}, "random_state a whole number 0 to 2^32-1")
    if not isinstance(training.get("sha256", ""), str) or not isinstance(training.get("files", []), list):
        raise _bad(path, "training", training, "sha256 as text and files as a list")
    found = _non_finite(meta)  # JSON has no NaN or Infinity: /v1/model could not send them
    if found:
        raise _bad(path, found[0], found[1], "finite numbers (JSON has no NaN or Infinity)")
    return meta


def public_metadata(meta: dict[str, Any]) -> dict[str, Any]:
    """The metadata a bundle may show to anyone who can reach the API: no file names or paths
    (the training files are kept as their sha256, window count and collector)."""
    out = dict(meta)
    training = dict(out.get("training", {}))
    if isinstance(training.get("files"), list):
        training["files"] = [{k: v for k, v in f.items() if k != "name"} if isinstance(f, dict) else {}
                             for f in training["files"]]
    out["training"] = training
    return out


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
    """Load and check a bundle folder (None: the default bundle); one clear BundleError on anything wrong.

    In order: the folder and both files are trusted (module docstring), metadata.json passes
    its schema and matches this procsift, model.joblib's bytes match its sha256, and only then
    are those bytes unpickled. Anything unpickling raises becomes a BundleError here.
    """
    p = Path(path) if path is not None else default_bundle_path()
    try:
        dir_fd = os.open(p, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except FileNotFoundError:
        what = "the default bundle is not installed" if path is None else "no such bundle folder"
        raise BundleError(str(p), what) from None
    except NotADirectoryError:
        raise BundleError(str(p), "is a file; a bundle is a folder with model.joblib and metadata.json") from None
    except OSError as err:
        raise BundleError(str(p), f"cannot open the folder ({err.strerror})") from err
    try:
        _refuse_untrusted(p, os.fstat(dir_fd), "the folder")
        for name in (MODEL_FILE, META_FILE):
            try:
                os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
            except FileNotFoundError:
                raise BundleError(str(p), f"no {name} in it (not a bundle)") from None
        meta = _read_metadata(p, _read_member(p, dir_fd, META_FILE, MAX_META_BYTES))
        _check_compatible(p, meta)
        data = _read_member(p, dir_fd, MODEL_FILE, MAX_MODEL_BYTES)
    finally:
        os.close(dir_fd)
    if hashlib.sha256(data).hexdigest() != meta["model_sha256"]:
        raise BundleError(str(p), f"{MODEL_FILE} does not match the sha256 in {META_FILE} (corrupt or replaced)")
    if not data.startswith(b"\x80"):
        # save_bundle writes an uncompressed pickle (protocol 2+ starts with 0x80). joblib would
        # otherwise decompress whatever stream this is without bound (a corrupt zlib stream
        # whose pickle asks for a 2 GB read took 40 s and then a MemoryError).
        raise BundleError(str(p), f"{MODEL_FILE} cannot be loaded: it is compressed or not a pickle (a procsift "
                                  "bundle holds the uncompressed pickle save_bundle writes)")
    _warn_versions(p, meta)
    try:
        obj = joblib.load(io.BytesIO(data))
    except Exception as err:  # noqa: BLE001 - the one unpickling boundary: see below
        # Unpickling calls whatever the pickle names, so a corrupt or foreign model.joblib can
        # raise anything (zlib.error, UnpicklingError, EOFError, ImportError, AttributeError,
        # MemoryError...); every one of them means "not a model this procsift can load".
        raise BundleError(str(p), f"{MODEL_FILE} cannot be loaded ({err.__class__.__name__}: corrupt?)") from err
    if not isinstance(obj, dict) or not isinstance(obj.get("pipeline"), Pipeline) or obj.get("kind") != meta["kind"]:
        raise BundleError(str(p), f"{MODEL_FILE} does not hold a procsift {meta['kind']} model")
    fallback = obj.get("fallback")
    if fallback is not None and not isinstance(fallback, Pipeline):
        raise BundleError(str(p), f"{MODEL_FILE} holds a fallback that is not a model")
    bundle = Bundle(meta["kind"], obj["pipeline"], fallback, meta, p)
    try:
        labels = list(bundle.labels)
    except AttributeError as err:  # a Pipeline never fitted
        raise BundleError(str(p), f"{MODEL_FILE} holds an unfitted model") from err
    if labels != list(meta["labels"]):
        raise IncompatibleModel(str(p), "model labels differ from metadata.json")
    _check_predicts(bundle, p)
    return bundle


def _check_predicts(bundle: Bundle, p: Path) -> None:
    """Run one made-up window through every path a loaded model serves (row, frame, explain, the
    /proc fallback): a model that unpickled but cannot predict is refused here, at load, not in the
    daemon's loop or an API request later (a pickle flipped in one bit did exactly that)."""
    row = dict.fromkeys(bundle.row_columns, 0.0)
    row.update(dur_s=bundle.window_s, switches_in=10.0, syscalls=10.0, nthreads=1.0)
    try:
        _, proba = bundle.predict_row(row)
        _, frame_proba = bundle.predict_frame(pd.DataFrame([row]), collector="bpf")
        bundle.explain_row(row)
        if bundle.fallback is not None:
            bundle.predict_row(row, collector="proc")
        ok = (proba.shape == (len(bundle.labels),) and frame_proba.shape == (1, len(bundle.labels))
              and bool(np.isfinite(proba).all()) and abs(float(proba.sum()) - 1) < 1e-6)
    except Exception as err:  # noqa: BLE001 - the model's own code: whatever it raises, it cannot serve
        raise BundleError(str(p), f"{MODEL_FILE} holds a model that cannot predict ({err.__class__.__name__}: "
                                  "corrupt?)") from err
    if not ok:
        raise BundleError(str(p), f"{MODEL_FILE} holds a model whose probabilities are not probabilities (corrupt?)")
