"""The REST API in-process (TestClient) on the bundled model: every endpoint, auth, limits, schema."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from procsift.models import load_bundle
from procsift.service.api import Settings, create_app
from procsift.service.api.auth import load_or_create_token

BUNDLE = load_bundle()
TOKEN = "s3cret-token"


def window(pid: int = 100, t: float = 0.0, **kw: Any) -> dict[str, Any]:
    """A busy-server-like window; fields as DESIGN.md's Window row."""
    w: dict[str, Any] = {"host": "h", "t_start": t, "dur_s": 2.0, "pid": pid, "start_time": 7,
                         "run_ns": 30_000_000, "sleep_ns": 1_900_000_000, "switches_in": 400, "voluntary": 390,
                         "max_wait_ns": 10_000_000, "run_wait_transitions": 800, "wakeups": 400,
                         "syscall_counts": {"epoll_wait": 400, "accept4": 200, "recvfrom": 200, "sendfile": 200,
                                            "writev": 200, "openat": 200, "close": 400, "newfstatat": 200}}
    w.update(kw)
    return w


@pytest.fixture
def client(tmp_path: Path) -> TestClient:
    settings = Settings(token_file=str(tmp_path / "token"), max_body_bytes=64 * 1024, max_batch_rows=50)
    with TestClient(create_app(settings, token=TOKEN), base_url="http://127.0.0.1:8765") as c:  # lifespan loads the bundled model
        yield c


def test_predict_one_window(client: TestClient) -> None:
    r = client.post("/v1/predict", json={"windows": [window()]})
    assert r.status_code == 200, r.text
    body = r.json()
    w = body["windows"][0]
    assert w["label"] in BUNDLE.labels and set(w["probabilities"]) == set(BUNDLE.labels)
    assert abs(sum(w["probabilities"].values()) - 1) < 1e-3
    assert body["processes"] == [{"pid": 100, "start_time": 7, "label": w["label"],
                                  "probability": pytest.approx(w["probabilities"][w["label"]], abs=1e-3),
                                  "windows": 1}]


def test_predict_matches_the_bundle_and_smooths_per_process(client: TestClient) -> None:
    """Three windows of one process and one of another: labels as the bundle gives them,
    one smoothed label per (pid, start_time)."""
    hog = window(pid=200, run_ns=1_990_000_000, sleep_ns=0, switches_in=3, voluntary=0, involuntary=3,
                 max_wait_ns=0, run_wait_transitions=0, wakeups=0, syscall_counts={})
    ws = [window(t=0), window(t=2), window(t=4), hog]
    r = client.post("/v1/predict", json={"windows": ws})
    assert r.status_code == 200
    body = r.json()
    import pandas as pd

    from procsift.collector.schema import Window
    from procsift.collector.traceio import windows_to_columns
    rows = [Window(**{k: v for k, v in w.items() if k != "syscall_counts"}, syscalls=w["syscall_counts"]) for w in ws]
    frame = windows_to_columns(rows, sorted({*BUNDLE.input_columns, "syscalls", "switches_in"}))
    expected, _ = BUNDLE.predict_frame(pd.DataFrame(frame))
    assert [w["label"] for w in body["windows"]] == list(expected)
    assert {(p["pid"], p["windows"]) for p in body["processes"]} == {(100, 3), (200, 1)}


def test_predict_explain_adds_the_decision_path(client: TestClient) -> None:
    r = client.post("/v1/predict?explain=true", json={"windows": [window()]})
    assert r.status_code == 200
    e = r.json()["windows"][0]["explanation"]
    assert e["steps"] and all(isinstance(s, str) for s in e["steps"])


def test_model_health_and_metrics(client: TestClient) -> None:
    m = client.get("/v1/model").json()
    assert m["kind"] == BUNDLE.kind and m["labels"] == list(BUNDLE.labels) and "scores" in json.dumps(m["metadata"])
    assert client.get("/healthz").json() == {"status": "ok", "model": BUNDLE.kind, "live": False, "windows": None}
    client.post("/v1/predict", json={"windows": [window(), window(t=2)]})
    text = client.get("/metrics").text
    assert "# TYPE procsift_predictions_total counter" in text
    assert "procsift_predictions_total 2" in text


@pytest.mark.parametrize("path", ["/v1/processes", "/v1/processes/1", "/v1/groups", "/v1/plan"])
def test_live_endpoints_without_a_daemon_say_so(client: TestClient, path: str) -> None:
    r = client.get(path)
    assert r.status_code == 503 and "procsift run" in r.json()["detail"]


