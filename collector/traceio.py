"""Trace files: Parquet (native, with metadata), CSV and ARFF (Weka) import/export.

Every write goes to a temporary file in the target folder and is renamed into place,
so a reader never sees a half-written trace.
"""

from __future__ import annotations

import functools
import io
import json
import math
import os
import platform
import socket
import stat
import tempfile
import time
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from procsift.collector.errors import TraceError
from procsift.collector.schema import (
    BOOL_COLUMNS, COLUMNS, FLOAT_COLUMNS, INT_COLUMNS, LABELS, MAX_TRACE_WINDOWS, SCHEMA_VERSION, STR_COLUMNS,
    TEXT_MAX, WINDOW_RANGE_S, Window, allowed_values, value_range,
)

__all__ = [
    "TraceMeta", "Trace", "windows_to_frame", "read_trace", "write_trace", "host_facts",
    "FORMATS", "format_of", "windows_to_columns", "window_values", "writable",
]

COLLECTOR_VERSION = "0.1.0"
_META_KEY = b"procsift"
FORMATS = ("parquet", "csv", "arff")


def host_facts() -> dict[str, Any]:
    """Facts about this machine stored with every trace."""
    return {
        "hostname": socket.gethostname(),
        "kernel": platform.release(),
        "ncpu": os.cpu_count() or 1,
        "python": platform.python_version(),
    }


@dataclass(frozen=True)
class TraceMeta:
    """What a trace file says about itself."""

    window_s: float
    collector: str = "bpf"  # "bpf" or "proc" (fallback: no syscall counts)
    syscall_duty: float = 1.0  # share of each window syscalls were counted (counts scaled)
    schema_version: int = SCHEMA_VERSION
    collector_version: str = COLLECTOR_VERSION
    created: float = field(default_factory=time.time)
    host: dict[str, Any] = field(default_factory=host_facts)
    duration_s: float | None = None  # how long the recording ran (None: not said, e.g. an older file)

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str | bytes, path: str) -> "TraceMeta":
        """Parse and check the metadata a trace carries; a TraceError naming the field otherwise."""
        try:
            raw = json.loads(text)
        except (ValueError, RecursionError) as err:
            raise TraceError(path, f"unreadable procsift metadata ({err.__class__.__name__})") from err
        if not isinstance(raw, dict):
            raise TraceError(path, "procsift metadata is not a JSON object")
        lo, hi = WINDOW_RANGE_S
        return cls(
            window_s=_meta_number(raw, "window_s", path, lo, hi, f"a number of seconds {lo:g} to {hi:g}"),
            collector=_meta_text(raw, "collector", path, "bpf"),
            syscall_duty=_meta_number(raw, "syscall_duty", path, 0.0, 1.0, "a share > 0 and at most 1", 1.0,
                                      open_lo=True),
            schema_version=_meta_int(raw, "schema_version", path),
            collector_version=_meta_text(raw, "collector_version", path, "?"),
            created=_meta_number(raw, "created", path, 0.0, 2.0**32, "unix seconds", 0.0),
            host=_meta_host(raw, path),
            duration_s=_meta_number(raw, "duration_s", path, 0.0, 1e9, "seconds >= 0", None),
        )


_REQUIRED: Any = object()


def _meta_bad(path: str, key: str, value: object, allowed: str) -> TraceError:
    shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:37] + "..."
    return TraceError(path, f"procsift metadata {key} = {shown} is not allowed; allowed: {allowed}")


def _meta_number(raw: dict[str, Any], key: str, path: str, lo: float, hi: float, allowed: str,
                 default: Any = _REQUIRED, open_lo: bool = False) -> Any:
    if key not in raw or (raw[key] is None and default is not _REQUIRED):
        if default is _REQUIRED:
            raise TraceError(path, f"procsift metadata lacks {key}")
        return default
    v = raw[key]
    if (isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v)
            or not (lo < v if open_lo else lo <= v) or v > hi):
        raise _meta_bad(path, key, v, allowed)
    return float(v)


