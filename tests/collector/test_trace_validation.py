"""Trace values outside their physical range are refused with file, row and column, in every format."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from procsift.collector import TraceError, TraceMeta, Window, read_trace, windows_to_frame, write_trace
from procsift.collector.schema import STR_COLUMNS

PROCSIFT = [sys.executable, "-m", "procsift.service.cli"]


def _frame(n: int = 4) -> pd.DataFrame:
    return windows_to_frame([
        Window(host="h", t_start=100.0 + i, dur_s=1.0, pid=42, start_time=7, comm="nginx", switches_in=40,
               run_ns=5_000_000, syscalls={"epoll_wait": 20, "sendfile": 19}, label="html-serving", source="ng")
        for i in range(n)])


def write_raw(path: Path, frame: pd.DataFrame, meta: TraceMeta | None = None) -> Path:
    """Write `frame` as it is (no validation), with procsift's metadata, in the format of `path`."""
    meta = meta or TraceMeta(window_s=1.0)
    if path.suffix == ".parquet":
        frame = frame.copy()
        for col in frame.columns:  # a column made object by the test: numbers, as a writer would store them
            if frame[col].dtype == object and col not in STR_COLUMNS:
                frame[col] = pd.to_numeric(frame[col])
        table = pa.Table.from_pandas(frame, preserve_index=False)
        pq.write_table(table.replace_schema_metadata({b"procsift": meta.to_json().encode()}), path)
    elif path.suffix == ".csv":
        with open(path, "w") as fh:
            fh.write(f"# procsift {meta.to_json()}\n")
            frame.to_csv(fh, index=False)
    else:
        write_trace(path, _frame(1), meta)  # header from the real writer, then hostile rows
        head = path.read_text().split("@data\n")[0] + "@data\n"
        rows = [",".join("?" if v is None else f"'{v}'" if isinstance(v, str) else str(v) for v in r)
                for r in frame.itertuples(index=False)]
        path.write_text(head + "\n".join(rows) + "\n")
    return path


BAD_VALUES = [
    ("syscalls", -13, "syscalls"),
    ("run_ns", -1, "run_ns"),
    ("dur_s", float("nan"), "dur_s"),
    ("dur_s", float("inf"), "dur_s"),
    ("dur_s", 0.0, "dur_s"),
    ("dur_s", -1.0, "dur_s"),
    ("dur_s", 86_400.0 * 400, "dur_s"),
    ("t_start", float("nan"), "t_start"),
    ("t_start", -5.0, "t_start"),
    ("insufficient", 2.5, "insufficient"),
    ("exited", 7, "exited"),
    ("pid", -4, "pid"),
    ("pid", 2**40, "pid"),
    ("switches_in", 2**63 - 1, "switches_in"),
]


@pytest.mark.parametrize("ext", ["parquet", "csv", "arff"])
@pytest.mark.parametrize("column, value, named", BAD_VALUES)
def test_a_value_outside_its_range_is_refused_naming_row_and_column(
        tmp_path: Path, ext: str, column: str, value: object, named: str) -> None:
    frame = _frame()
    frame[column] = frame[column].astype(object)
    frame.loc[2, column] = value
    path = write_raw(tmp_path / f"bad.{ext}", frame)
    with pytest.raises(TraceError) as info:
        read_trace(path)
    msg = str(info.value)
    assert msg.startswith(f"{path}: row 3, column {named!r}"), msg
    assert "allowed" in msg
    assert info.value.row == 3 and info.value.column == named


def test_writing_a_bad_value_is_refused_too(tmp_path: Path) -> None:
    frame = _frame()
    frame.loc[1, "runq_ns"] = -5
    with pytest.raises(TraceError, match="row 2, column 'runq_ns'"):
        write_trace(tmp_path / "x.parquet", frame, TraceMeta(window_s=1.0))
    assert not (tmp_path / "x.parquet").exists()


@pytest.mark.parametrize("meta_change, why", [
    ({"window_s": -2}, "window_s"), ({"window_s": "abc"}, "window_s"), ({"window_s": float("inf")}, "window_s"),
    ({"window_s": True}, "window_s"), ({"syscall_duty": 0}, "syscall_duty"), ({"host": "x"}, "host"),
    ({"schema_version": "3"}, "schema_version"),
])
def test_bad_metadata_is_refused(tmp_path: Path, meta_change: dict[str, object], why: str) -> None:
    meta = json.loads(TraceMeta(window_s=1.0).to_json())
    meta.update(meta_change)
    path = tmp_path / "m.csv"
    with open(path, "w") as fh:
        fh.write(f"# procsift {json.dumps(meta)}\n")
        _frame().to_csv(fh, index=False)
    with pytest.raises(TraceError, match=why):
        read_trace(path)


def test_a_trace_spanning_absurdly_many_windows_is_refused(tmp_path: Path) -> None:
    frame = _frame()
    frame.loc[3, "t_start"] = 4e9  # a century after the other rows: 10^9 windows to re-aggregate
    path = write_raw(tmp_path / "span.parquet", frame)
    with pytest.raises(TraceError, match="t_start"):
        read_trace(path)


def test_a_text_column_holding_numbers_is_refused(tmp_path: Path) -> None:
    frame = _frame()
    frame["comm"] = [1, 2, 3, 4]
    path = write_raw(tmp_path / "c.parquet", frame)
    with pytest.raises(TraceError, match="column 'comm'"):
        read_trace(path)


def test_a_fifo_or_folder_is_not_read(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.csv"
    os.mkfifo(fifo)
    with pytest.raises(TraceError, match="not a regular file"):
        read_trace(fifo)


def _as_nobody() -> list[str]:
    return ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"] if os.geteuid() == 0 else []


@pytest.mark.parametrize("ext", ["csv", "arff", "parquet"])
def test_an_unreadable_trace_is_one_line_for_a_user(open_tmp: Path, ext: str) -> None:
    path = open_tmp / f"secret.{ext}"
    write_trace(path, windows_to_frame([]), TraceMeta(window_s=1.0))
    os.chmod(path, 0o000)
    if os.geteuid() != 0 and os.access(path, os.R_OK):
        pytest.skip("this user can read a mode-000 file")
    res = subprocess.run([*_as_nobody(), *PROCSIFT, "trace", "info", str(path)], capture_output=True,
                         text=True, timeout=300, env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
    assert res.returncode == 1 and "Traceback" not in res.stderr, res.stderr
    assert res.stderr.strip().splitlines() == [f"procsift: error: {path}: cannot read it (Permission denied)"]


def test_trace_info_on_negative_counts_is_one_line(tmp_path: Path) -> None:
    frame = _frame()
    frame.loc[0, "syscalls"] = -13800
    path = write_raw(tmp_path / "neg.csv", frame)
    res = subprocess.run([*PROCSIFT, "trace", "info", str(path)], capture_output=True, text=True, timeout=300)
    assert res.returncode == 1 and "-13,800" not in res.stdout
    assert res.stderr.strip().splitlines() == [
        f"procsift: error: {path}: row 1, column 'syscalls': -13800 is not allowed; allowed: a whole number "
        "0 to 9007199254740992"]
