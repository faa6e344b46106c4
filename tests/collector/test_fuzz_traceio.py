"""Property-based fuzzing of the trace reader (Parquet, CSV, ARFF): hostile values in any column,
hostile metadata, and damaged bytes. Every input is either refused with one TraceError or read
into a frame whose every value is in its range — and then summarised and re-aggregated without
any error outside procsift's own tree. Time-bounded (max_examples); counts in fuzz_tally."""

from __future__ import annotations

import collections
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from procsift.collector import ProcsiftError, TraceError, TraceMeta, Window, read_trace, windows_to_frame, write_trace
from procsift.collector.schema import BOOL_COLUMNS, COLUMNS, FLOAT_COLUMNS, INT_COLUMNS, LABELS, value_range
from procsift.models import load_traces
from procsift.service.cli._trace import trace_summary

FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
FORMATS = ("parquet", "csv", "arff")
BASE = windows_to_frame([
    Window(host="h", t_start=100.0 + i * 0.5, dur_s=0.5, pid=40 + i % 2, start_time=7, comm="nginx", exe="/x",
           switches_in=40, run_ns=5_000_000, max_wait_ns=10, syscalls={"epoll_wait": 20, "read": 3},
           label="html-serving" if i % 2 else None, source="ng", exited=i == 3)
    for i in range(4)])
SPECIAL = [0, 1, -1, 2**22, 2**22 + 1, 2**53, 2**53 + 1, 2**63 - 1, 2**64, 0.5, 2.5, -0.0, 1e308, 5e-324,
           "", "nan", "inf", "-inf", "-1", "1e400", "true", "FALSE", "maybe", " 3 ", "\x00", "é", "a" * 5000, None,
           True, False, "interactive", "gaming", "0x10", "1_000"]
HOSTILE = st.one_of(st.integers(-(2**70), 2**70), st.floats(allow_nan=True, allow_infinity=True),
                    st.sampled_from(SPECIAL), st.text(max_size=12))
FUZZED_COLUMNS = list(COLUMNS[:40]) + ["sys_read", "sys_epoll_wait", "cat_poll", "label", "source"]
JSON = st.recursive(st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats() | st.text(max_size=10),
                    lambda kids: st.lists(kids, max_size=3) | st.dictionaries(st.text(max_size=8), kids, max_size=3),
                    max_leaves=8)


def write_raw(path: Path, frame: pd.DataFrame, meta_json: str) -> None:
    """Write a frame as it is, in the format of `path`, with `meta_json` as procsift's metadata."""
    if path.suffix == ".parquet":
        arrays = {}
        for col in frame.columns:
            values = frame[col].tolist()
            try:
                arrays[col] = pa.array(values, from_pandas=True)
            except (pa.ArrowException, OverflowError, TypeError, ValueError):
                arrays[col] = pa.array([None if v is None else str(v) for v in values])  # a text column
        table = pa.table(arrays).replace_schema_metadata({b"procsift": meta_json.encode("utf-8", "surrogatepass")})
        pq.write_table(table, path)
    elif path.suffix == ".csv":
        with open(path, "w", encoding="utf-8", errors="surrogatepass") as fh:
            fh.write(f"# procsift {meta_json}\n")
            frame.to_csv(fh, index=False)
    else:
        head = [f"% procsift {meta_json}", "@relation procsift"] + [f"@attribute {c} string" for c in frame.columns]
        rows = [",".join("?" if v is None else "'" + str(v).replace("\\", "\\\\").replace("'", "\\'") + "'"
                         for v in r) for r in frame.itertuples(index=False)]
        path.write_text("\n".join(head + ["@data"] + rows) + "\n", encoding="utf-8", errors="surrogatepass")