def _meta_int(raw: dict[str, Any], key: str, path: str) -> int:
    v = raw.get(key)
    if isinstance(v, bool) or not isinstance(v, int):
        raise _meta_bad(path, key, v, "a whole number") if key in raw else \
            TraceError(path, f"procsift metadata lacks {key}")
    return v


def _meta_text(raw: dict[str, Any], key: str, path: str, default: str) -> str:
    v = raw.get(key, default)
    if not isinstance(v, str) or len(v) > 64:
        raise _meta_bad(path, key, v, "text of at most 64 characters")
    return v


def _meta_host(raw: dict[str, Any], path: str) -> dict[str, Any]:
    v = raw.get("host", {})
    if not isinstance(v, dict):
        raise _meta_bad(path, "host", v, "an object of host facts")
    return v


@dataclass(frozen=True)
class Trace:
    """A loaded trace: its rows (one per process per window) and its metadata."""

    frame: pd.DataFrame
    meta: TraceMeta


def windows_to_frame(windows: Iterable[Window]) -> pd.DataFrame:
    """Rows as a DataFrame with every trace column, in file order and types."""
    records = [w.as_record() for w in windows]
    frame = pd.DataFrame.from_records(records, columns=list(COLUMNS))
    return _coerce(frame, "<memory>")


@functools.lru_cache(maxsize=None)
def _getter(col: str) -> Callable[[Window, Mapping[str, int]], object]:
    """How to read trace column `col` off a Window (given its per-category counts)."""
    if col == "syscalls":
        return lambda w, cats: w.syscalls_total
    if col == "insufficient":
        return lambda w, cats: w.insufficient
    if col.startswith("cat_"):
        name = col[4:]
        return lambda w, cats: cats[name]
    if col.startswith("sys_"):
        name = col[4:]
        return lambda w, cats: w.syscalls.get(name, 0)
    return lambda w, cats: getattr(w, col)


def windows_to_columns(windows: Sequence[Window], columns: Iterable[str]) -> pd.DataFrame:
    """Only the given numeric trace columns of `windows`, built straight from the rows.

    The per-window path of the daemon: windows_to_frame validates all ~450 columns (about
    200 ms a window), which rows the collector itself built do not need.
    """
    cats = [w.categories() for w in windows]
    data: dict[str, np.ndarray] = {}
    for col in columns:
        get = _getter(col)
        data[col] = np.asarray([get(w, c) for w, c in zip(windows, cats)],
                               dtype=np.float64 if col in FLOAT_COLUMNS else np.int64)
    return pd.DataFrame(data)


def window_values(w: Window, columns: Iterable[str]) -> dict[str, object]:
    """One window's given trace columns as a mapping: windows_to_columns for a single row,
    without building a DataFrame (~1 ms, more than the model's per-row path itself)."""
    cats = w.categories()
    return {col: _getter(col)(w, cats) for col in columns}


def _coerce(frame: pd.DataFrame, path: str) -> pd.DataFrame:
    """Check columns, values and labels against the trace schema, and give every column its type.

    The one validation of trace values (collector/schema.py says what each column may hold):
    a value outside its range is a TraceError naming the row (1-based) and the column.
    """
    missing = [c for c in COLUMNS if c not in frame.columns and c not in ("label", "source")]
    if missing:
        shown = ", ".join(missing[:5]) + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")
        raise TraceError(path, f"missing columns {shown} (not a procsift trace of schema {SCHEMA_VERSION})")
    twice = sorted({str(c) for c in frame.columns[frame.columns.duplicated()] if c in COLUMNS})
    if twice:
        raise TraceError(path, "appears twice", column=twice[0])
    out = {}
    n = len(frame)
    for col in COLUMNS:
        if col not in frame.columns:
            out[col] = pd.Series([None] * n, dtype="object")
        elif col in BOOL_COLUMNS:
            out[col] = _boolean(frame[col], col, path)
        elif col in STR_COLUMNS:
            out[col] = _text(frame[col], col, path)
        else:
            out[col] = _numeric(frame[col], col, path)
    result = pd.DataFrame(out, columns=list(COLUMNS))
    labels = result["label"].to_numpy(dtype=object)
    bad = np.flatnonzero([lab is not None and lab != "" and lab not in LABELS for lab in labels])
    if len(bad):
        raise TraceError(path, f"unknown label {labels[bad[0]]!r}; labels are {', '.join(LABELS)}",
                         row=int(bad[0]) + 1, column="label")
    result.loc[result["label"] == "", "label"] = None
    return result


