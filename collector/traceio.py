"""Trace files: Parquet (native, with metadata), CSV and ARFF (Weka) import/export.

Every write goes to a temporary file in the target folder and is renamed into place,
so a reader never sees a half-written trace.
"""

from __future__ import annotations

import functools
import json
import os
import platform
import socket
import tempfile
import time
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
    BOOL_COLUMNS, COLUMNS, FLOAT_COLUMNS, INT_COLUMNS, LABELS, SCHEMA_VERSION, STR_COLUMNS,
    Window,
)

__all__ = [
    "TraceMeta", "Trace", "windows_to_frame", "read_trace", "write_trace", "host_facts",
    "FORMATS", "format_of", "windows_to_columns", "window_values",
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

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str | bytes, path: str) -> "TraceMeta":
        try:
            raw = json.loads(text)
            return cls(
                window_s=float(raw["window_s"]), collector=str(raw.get("collector", "bpf")),
                syscall_duty=float(raw.get("syscall_duty", 1.0)),
                schema_version=int(raw["schema_version"]),
                collector_version=str(raw.get("collector_version", "?")),
                created=float(raw.get("created", 0.0)), host=dict(raw.get("host", {})),
            )
        except (ValueError, KeyError, TypeError) as err:
            raise TraceError(path, f"unreadable procsift metadata ({err})") from err


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
    """Check columns, values and labels, and give every column its type."""
    missing = [c for c in COLUMNS if c not in frame.columns and c not in ("label", "source")]
    if missing:
        shown = ", ".join(missing[:5]) + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")
        raise TraceError(path, f"missing columns {shown} (not a procsift trace of schema {SCHEMA_VERSION})")
    out = {}
    n = len(frame)
    for col in COLUMNS:
        if col not in frame.columns:
            out[col] = pd.Series([None] * n, dtype="object")
            continue
        s = frame[col]
        try:
            if col in INT_COLUMNS:
                out[col] = pd.to_numeric(s, errors="raise").astype("int64")
            elif col in FLOAT_COLUMNS:
                out[col] = pd.to_numeric(s, errors="raise").astype("float64")
            elif col in BOOL_COLUMNS:
                out[col] = s.map(_to_bool).astype("bool")
            else:
                out[col] = s.astype("object").where(s.notna(), None)
                if col not in ("label", "source"):
                    out[col] = out[col].fillna("")
        except (ValueError, TypeError) as err:
            raise TraceError(path, f"column {col!r} holds a bad value ({err})") from err
    result = pd.DataFrame(out, columns=list(COLUMNS))
    labels = result["label"].dropna()
    labels = labels[labels != ""]
    bad = sorted(set(labels) - set(LABELS))
    if bad:
        raise TraceError(path, f"unknown label {bad[0]!r}; labels are {', '.join(LABELS)}")
    result.loc[result["label"] == "", "label"] = None
    return result


def _to_bool(v: object) -> bool:
    if isinstance(v, str):
        if v.strip().lower() in ("1", "true", "t", "yes"):
            return True
        if v.strip().lower() in ("0", "false", "f", "no", ""):
            return False
        raise ValueError(f"not a boolean: {v!r}")
    return bool(v)


def format_of(path: str | os.PathLike[str]) -> str:
    """The trace format a file name implies (by its extension)."""
    ext = Path(path).suffix.lower().lstrip(".")
    if ext in ("parquet", "pq"):
        return "parquet"
    if ext in FORMATS:
        return ext
    raise TraceError(str(path), f"unknown trace format {ext!r}; use .parquet, .csv or .arff")


