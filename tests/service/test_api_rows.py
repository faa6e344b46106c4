"""POST /v1/predict takes the rows procsift itself writes: `top --once --json`, `trace head --json`,
wide trace rows (sys_*/cat_* columns) and a Parquet trace body; each gives the bundle's own labels,
in the rows' order, and bad bodies get one clear 4xx."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from fastapi.testclient import TestClient

from procsift.collector import TraceMeta, read_trace, write_trace
from procsift.collector.schema import is_insufficient
from procsift.models import load_bundle
from procsift.service.api import Settings, create_app

BUNDLE = load_bundle()
DATA = Path(__file__).resolve().parents[2] / "datasets" / "data"
PROCSIFT = [sys.executable, "-m", "procsift.service.cli"]
PARQUET = {"content-type": "application/vnd.apache.parquet"}
TRACES = ("html-nginx.parquet", "int-vim.parquet", "bg-xz.parquet")


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> TestClient:
    tmp = tmp_path_factory.mktemp("api")
    settings = Settings(token_file=str(tmp / "token"), max_body_bytes=4 << 20, max_batch_rows=400)
    with TestClient(create_app(settings, token="t"), base_url="http://127.0.0.1") as c:  # the Host guard
        yield c


@pytest.fixture(scope="module")
def frame() -> pd.DataFrame:
    """Rows of three shipped recordings (one per label), interleaved so order matters."""
    parts = [read_trace(DATA / name).frame.head(60) for name in TRACES]
    return pd.concat(parts, ignore_index=True).sample(frac=1.0, random_state=3).reset_index(drop=True)


def expected(frame: pd.DataFrame) -> tuple[list[str], np.ndarray]:
    labels, proba = BUNDLE.predict_frame(frame)
    return [str(x) for x in labels], proba


def parquet_bytes(frame: pd.DataFrame, tmp_path: Path) -> bytes:
    path = write_trace(tmp_path / "body.parquet", frame, TraceMeta(window_s=0.5))
    return path.read_bytes()


def check(body: dict[str, Any], frame: pd.DataFrame) -> None:
    labels, proba = expected(frame)
    got = body["windows"]
    assert [(w["pid"], w["start_time"]) for w in got] == list(zip(frame["pid"], frame["start_time"]))
    assert [w["label"] for w in got] == labels
    names = list(BUNDLE.labels)
    assert np.allclose([[w["probabilities"][n] for n in names] for w in got], proba, atol=1e-3)
    # recomputed, as on loading a trace for training (older recordings carry an older rule's flag)
    quiet = is_insufficient(frame["switches_in"], frame["syscalls"], frame["run_ns"])
    assert [w["insufficient"] for w in got] == quiet.tolist()


def test_parquet_body_gives_the_bundles_labels_in_row_order(client: TestClient, frame: pd.DataFrame,
                                                            tmp_path: Path) -> None:
    r = client.post("/v1/predict", content=parquet_bytes(frame, tmp_path), headers=PARQUET)
    assert r.status_code == 200, r.text
    check(r.json(), frame)


def test_trace_head_json_rows_are_accepted_and_agree_with_parquet(client: TestClient, frame: pd.DataFrame,
                                                                   tmp_path: Path) -> None:
    path = write_trace(tmp_path / "t.parquet", frame, TraceMeta(window_s=0.5))
    done = subprocess.run([*PROCSIFT, "trace", "head", "--json", "-n", "1000", str(path)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    rows = json.loads(done.stdout)
    assert len(rows) == len(frame) and "syscall_counts" in rows[0] and "categories" in rows[0]
    r = client.post("/v1/predict", json={"windows": rows})
    assert r.status_code == 200, r.text
    check(r.json(), frame)
    by_parquet = client.post("/v1/predict", content=path.read_bytes(), headers=PARQUET).json()
    assert r.json() == by_parquet


def test_wide_trace_rows_are_accepted(client: TestClient, frame: pd.DataFrame) -> None:
    rows = json.loads(frame.to_json(orient="records", double_precision=15))
    assert any(k.startswith("sys_") for k in rows[0])
    r = client.post("/v1/predict", json={"windows": rows})
    assert r.status_code == 200, r.text
    check(r.json(), frame)


def test_top_once_json_rows_are_accepted(client: TestClient) -> None:
    """Whatever this machine runs right now, as `procsift top` prints it (BPF as root)."""
    done = subprocess.run([*PROCSIFT, "top", "--once", "--json", "-d", "0.5"], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    rows = json.loads(done.stdout)[:400]
    assert rows and {"syscalls", "categories", "insufficient", "exited"} <= set(rows[0])
    r = client.post("/v1/predict", json={"windows": rows})
    assert r.status_code == 200, r.text
    assert [w["pid"] for w in r.json()["windows"]] == [w["pid"] for w in rows]
    assert [w["insufficient"] for w in r.json()["windows"]] == [w["insufficient"] for w in rows]


@pytest.mark.parametrize("change, message", [
    ({"syscalls": 99999}, "syscalls is 99999 but the syscall counts add up to"),
    ({"cat_poll": 77777}, "categories['poll'] is 77777"),
    ({"sys_not_a_syscall": 3}, "unknown syscall name"),
    ({"label": "gaming"}, "label"),
])
def test_derived_fields_that_disagree_are_a_422(client: TestClient, frame: pd.DataFrame,
                                                change: dict[str, Any], message: str) -> None:
    row = json.loads(frame[~frame["insufficient"]].head(1).to_json(orient="records"))[0]
    row.update(change)
    r = client.post("/v1/predict", json={"windows": [row]})
    assert r.status_code == 422, r.text
    assert message in json.dumps(r.json()["detail"]), r.text


def test_a_stale_insufficient_flag_is_recomputed_not_refused(client: TestClient, frame: pd.DataFrame) -> None:
    row = json.loads(frame[~frame["insufficient"]].head(1).to_json(orient="records"))[0]
    row["insufficient"] = True
    r = client.post("/v1/predict", json={"windows": [row]})
    assert r.status_code == 200 and r.json()["windows"][0]["insufficient"] is False


def _parquet(table: pa.Table) -> bytes:
    buf = io.BytesIO()
    pq.write_table(table, buf)
    return buf.getvalue()


def test_bad_parquet_bodies_are_one_clear_4xx(client: TestClient, frame: pd.DataFrame, tmp_path: Path) -> None:
    good = parquet_bytes(frame.head(20), tmp_path)
    negative = frame.head(20).copy()
    negative.loc[5, "run_ns"] = -3
    table = pa.Table.from_pandas(negative, preserve_index=False)
    nan = frame.head(20).copy()
    nan["dur_s"] = nan["dur_s"].astype(float)
    nan.loc[2, "dur_s"] = float("nan")
    inf = nan.copy()
    inf.loc[2, "dur_s"] = float("inf")
    old = pa.Table.from_pandas(frame.head(3), preserve_index=False).replace_schema_metadata(
        {b"procsift": json.dumps({"window_s": 1, "schema_version": 2}).encode()})
    text = pa.table({"pid": ["a"], "start_time": [1]})
    cases = [
        (b"PAR1 not really", 400, "not a readable Parquet file"),
        (good[: len(good) // 2], 400, "not a readable Parquet file"),
        (b"", 400, "not a readable Parquet file"),
        (_parquet(pa.table({"pid": [1], "start_time": [2], "t_start": [0.0]})), 422, "missing column(s)"),
        (_parquet(table), 422, "row 5: run_ns is -3"),
        (_parquet(pa.Table.from_pandas(nan, preserve_index=False)), 422, "column 'dur_s' has 1 empty value"),
        (_parquet(pa.Table.from_pandas(inf, preserve_index=False)), 422, "row 2: dur_s is inf"),
        (_parquet(old), 422, "schema version 2"),
        (_parquet(text), 422, "missing column(s)"),
        (parquet_bytes(pd.concat([frame] * 3, ignore_index=True).head(401), tmp_path), 413, "at most 400"),
    ]
    for body, status, message in cases:
        r = client.post("/v1/predict", content=body, headers=PARQUET)
        assert r.status_code == status, (message, r.text)
        detail = r.json()["detail"]
        assert isinstance(detail, str) and "\n" not in detail and message in detail, (message, detail)


def test_a_body_that_is_not_text_is_a_422_without_echoing_it(client: TestClient) -> None:
    r = client.post("/v1/predict", content=b"\x80\xff", headers={"content-type": "application/json"})
    assert r.status_code == 422 and r.json()["detail"][0]["type"] == "json_invalid"


def test_other_content_types_are_a_415(client: TestClient) -> None:
    r = client.post("/v1/predict", content=b"pid,start_time\n1,2\n", headers={"content-type": "text/csv"})
    assert r.status_code == 415 and "application/vnd.apache.parquet" in r.json()["detail"]


def test_openapi_documents_both_body_formats(client: TestClient) -> None:
    doc = client.get("/openapi.json").json()
    content = doc["paths"]["/v1/predict"]["post"]["requestBody"]["content"]
    assert set(content) == {"application/json", "application/vnd.apache.parquet"}
    assert "WindowRow" in doc["components"]["schemas"] and "PredictRows" in doc["components"]["schemas"]