def _refuse(path: str, col: str, values: np.ndarray, bad: np.ndarray) -> TraceError:
    """The TraceError for the first row of `bad` (a boolean mask over `values`)."""
    i = int(np.flatnonzero(bad)[0])
    v = values[i]
    shown = repr(v.item() if isinstance(v, np.generic) else v)
    shown = shown if len(shown) <= 40 else shown[:37] + "..."
    return TraceError(path, f"{shown} is not allowed; allowed: {allowed_values(col)}", row=i + 1, column=col)


def _numeric(s: pd.Series, col: str, path: str) -> pd.Series:
    """A numeric column, checked against its range (whole numbers for counts), as int64 or float64."""
    raw = s.to_numpy()
    try:
        num = pd.to_numeric(s, errors="coerce")
    except (TypeError, ValueError) as err:  # nested values (lists, structs) in a Parquet column
        raise TraceError(path, f"holds values that are not numbers ({err})", column=col) from err
    values = num.to_numpy()
    if values.dtype.kind == "b":
        raise _refuse(path, col, raw, np.ones(len(raw), dtype=bool))
    if values.dtype.kind not in "iuf":
        try:
            values = values.astype(np.float64)
        except (TypeError, ValueError, OverflowError) as err:
            raise TraceError(path, f"holds values that are not numbers ({err})", column=col) from err
    unparsed = num.isna().to_numpy() & pd.notna(s).to_numpy() if values.dtype.kind == "f" else None
    if unparsed is not None and unparsed.any():
        raise _refuse(path, col, raw, unparsed)
    lo, hi, open_lo = value_range(col)
    with np.errstate(invalid="ignore"):
        bad = (values <= lo if open_lo else values < lo) | (values > hi)
        if values.dtype.kind == "f":
            bad |= ~np.isfinite(values)
            if col in INT_COLUMNS:
                bad |= np.isfinite(values) & (values != np.floor(values))
    if bad.any():
        raise _refuse(path, col, raw if raw.dtype.kind in "OUS" else values, bad)
    return pd.Series(values.astype(np.float64 if col in FLOAT_COLUMNS else np.int64), index=s.index)


def _boolean(s: pd.Series, col: str, path: str) -> pd.Series:
    """A flag column: true/false, 1/0 (or their spellings in text); nothing else."""
    values = s.to_numpy()
    if values.dtype.kind == "b":
        return pd.Series(values, index=s.index)
    if values.dtype.kind in "iuf":
        bad = ~np.isin(values, (0, 1))
        if bad.any():
            raise _refuse(path, col, values, bad)
        return pd.Series(values == 1, index=s.index)
    out = np.empty(len(values), dtype=bool)
    for i, v in enumerate(values):
        flag = _to_bool(v)
        if flag is None:
            raise _refuse(path, col, values, np.arange(len(values)) == i)
        out[i] = flag
    return pd.Series(out, index=s.index)


def _text(s: pd.Series, col: str, path: str) -> pd.Series:
    """A text column: strings (or empty) of bounded length."""
    values = s.to_numpy(dtype=object)
    present = pd.notna(s).to_numpy()
    bad = present & np.array([not isinstance(v, str) for v in values], dtype=bool)
    if not bad.any() and col != "label":
        limit = TEXT_MAX.get(col, 255)
        bad = present & np.array([isinstance(v, str) and len(v) > limit for v in values], dtype=bool)
    if bad.any():
        raise _refuse(path, col, values, bad)
    out = pd.Series(np.where(present, values, None), index=s.index, dtype="object")
    return out if col in ("label", "source") else out.fillna("")