@pytest.mark.parametrize("command", ["pause", "resume", "reload", "restore"])
def test_control_needs_the_token(client: TestClient, command: str) -> None:
    assert client.post(f"/v1/{command}").status_code == 401
    assert client.post(f"/v1/{command}", headers={"Authorization": "Bearer wrong"}).status_code == 401
    assert client.post(f"/v1/{command}", headers={"Authorization": TOKEN}).status_code == 401  # no scheme
    # the right token passes the check; without a daemon there is nothing to steer
    assert client.post(f"/v1/{command}", headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 503


def test_bad_input_is_a_422_naming_the_field(client: TestClient) -> None:
    cases = [
        ({"windows": [window(dur_s=0)]}, ["body", "windows", 0, "dur_s"]),
        ({"windows": [window(run_ns=-1)]}, ["body", "windows", 0, "run_ns"]),
        ({"windows": [window(syscall_counts={"not_a_syscall": 3})]}, ["body", "windows", 0, "syscall_counts"]),
        ({"windows": [window(colour="red")]}, ["body", "windows", 0, "colour"]),
        ({"windows": []}, ["body", "windows"]),
    ]
    for body, loc in cases:
        r = client.post("/v1/predict", json=body)
        assert r.status_code == 422, (body, r.text)
        assert r.json()["detail"][0]["loc"] == loc
    assert client.post("/v1/predict", content=b"{not json", headers={"content-type": "application/json"}).status_code == 422


def test_too_big_is_a_413(client: TestClient) -> None:
    r = client.post("/v1/predict", json={"windows": [window(pid=i) for i in range(51)]})
    assert r.status_code == 413 and "at most 50" in r.json()["detail"]
    big = json.dumps({"windows": [window(comm="x" * 60) for _ in range(300)]}).encode()
    assert len(big) > 64 * 1024
    assert client.post("/v1/predict", content=big, headers={"content-type": "application/json"}).status_code == 413

    def chunks():  # no Content-Length: the limit must hold while reading
        for i in range(0, len(big), 4096):
            yield big[i:i + 4096]
    assert client.post("/v1/predict", content=chunks(), headers={"content-type": "application/json"}).status_code == 413


def test_the_token_file_is_made_once_root_only(tmp_path: Path) -> None:
    path = tmp_path / "state" / "api-token"
    first = load_or_create_token(path, announce=False)
    assert len(first) >= 32 and os.stat(path).st_mode & 0o777 == 0o600
    assert load_or_create_token(path, announce=False) == first
    os.chmod(path, 0o644)
    from procsift.collector.errors import ProcsiftError
    with pytest.raises(ProcsiftError, match="chmod 600"):
        load_or_create_token(path, announce=False)


def test_no_endpoint_loads_a_model_from_a_request(client: TestClient) -> None:
    paths = client.get("/openapi.json").json()["paths"]
    assert not any("model" in p and "post" in ops for p, ops in paths.items())
    r = client.post("/v1/predict", json={"windows": [window()], "model": "/tmp/evil"})
    assert r.status_code == 422


def test_dashboard_page_and_its_assets_are_served_locally(client: TestClient) -> None:
    page = client.get("/")
    assert page.status_code == 200 and "procsift" in page.text
    assert "http://" not in page.text and "https://" not in page.text  # no CDN
    for asset in ("/static/app.js", "/static/style.css"):
        r = client.get(asset)
        assert r.status_code == 200 and "http" not in r.text.replace("http.", "")


def test_small_requests_take_the_row_path_and_agree_with_batches(client: TestClient) -> None:
    """Up to SMALL_BATCH windows go row by row (fast path); more go through the pipeline at once.
    Both must give the same labels and probabilities."""
    from procsift.service.api.predict import SMALL_BATCH
    ws = [window(pid=300 + i, run_ns=10_000_000 * (i + 1), switches_in=20 * (i + 1)) for i in range(SMALL_BATCH + 1)]
    batch = client.post("/v1/predict", json={"windows": ws}).json()["windows"]
    for w, b in zip(ws, batch):
        one = client.post("/v1/predict", json={"windows": [w]}).json()["windows"][0]
        assert one["label"] == b["label"]
        assert one["probabilities"] == pytest.approx(b["probabilities"], abs=1e-3)


def test_no_page_pulls_scripts_from_a_cdn(client: TestClient) -> None:
    assert client.get("/docs").status_code == 404 and client.get("/redoc").status_code == 404
    assert client.get("/openapi.json").status_code == 200