def _atomic_write(path: Path, writer: Any) -> None:
    """Run writer(tmp_path) then rename tmp over `path`; no half-written file, ever."""
    path = Path(path)
    folder = path.parent if str(path.parent) else Path(".")
    if not folder.is_dir():
        raise TraceError(str(path), f"folder {folder} does not exist")
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=folder)
    os.close(fd)
    try:
        writer(tmp)
        with open(tmp, "rb") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def write_trace(path: str | os.PathLike[str], rows: pd.DataFrame | Sequence[Window], meta: TraceMeta) -> Path:
    """Write rows to `path` (format by extension), atomically; returns the path."""
    path = Path(path)
    frame = rows if isinstance(rows, pd.DataFrame) else windows_to_frame(rows)
    frame = _coerce(frame, str(path))
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
    if not p.exists():
        raise TraceError(str(p), "no such file")
    if p.is_dir():
        raise TraceError(str(p), "is a folder, not a trace file")
    fmt = format_of(p)
    if fmt == "parquet":
        try:
            table = pq.read_table(p)
        except (pa.ArrowException, OSError) as err:
            raise TraceError(str(p), f"not a readable Parquet file (corrupt or truncated?): {err}") from err
        raw = (table.schema.metadata or {}).get(_META_KEY)
        if raw is None:
            raise TraceError(str(p), "Parquet file without procsift metadata (not a procsift trace)")
        meta = TraceMeta.from_json(raw, str(p))
        _check_version(meta, str(p))
        frame = table.to_pandas()
    elif fmt == "csv":
        meta, frame = _read_csv(p)
    else:
        meta, frame = _read_arff(p)
    return Trace(_coerce(frame, str(p)), meta)


def _check_version(meta: TraceMeta, path: str) -> None:
    if meta.schema_version != SCHEMA_VERSION:
        hint = " (re-record it: version 3 added the socket columns)" if meta.schema_version < SCHEMA_VERSION else ""
        raise TraceError(path, f"schema version {meta.schema_version}; this procsift reads version {SCHEMA_VERSION}{hint}")


def _read_csv(p: Path) -> tuple[TraceMeta, pd.DataFrame]:
    try:
        with open(p, encoding="utf-8") as fh:
            first = fh.readline()
            if first.startswith("# procsift "):
                meta = TraceMeta.from_json(first[len("# procsift "):], str(p))
                _check_version(meta, str(p))
            else:
                fh.seek(0)
                meta = None
            frame = pd.read_csv(fh, keep_default_na=False, na_values={"label": [""], "source": [""]},
                                dtype={c: str for c in STR_COLUMNS})
    except (UnicodeDecodeError, pd.errors.ParserError, pd.errors.EmptyDataError) as err:
        raise TraceError(str(p), f"not a readable CSV trace: {err}") from err
    if meta is None:
        window = float(np.median(frame["dur_s"])) if "dur_s" in frame and len(frame) else 1.0
        meta = TraceMeta(window_s=window, collector="unknown")
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


def _read_arff(p: Path) -> tuple[TraceMeta, pd.DataFrame]:
    meta: TraceMeta | None = None
    names: list[str] = []
    rows: list[list[str | None]] = []
    try:
        with open(p, encoding="utf-8") as fh:
            in_data = False
            for lineno, line in enumerate(fh, 1):
                line = line.strip()
                if not line:
                    continue
                if line.startswith("% procsift "):
                    meta = TraceMeta.from_json(line[len("% procsift "):], str(p))
                    _check_version(meta, str(p))
                    continue
                if line.startswith("%"):
                    continue
                if in_data:
                    fields = _split_arff_line(line)
                    if len(fields) != len(names):
                        raise TraceError(str(p), f"line {lineno}: {len(fields)} values for {len(names)} attributes")
                    rows.append(fields)
                elif line.lower().startswith("@attribute"):
                    parts = line.split(None, 2)
                    if len(parts) < 3:
                        raise TraceError(str(p), f"line {lineno}: malformed @attribute")
                    names.append(parts[1].strip("'\""))
                elif line.lower().startswith("@data"):
                    in_data = True
    except UnicodeDecodeError as err:
        raise TraceError(str(p), f"not a readable ARFF file: {err}") from err
    if not names:
        raise TraceError(str(p), "no @attribute lines (not an ARFF file)")
    frame = pd.DataFrame(rows, columns=names)
    if meta is None:
        window = float(pd.to_numeric(frame["dur_s"]).median()) if "dur_s" in frame and len(frame) else 1.0
        meta = TraceMeta(window_s=window, collector="unknown")
    return meta, frame