def _to_bool(v: object) -> bool | None:
    """True/False for the spellings of a flag; None for anything else (2.5, NaN, "maybe")."""
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    if isinstance(v, str):
        t = v.strip().lower()
        if t in ("1", "true", "t", "yes"):
            return True
        if t in ("0", "false", "f", "no", ""):
            return False
        return None
    if isinstance(v, (int, float, np.integer, np.floating)) and v in (0, 1):
        return bool(v)
    return None


def _check_span(frame: pd.DataFrame, meta: TraceMeta, path: str) -> None:
    """The window length is in range and the rows are not absurdly far apart in time."""
    lo, hi = WINDOW_RANGE_S
    if not lo <= meta.window_s <= hi:
        raise TraceError(path, f"window {meta.window_s:g} s is not allowed; allowed: {lo:g} to {hi:g} s")
    if len(frame):
        t = frame["t_start"].to_numpy(dtype=np.float64)
        far = np.abs(t - np.median(t))
        if (t.max() - t.min()) / meta.window_s > MAX_TRACE_WINDOWS:
            i = int(np.argmax(far))
            raise TraceError(path, f"{t[i]:.0f} is {far[i]:.0f} s from the other rows; allowed: one trace spans "
                             f"at most {MAX_TRACE_WINDOWS:,} windows ({MAX_TRACE_WINDOWS * meta.window_s:.0f} s)",
                             row=i + 1, column="t_start")


def format_of(path: str | os.PathLike[str]) -> str:
    """The trace format a file name implies (by its extension)."""
    ext = Path(path).suffix.lower().lstrip(".")
    if ext in ("parquet", "pq"):
        return "parquet"
    if ext in FORMATS:
        return ext
    raise TraceError(str(path), f"unknown trace format {ext!r}; use .parquet, .csv or .arff")


def writable(path: str | os.PathLike[str]) -> None:
    """Refuse now, with one TraceError, a trace path that could not be written later (its folder
    is missing or not writable, or the path is a folder)."""
    path = Path(path)
    fd, tmp = _temp_beside(path, ".probe")
    os.close(fd)
    os.unlink(tmp)


def _temp_beside(path: Path, suffix: str) -> tuple[int, str]:
    """A new temporary file in `path`'s folder, or a TraceError saying why there can be none."""
    folder = path.parent if str(path.parent) else Path(".")
    try:
        if not folder.is_dir():
            raise TraceError(str(path), f"folder {folder} does not exist")
        if path.is_dir():
            raise TraceError(str(path), "is a folder; give a file name to write the trace to")
        return tempfile.mkstemp(prefix=f".{path.name}.", suffix=suffix, dir=folder)
    except OSError as err:
        raise TraceError(str(path), f"cannot write in {folder} ({err.strerror})") from err


def _atomic_write(path: Path, writer: Any) -> None:
    """Run writer(tmp_path) then rename tmp over `path`; no half-written file, ever."""
    path = Path(path)
    fd, tmp = _temp_beside(path, ".tmp")
    os.close(fd)
    try:
        writer(tmp)
        with open(tmp, "rb") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException as err:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        if isinstance(err, OSError):
            raise TraceError(str(path), f"cannot write it ({err.strerror or err})") from err
        raise


