"""Schema and trace files: round trips, and every kind of bad file gives one clear TraceError."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from procsift.collector import TraceError, TraceMeta, Window, read_trace, windows_to_frame, write_trace
from procsift.collector.schema import COLUMNS, SCHEMA_VERSION, is_insufficient


def _rows() -> list[Window]:
    return [
        Window(host="h", t_start=100.0, dur_s=1.0, pid=42, start_time=7, ppid=1, comm="ng inx (w)",
               exe="/usr/sbin/nginx", uid=33, nthreads=1, cgroup="/system.slice/nginx",
               run_ns=5_000_000, switches_in=40, voluntary=38, involuntary=2,
               max_wait_ns=900_000_000, run_wait_transitions=76,
               syscalls={"epoll_wait": 20, "sendfile": 19, "accept4": 19}, label="html-serving",
               source="nginx"),
        Window(host="h", t_start=100.0, dur_s=1.0, pid=43, start_time=9, comm="it's \"odd\", yes",
               syscalls={"unknown": 3, "read": 1}, exited=True),
    ]


def test_record_has_every_column_and_categories() -> None:
    rec = _rows()[0].as_record()
    assert list(rec) == list(COLUMNS)
    assert rec["syscalls"] == 58 and rec["sys_sendfile"] == 19
    assert rec["cat_net_send"] == 19 and rec["cat_poll"] == 20 and rec["cat_net_accept"] == 19
    assert rec["insufficient"] is False


def test_insufficient_window() -> None:
    quiet = Window(host="h", t_start=0, dur_s=1, pid=1, start_time=1, switches_in=4)
    assert quiet.insufficient
    assert not Window(host="h", t_start=0, dur_s=1, pid=1, start_time=1, switches_in=5).insufficient
    # A timer tick (one wake-up, one or two calls, well under 1 ms of CPU) is too little too;
    # a third call, a second wake-up or a millisecond on a CPU makes it behaviour.
    tick = dict(host="h", t_start=0, dur_s=1, pid=1, start_time=1, switches_in=1, run_ns=50_000)
    assert Window(**tick, syscalls={"epoll_wait": 1, "read": 1}).insufficient  # type: ignore[arg-type]
    assert not Window(**tick, syscalls={"epoll_wait": 1, "read": 2}).insufficient  # type: ignore[arg-type]
    assert not Window(**{**tick, "switches_in": 2}, syscalls={"read": 1}).insufficient  # type: ignore[arg-type]
    assert not Window(**{**tick, "run_ns": 1_000_000}, syscalls={"read": 1}).insufficient  # type: ignore[arg-type]
    # A CPU loop alone on its core: no syscall, no switch, but the whole window on a CPU.
    assert not Window(host="h", t_start=0, dur_s=1, pid=1, start_time=1, switches_in=0,
                      run_ns=900_000_000).insufficient
    flags = is_insufficient(np.array([4, 1, 1, 0]), np.array([0, 2, 3, 0]), np.array([0, 0, 0, 500_000_000]))
    assert flags.tolist() == [True, True, False, False]


@pytest.mark.parametrize("ext", ["parquet", "csv", "arff"])
def test_round_trip(tmp_path: Path, ext: str) -> None:
    path = tmp_path / f"t.{ext}"
    write_trace(path, _rows(), TraceMeta(window_s=0.5, collector="bpf"))
    trace = read_trace(path)
    expected = windows_to_frame(_rows())
    pd.testing.assert_frame_equal(trace.frame, expected)
    assert trace.meta.window_s == 0.5 and trace.meta.schema_version == SCHEMA_VERSION
    assert [f for f in tmp_path.iterdir()] == [path]  # no temp file left behind


def test_convert_chain_keeps_rows(tmp_path: Path) -> None:
    write_trace(tmp_path / "a.parquet", _rows(), TraceMeta(window_s=1.0))
    t = read_trace(tmp_path / "a.parquet")
    write_trace(tmp_path / "b.arff", t.frame, t.meta)
    t2 = read_trace(tmp_path / "b.arff")
    write_trace(tmp_path / "c.csv", t2.frame, t2.meta)
    pd.testing.assert_frame_equal(read_trace(tmp_path / "c.csv").frame, t.frame)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(TraceError, match="no such file"):
        read_trace(tmp_path / "nope.parquet")


def test_truncated_parquet(tmp_path: Path) -> None:
    good = tmp_path / "good.parquet"
    write_trace(good, _rows(), TraceMeta(window_s=1.0))
    bad = tmp_path / "bad.parquet"
    bad.write_bytes(good.read_bytes()[: good.stat().st_size // 2])
    with pytest.raises(TraceError, match="corrupt or truncated"):
        read_trace(bad)


def test_garbage_csv_and_arff(tmp_path: Path) -> None:
    (tmp_path / "g.csv").write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(TraceError):
        read_trace(tmp_path / "g.csv")
    (tmp_path / "g.arff").write_text("hello\nworld\n")
    with pytest.raises(TraceError, match="not an ARFF"):
        read_trace(tmp_path / "g.arff")


@pytest.mark.parametrize("version, hint", [(SCHEMA_VERSION + 1, ""), (SCHEMA_VERSION - 1, "re-record")])
def test_wrong_schema_version(tmp_path: Path, version: int, hint: str) -> None:
    path = tmp_path / "old.parquet"
    write_trace(path, _rows(), TraceMeta(window_s=1.0))
    table = pq.read_table(path)
    meta = json.loads(table.schema.metadata[b"procsift"])
    meta["schema_version"] = version
    pq.write_table(table.replace_schema_metadata({b"procsift": json.dumps(meta).encode()}), path)
    with pytest.raises(TraceError, match=f"schema version {version}.*{hint}"):
        read_trace(path)


def test_foreign_parquet_and_missing_columns(tmp_path: Path) -> None:
    path = tmp_path / "foreign.parquet"
    pq.write_table(pa.table({"a": [1, 2]}), path)
    with pytest.raises(TraceError, match="without procsift metadata"):
        read_trace(path)
    csv = tmp_path / "few.csv"
    csv.write_text("pid,comm\n1,init\n")
    with pytest.raises(TraceError, match="missing columns"):
        read_trace(csv)


def test_unknown_label_refused(tmp_path: Path) -> None:
    frame = windows_to_frame(_rows())
    frame.loc[0, "label"] = "gaming"
    path = tmp_path / "l.csv"
    frame.to_csv(path, index=False)
    with pytest.raises(TraceError, match="unknown label 'gaming'"):
        read_trace(path)
    with pytest.raises(TraceError, match="unknown label"):
        write_trace(tmp_path / "x.parquet", frame, TraceMeta(window_s=1.0))
    assert not (tmp_path / "x.parquet").exists()


def test_bad_value_in_numeric_column(tmp_path: Path) -> None:
    frame = windows_to_frame(_rows()).astype({"run_ns": object})
    frame.loc[1, "run_ns"] = "lots"
    path = tmp_path / "v.csv"
    frame.to_csv(path, index=False)
    with pytest.raises(TraceError, match="run_ns"):
        read_trace(path)


def test_failed_write_leaves_old_file_intact(tmp_path: Path) -> None:
    path = tmp_path / "keep.parquet"
    write_trace(path, _rows(), TraceMeta(window_s=1.0))
    before = path.read_bytes()
    frame = windows_to_frame(_rows())
    frame.loc[0, "label"] = "nonsense"
    with pytest.raises(TraceError):
        write_trace(path, frame, TraceMeta(window_s=1.0))
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["keep.parquet"]