def check(path: Path, tally: collections.Counter[str], name: str) -> None:
    """The property: one TraceError, or a frame every later step may trust."""
    try:
        trace = read_trace(path)
    except TraceError:
        tally[f"{name}: refused with a TraceError"] += 1
        return
    tally[f"{name}: read"] += 1
    f = trace.frame
    assert list(f.columns) == list(COLUMNS)
    for col in INT_COLUMNS | FLOAT_COLUMNS:
        values = f[col].to_numpy()
        lo, hi, open_lo = value_range(col)
        assert values.dtype == (np.float64 if col in FLOAT_COLUMNS else np.int64), col
        assert np.isfinite(values).all() and (values <= hi).all() and ((values > lo) if open_lo else (values >= lo)).all(), col
    for col in BOOL_COLUMNS:
        assert f[col].dtype == bool
    assert set(f["label"].dropna()) <= set(LABELS)
    assert math.isfinite(trace.meta.window_s) and trace.meta.window_s > 0
    try:
        trace_summary(str(path))
        load_traces([path], trace.meta.window_s * 2, every_offset=True)
    except ProcsiftError:
        pass


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fuzz-trace")


@FUZZ
@given(fmt=st.sampled_from(FORMATS),
       edits=st.lists(st.tuples(st.sampled_from(FUZZED_COLUMNS), st.integers(0, len(BASE) - 1), HOSTILE),
                      min_size=1, max_size=4),
       drop=st.lists(st.sampled_from(FUZZED_COLUMNS), max_size=1))
def test_hostile_values(folder: Path, fuzz_tally: collections.Counter[str], fmt: str,
                        edits: list[tuple[str, int, Any]], drop: list[str]) -> None:
    frame = BASE.copy()
    for col, row, value in edits:
        frame[col] = frame[col].astype(object)
        frame.at[row, col] = value
    frame = frame.drop(columns=drop)
    path = folder / f"v.{fmt}"
    write_raw(path, frame, TraceMeta(window_s=0.5).to_json())
    fuzz_tally["trace values"] += 1
    check(path, fuzz_tally, "trace values")


@FUZZ
@given(fmt=st.sampled_from(FORMATS), changes=st.dictionaries(
    st.sampled_from(["window_s", "collector", "syscall_duty", "schema_version", "collector_version", "created",
                     "host", "duration_s", "extra"]), JSON, min_size=1, max_size=3),
       raw=st.one_of(st.none(), st.text(max_size=30)))
def test_hostile_metadata(folder: Path, fuzz_tally: collections.Counter[str], fmt: str,
                          changes: dict[str, Any], raw: str | None) -> None:
    meta = json.loads(TraceMeta(window_s=0.5).to_json())
    meta.update(changes)
    text = raw if raw is not None else json.dumps(meta)
    path = folder / f"m.{fmt}"
    write_raw(path, BASE, text.replace("\n", " "))
    fuzz_tally["trace metadata"] += 1
    check(path, fuzz_tally, "trace metadata")


_GOOD: dict[str, bytes] = {}


def _good_bytes(folder: Path, fmt: str) -> bytes:
    if fmt not in _GOOD:
        write_trace(folder / f"good.{fmt}", BASE, TraceMeta(window_s=0.5))
        _GOOD[fmt] = (folder / f"good.{fmt}").read_bytes()
    return _GOOD[fmt]


@FUZZ
@given(fmt=st.sampled_from(FORMATS), mutations=st.lists(
    st.tuples(st.sampled_from(["flip", "cut", "insert", "delete", "replace"]), st.integers(0, 2**20),
              st.binary(min_size=1, max_size=8)), min_size=1, max_size=4))
def test_damaged_bytes(folder: Path, fuzz_tally: collections.Counter[str], fmt: str,
                       mutations: list[tuple[str, int, bytes]]) -> None:
    data = bytearray(_good_bytes(folder, fmt))
    for op, where, blob in mutations:
        i = where % max(len(data), 1)
        if op == "flip" and data:
            data[i] ^= 1 << (blob[0] % 8)
        elif op == "cut":
            del data[i:]
        elif op == "insert":
            data[i:i] = blob
        elif op == "delete":
            del data[i:i + len(blob)]
        else:
            data[i:i + len(blob)] = blob
    path = folder / f"b.{fmt}"
    path.write_bytes(bytes(data))
    fuzz_tally["trace bytes"] += 1
    check(path, fuzz_tally, "trace bytes")