def write_trace(path: str | os.PathLike[str], rows: pd.DataFrame | Sequence[Window], meta: TraceMeta) -> Path:
    """Write rows to `path` (format by extension), atomically; returns the path."""
    path = Path(path)
    frame = rows if isinstance(rows, pd.DataFrame) else windows_to_frame(rows)
    frame = _coerce(frame, str(path))
    _check_span(frame, meta, str(path))
    fmt = format_of(path)
    if fmt == "parquet":
        table = pa.Table.from_pandas(frame, preserve_index=False).replace_schema_metadata(None)

        # Only procsift's own metadata: pandas' per-column description, Arrow's copy of the
        # schema, per-column statistics and dictionaries would be most of a file of ~430
        # mostly-zero columns (a one-process recording: 56 KB instead of 106); _coerce
        # restores the types on read.
        def write_parquet(tmp: str) -> None:
            with pq.ParquetWriter(tmp, table.schema, compression="zstd", write_statistics=False,
                                  use_dictionary=False, store_schema=False) as writer:
                writer.write_table(table)
                writer.add_key_value_metadata({_META_KEY: meta.to_json()})
        _atomic_write(path, write_parquet)
    elif fmt == "csv":
        def write_csv(tmp: str) -> None:
            with open(tmp, "w", encoding="utf-8", newline="") as fh:
                fh.write(f"# procsift {meta.to_json()}\n")
                frame.to_csv(fh, index=False)
        _atomic_write(path, write_csv)
    else:
        _atomic_write(path, lambda tmp: _write_arff(tmp, frame, meta))
    return path


def read_trace(path: str | os.PathLike[str]) -> Trace:
    """Load a trace of any supported format; a clear TraceError on anything wrong."""
    p = Path(path)
    try:
        st = p.stat()
    except FileNotFoundError:
        raise TraceError(str(p), "no such file") from None
    except OSError as err:
        raise TraceError(str(p), f"cannot read it ({err.strerror})") from err
    if stat.S_ISDIR(st.st_mode):
        raise TraceError(str(p), "is a folder, not a trace file")
    if not stat.S_ISREG(st.st_mode):
        raise TraceError(str(p), "is not a regular file (a pipe or a device?); give a trace file")
    fmt = format_of(p)
    meta: TraceMeta | None
    try:
        with open(p, "rb") as fh:
            if fmt == "parquet":
                meta, frame = _read_parquet(fh, str(p))
            elif fmt == "csv":
                meta, frame = _read_csv(fh, str(p))
            else:
                meta, frame = _read_arff(fh, str(p))
    except OSError as err:
        raise TraceError(str(p), f"cannot read it ({err.strerror or err})") from err
    frame = _coerce(frame, str(p))
    if meta is None:  # a CSV or ARFF from elsewhere: the window is what its rows say
        meta = TraceMeta(window_s=float(np.median(frame["dur_s"])) if len(frame) else 1.0, collector="unknown")
    _check_span(frame, meta, str(p))
    return Trace(frame, meta)


def _read_parquet(fh: Any, path: str) -> tuple[TraceMeta, pd.DataFrame]:
    try:
        table = pq.read_table(fh)
    except (pa.ArrowException, OSError, ValueError, TypeError, IndexError, KeyError, OverflowError) as err:
        raise TraceError(path, f"not a readable Parquet file (corrupt or truncated?): {err}") from err
    raw = (table.schema.metadata or {}).get(_META_KEY)
    if raw is None:
        raise TraceError(path, "Parquet file without procsift metadata (not a procsift trace)")
    meta = TraceMeta.from_json(raw, path)
    _check_version(meta, path)
    try:
        frame = table.to_pandas()
    except (pa.ArrowException, ValueError, TypeError, OverflowError, KeyError) as err:
        raise TraceError(path, f"columns of types a trace does not have ({err})") from err
    return meta, frame


def _check_version(meta: TraceMeta, path: str) -> None:
    if meta.schema_version != SCHEMA_VERSION:
        hint = " (re-record it: version 3 added the socket columns)" if meta.schema_version < SCHEMA_VERSION else ""
        raise TraceError(path, f"schema version {meta.schema_version}; this procsift reads version {SCHEMA_VERSION}{hint}")


