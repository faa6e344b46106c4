"""The API against a hostile web page and hostile bodies: DNS rebinding (Host), security headers on
every response, no paths in /v1/model, no 5xx for any body, and a token file only its owner controls."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from procsift.collector.errors import ProcsiftError
from procsift.models import load_bundle
from procsift.service.api import Settings, create_app
from procsift.service.api.auth import MIN_TOKEN_CHARS, load_or_create_token

from .test_api import TOKEN, window

BUNDLE = load_bundle()


def make_client(tmp_path: Path, host: str = "127.0.0.1", **settings: object) -> TestClient:
    s = Settings(host=host, token_file=str(tmp_path / "token"), max_body_bytes=256 * 1024, **settings)  # type: ignore[arg-type]
    return TestClient(create_app(s, token=TOKEN), base_url="http://127.0.0.1:8765")


@pytest.fixture
def client(tmp_path: Path):  # type: ignore[no-untyped-def]
    with make_client(tmp_path) as c:
        yield c


@pytest.mark.parametrize("host", ["evil.example", "evil.example:8765", "127.0.0.1.evil.example", "localhost.evil.example",
                                  "10.0.0.7:8765", "", "[::1", "a" * 300])
@pytest.mark.parametrize("path", ["/v1/processes", "/v1/plan", "/metrics", "/v1/model", "/", "/healthz"])
def test_a_request_for_another_host_is_refused(client: TestClient, host: str, path: str) -> None:
    """A page on evil.example that rebinds its name to 127.0.0.1 sends Host: evil.example."""
    r = client.get(path, headers={"Host": host})
    assert r.status_code in (400, 421), (host, r.status_code)
    assert "procsift" not in r.text.lower() or "host" in r.text.lower()
    assert r.headers["x-content-type-options"] == "nosniff"


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.1:8765", "localhost", "localhost:8765", "LOCALHOST.",
                                  "[::1]:8765", "app.localhost:8765"])
def test_the_listening_address_and_localhost_names_are_answered(client: TestClient, host: str) -> None:
    assert client.get("/healthz", headers={"Host": host}).status_code == 200


def test_listening_on_every_address_takes_ip_literals_and_this_machines_name(tmp_path: Path) -> None:
    import socket
    with make_client(tmp_path, host="0.0.0.0") as c:
        assert c.get("/healthz", headers={"Host": "192.168.1.9:8765"}).status_code == 200
        assert c.get("/healthz", headers={"Host": socket.gethostname()}).status_code == 200
        assert c.get("/healthz", headers={"Host": "evil.example"}).status_code == 421
    with make_client(tmp_path, allowed_hosts="procsift.lan") as c:
        assert c.get("/healthz", headers={"Host": "procsift.lan:8765"}).status_code == 200
        assert c.get("/healthz", headers={"Host": "192.168.1.9"}).status_code == 421


EXPECTED = {
    "x-content-type-options": "nosniff",
    "x-frame-options": "DENY",
    "referrer-policy": "no-referrer",
}


@pytest.mark.parametrize("method, path, kw", [
    ("GET", "/", {}), ("GET", "/static/app.js", {}), ("GET", "/healthz", {}), ("GET", "/metrics", {}),
    ("GET", "/v1/model", {}), ("GET", "/openapi.json", {}), ("GET", "/nope", {}), ("GET", "/v1/processes", {}),
    ("POST", "/v1/pause", {}), ("POST", "/v1/predict", {"json": {"windows": []}}),
    ("POST", "/v1/predict", {"content": b"x" * 300_000, "headers": {"content-type": "application/json"}}),
])
def test_every_response_carries_the_security_headers(client: TestClient, method: str, path: str,
                                                      kw: dict[str, object]) -> None:
    r = client.request(method, path, **kw)  # type: ignore[arg-type]
    for k, v in EXPECTED.items():
        assert r.headers.get(k) == v, (path, r.status_code, k)
    csp = r.headers["content-security-policy"]
    assert "default-src 'none'" in csp and "script-src 'self'" in csp and "frame-ancestors 'none'" in csp


def test_v1_model_shows_no_paths_or_training_file_names(client: TestClient) -> None:
    body = client.get("/v1/model").json()
    text = json.dumps(body)
    assert "path" not in body
    assert str(BUNDLE.path) not in text and "/" + "models/default" not in text
    names = [f["name"] for f in BUNDLE.metadata["training"]["files"]]
    assert names and not any(n in text for n in names)
    assert body["metadata"]["training"]["files"][0]["sha256"]  # what identifies the data stays


@pytest.mark.parametrize("raw", [
    '{"windows": [{"pid": 1, "start_time": 1, "run_ns": NaN}]}',
    '{"windows": [{"pid": 1, "start_time": 1, "dur_s": Infinity}]}',
    '{"windows": [{"pid": 1, "start_time": 1, "t_start": -Infinity}]}',
    '{"windows": [{"pid": 1, "start_time": 1, "switches_in": 1e999}]}',
    '{"windows": [{"pid": 1, "start_time": 1, "syscall_counts": {"read": NaN}}]}',
    '{"windows": [{"pid": NaN, "start_time": 1}]}',
    '{"windows": NaN}',
    "NaN",
    "[" * 50_000 + "]" * 50_000,
    '{"windows": ' + "[" * 50_000 + "]" * 50_000 + "}",
    '{"windows": [{"pid": 1, "start_time": 1, "comm": "\\ud800"}]}',
    "\xff\xfe",
    "",
])
def test_hostile_bodies_are_a_4xx_never_a_5xx(client: TestClient, raw: str) -> None:
    r = client.post("/v1/predict", content=raw.encode("utf-8", "surrogatepass"),
                    headers={"content-type": "application/json"})
    assert 400 <= r.status_code < 500, (raw[:60], r.status_code, r.text[:200])
    r.json()  # and the error body is itself valid JSON


def test_a_nan_is_a_422_naming_the_field(client: TestClient) -> None:
    r = client.post("/v1/predict", content=b'{"windows": [{"pid": 1, "start_time": 1, "run_ns": NaN}]}',
                    headers={"content-type": "application/json"})
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "windows", 0, "run_ns"]


def test_a_reasonable_body_still_works(client: TestClient) -> None:
    assert client.post("/v1/predict", json={"windows": [window()]}).status_code == 200


# -- the token file ---------------------------------------------------------------------------

def _token_file(tmp_path: Path, text: str, mode: int = 0o600) -> Path:
    p = tmp_path / "api-token"
    p.write_text(text)
    os.chmod(p, mode)
    return p


def test_a_short_token_is_refused(tmp_path: Path) -> None:
    p = _token_file(tmp_path, "abc\n")
    with pytest.raises(ProcsiftError, match=f"at least {MIN_TOKEN_CHARS} characters"):
        load_or_create_token(p, announce=False)


@pytest.mark.parametrize("mode, why", [(0o640, "chmod 600"), (0o620, "chmod 600"), (0o606, "chmod 600")])
def test_a_token_others_can_read_or_write_is_refused(tmp_path: Path, mode: int, why: str) -> None:
    p = _token_file(tmp_path, "x" * 43, mode)
    with pytest.raises(ProcsiftError, match=why):
        load_or_create_token(p, announce=False)


def test_a_token_owned_by_another_user_is_refused(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root to give a file away")
    p = _token_file(tmp_path, "x" * 43)
    os.chown(p, 65534, 65534)
    with pytest.raises(ProcsiftError, match="owned by uid 65534"):
        load_or_create_token(p, announce=False)


def test_a_token_that_is_a_symlink_or_a_device_is_refused(tmp_path: Path) -> None:
    real = _token_file(tmp_path, "x" * 43)
    link = tmp_path / "link"
    link.symlink_to(real)
    with pytest.raises(ProcsiftError, match="symbolic link"):
        load_or_create_token(link, announce=False)
    with pytest.raises(ProcsiftError, match="regular file"):
        load_or_create_token("/dev/zero", announce=False)


def test_a_token_with_spaces_or_control_characters_is_refused(tmp_path: Path) -> None:
    p = _token_file(tmp_path, "abc def " * 8)
    with pytest.raises(ProcsiftError, match="characters"):
        load_or_create_token(p, announce=False)


def test_a_good_token_file_is_read_and_a_missing_one_made(tmp_path: Path) -> None:
    p = _token_file(tmp_path, "Ab0-_" * 9 + "\n")
    assert load_or_create_token(p, announce=False) == "Ab0-_" * 9
    made = load_or_create_token(tmp_path / "new" / "api-token", announce=False)
    assert len(made) >= MIN_TOKEN_CHARS