def _read_csv(fh: Any, path: str) -> tuple[TraceMeta | None, pd.DataFrame]:
    try:
        text = io.TextIOWrapper(fh, encoding="utf-8", newline="")
        first = text.readline()
        meta = None
        if first.startswith("# procsift "):
            meta = TraceMeta.from_json(first[len("# procsift "):], path)
            _check_version(meta, path)
        else:
            text.seek(0)
        with warnings.catch_warnings():
            # A row with more values than the header has columns: pandas drops the extra ones with
            # only a warning. That is a damaged file, not a trace.
            warnings.simplefilter("error", pd.errors.ParserWarning)
            frame = pd.read_csv(text, keep_default_na=False, na_values={"label": [""], "source": [""]},
                                dtype={c: str for c in STR_COLUMNS}, index_col=False)
    except (ValueError, OverflowError, pd.errors.EmptyDataError, pd.errors.ParserWarning) as err:
        raise TraceError(path, f"not a readable CSV trace: {err}") from err
    return meta, frame


def _arff_quote(v: object) -> str:
    if v is None or (isinstance(v, float) and np.isnan(v)):
        return "?"
    s = str(v).replace("\\", "\\\\").replace("'", "\\'")
    return f"'{s}'"


def _write_arff(tmp: str, frame: pd.DataFrame, meta: TraceMeta) -> None:
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(f"% procsift {meta.to_json()}\n")
        fh.write("@relation procsift\n\n")
        for col in COLUMNS:
            if col == "label":
                kind = "{" + ",".join(LABELS) + "}"
            elif col in STR_COLUMNS:
                kind = "string"
            else:
                kind = "numeric"
            fh.write(f"@attribute {col} {kind}\n")
        fh.write("\n@data\n")
        cols = [frame[c].tolist() for c in COLUMNS]
        for values in zip(*cols):
            parts = []
            for col, v in zip(COLUMNS, values):
                if col in STR_COLUMNS:
                    parts.append("?" if v is None else (v if col == "label" else _arff_quote(v)))
                elif col in BOOL_COLUMNS:
                    parts.append("1" if v else "0")
                else:
                    parts.append(repr(v) if isinstance(v, float) else str(v))
            fh.write(",".join(parts) + "\n")


def _split_arff_line(line: str) -> list[str | None]:
    out: list[str | None] = []
    i, n = 0, len(line)
    while i <= n:
        if i < n and line[i] in "'\"":
            quote, i, buf = line[i], i + 1, []
            while i < n and line[i] != quote:
                if line[i] == "\\" and i + 1 < n:
                    i += 1
                buf.append(line[i])
                i += 1
            out.append("".join(buf))
            i += 1
            while i < n and line[i] != ",":
                i += 1
            i += 1
        else:
            j = line.find(",", i)
            j = n if j < 0 else j
            tok = line[i:j].strip()
            out.append(None if tok == "?" else tok)
            i = j + 1
            if j == n:
                break
    return out


def _read_arff(fh: Any, path: str) -> tuple[TraceMeta | None, pd.DataFrame]:
    meta: TraceMeta | None = None
    names: list[str] = []
    rows: list[list[str | None]] = []
    in_data = False
    try:
        for lineno, line in enumerate(io.TextIOWrapper(fh, encoding="utf-8"), 1):
            line = line.strip()
            if not line:
                continue
            if line.startswith("% procsift "):
                meta = TraceMeta.from_json(line[len("% procsift "):], path)
                _check_version(meta, path)
                continue
            if line.startswith("%"):
                continue
            if in_data:
                fields = _split_arff_line(line)
                if len(fields) != len(names):
                    raise TraceError(path, f"line {lineno}: {len(fields)} values for {len(names)} attributes")
                rows.append(fields)
            elif line.lower().startswith("@attribute"):
                parts = line.split(None, 2)
                if len(parts) < 3:
                    raise TraceError(path, f"line {lineno}: malformed @attribute")
                name = parts[1].strip("'\"")
                if name in names:
                    raise TraceError(path, f"line {lineno}: attribute {name!r} is declared twice")
                names.append(name)
            elif line.lower().startswith("@data"):
                in_data = True
    except UnicodeDecodeError as err:
        raise TraceError(path, f"not a readable ARFF file: {err}") from err
    if not names:
        raise TraceError(path, "no @attribute lines (not an ARFF file)")
    return meta, pd.DataFrame(rows, columns=names)
