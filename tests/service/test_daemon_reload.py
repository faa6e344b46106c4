"""A bad reload (SIGHUP or POST /v1/reload) of policy or model leaves the daemon running on the
policy and model it had: validated fully before the swap, any fault translated at that boundary."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import zlib
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from procsift.models import default_bundle_path
from procsift.service.api import Settings, create_app
from procsift.service.daemon import Daemon, DaemonConfig

from .policies import one_profile_policy

PROCSIFT = [sys.executable, "-m", "procsift.service.cli"]
GOOD = one_profile_policy(5)
BAD_POLICIES = [
    GOOD.replace('html-serving = "p"', '"html-serving" = [1, {}]'),  # issue 18: TypeError in policy.py
    GOOD.replace("nice = 5", "nice = 99"),
    GOOD + '\n[profiles.q]\ncpus = "0-99999999"\n',
    "[" * 10_000,
]
TOKEN = "reload-test-token-0123456789abcdef"


def copy_bundle(dst: Path) -> Path:
    dst.mkdir(mode=0o755)
    os.chmod(dst, 0o755)
    for f in default_bundle_path().iterdir():
        if f.is_file():
            shutil.copyfile(f, dst / f.name)
            os.chmod(dst / f.name, 0o644)
    return dst


def corrupt_model(bundle: Path) -> None:
    """Issue 18: model.joblib replaced by corrupt zlib data, its sha256 updated to match."""
    data = b"\x78\x9c" + zlib.compress(b"x" * 100)[2:40] + b"\x00" * 50
    (bundle / "model.joblib").write_bytes(data)
    meta = json.loads((bundle / "metadata.json").read_text())
    meta["model_sha256"] = hashlib.sha256(data).hexdigest()
    (bundle / "metadata.json").write_text(json.dumps(meta))


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    (tmp_path / "policy.toml").write_text(GOOD)
    return {"policy": tmp_path / "policy.toml", "model": copy_bundle(tmp_path / "bundle"), "dir": tmp_path}


def make_daemon(files: dict[str, Path]) -> Daemon:
    return Daemon(DaemonConfig(policy_path=str(files["policy"]), model_path=str(files["model"]), dry_run=True,
                               journal_path=str(files["dir"] / "j.json"), state_dir=str(files["dir"]),
                               table=False, force_proc=True))


@pytest.mark.parametrize("bad", BAD_POLICIES)
def test_a_bad_policy_reload_keeps_the_running_one(files: dict[str, Path], bad: str) -> None:
    d = make_daemon(files)
    policy, bundle = d.policy, d.bundle
    files["policy"].write_text(bad)
    why = d.reload()
    assert why and str(files["policy"]) in why
    assert d.policy is policy and d.bundle is bundle


def test_a_corrupt_model_reload_keeps_the_running_one(files: dict[str, Path]) -> None:
    d = make_daemon(files)
    bundle = d.bundle
    corrupt_model(files["model"])
    why = d.reload()
    assert why and "model.joblib" in why and d.bundle is bundle


def test_an_unexpected_fault_while_loading_keeps_the_running_state(files: dict[str, Path],
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Whatever a loader raises (a bug included), the reload boundary keeps the daemon and says why."""
    d = make_daemon(files)
    policy = d.policy

    def broken(*_a: object, **_k: object) -> None:
        raise zlib.error("Error -3 while decompressing data: invalid block type")
    monkeypatch.setattr("procsift.service.daemon.load_bundle", broken)
    why = d.reload()
    assert why and "zlib" in why.lower() and d.policy is policy


@pytest.fixture
def live_client(files: dict[str, Path]) -> Iterator[tuple[TestClient, Daemon]]:
    """The API beside a daemon whose loop answers commands (as `procsift run` does between windows)."""
    from procsift.distributor import Applier
    d = make_daemon(files)
    applier = Applier(files["dir"] / "j.json", backend="none", dry_run=True)
    stop = threading.Event()

    def loop() -> None:
        while not stop.is_set():
            d.serve_commands(applier)
            time.sleep(0.01)
    t = threading.Thread(target=loop, daemon=True)
    t.start()
    app = create_app(Settings(command_timeout_s=10), bundle=lambda: d.bundle, live_link=d.live, token=TOKEN)
    try:
        with TestClient(app, base_url="http://127.0.0.1:8765") as c:
            yield c, d
    finally:
        stop.set()
        t.join()
        applier.close()


def test_post_reload_with_a_bad_policy_is_a_4xx_and_the_daemon_keeps_going(
        live_client: tuple[TestClient, Daemon], files: dict[str, Path]) -> None:
    client, d = live_client
    auth = {"Authorization": f"Bearer {TOKEN}"}
    policy = d.policy
    files["policy"].write_text(BAD_POLICIES[0])
    r = client.post("/v1/reload", headers=auth)
    assert r.status_code == 422, r.text
    assert str(files["policy"]) in r.json()["detail"] and d.policy is policy
    corrupt_model(files["model"])
    files["policy"].write_text(GOOD)
    r = client.post("/v1/reload", headers=auth)
    assert r.status_code == 422 and "model.joblib" in r.json()["detail"]
    copy_bundle(files["dir"] / "b2")
    shutil.rmtree(files["model"])
    (files["dir"] / "b2").rename(files["model"])
    r = client.post("/v1/reload", headers=auth)
    assert r.status_code == 200 and r.json()["ok"], r.text


def test_sighup_with_a_bad_policy_or_a_corrupt_model_keeps_the_daemon(files: dict[str, Path]) -> None:
    sleeper = subprocess.Popen(["sleep", "120"])
    log = files["dir"] / "daemon.log"
    state = files["dir"] / "daemon-state.json"
    with open(log, "w") as fh:
        d = subprocess.Popen([*PROCSIFT, "run", "--proc", "--dry-run", "--no-api", "--no-table", "-w", "0.5",
                              "--policy", str(files["policy"]), "--model", str(files["model"]),
                              "--journal", str(files["dir"] / "j.json"), "-p", str(sleeper.pid)],
                             stdout=subprocess.DEVNULL, stderr=fh, env={**os.environ, "PROCSIFT_STATE_DIR": str(files["dir"])})

    def windows() -> int:
        try:
            return int(json.loads(state.read_text())["windows"])
        except (OSError, ValueError, KeyError):
            return 0

    def wait_windows(n: int) -> None:
        deadline = time.monotonic() + 60
        while windows() < n:
            assert d.poll() is None, log.read_text()
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.1)
    try:
        wait_windows(1)
        files["policy"].write_text(BAD_POLICIES[0])
        d.send_signal(signal.SIGHUP)
        wait_windows(windows() + 3)
        corrupt_model(files["model"])
        files["policy"].write_text(GOOD)
        d.send_signal(signal.SIGHUP)
        wait_windows(windows() + 3)
        assert d.poll() is None
        d.send_signal(signal.SIGTERM)
        d.wait(timeout=300)
    finally:
        if d.poll() is None:
            d.kill()
        sleeper.kill()
        sleeper.wait()
    text = log.read_text()
    assert d.returncode == 0, text
    assert "Traceback" not in text
    refused = [ln for ln in text.splitlines() if "reload refused" in ln]
    assert len(refused) == 2, text
    assert str(files["policy"]) in refused[0] and "model.joblib" in refused[1]


def test_the_policy_backend_is_used_unless_the_command_line_names_one(files: dict[str, Path]) -> None:
    d = make_daemon(files)  # one_profile_policy says backend = "none"; the command line said nothing (auto)
    assert d.policy.backend == "none" and d.backend == "none"
    d.cfg.backend = "autogroup"
    assert d.backend == "autogroup"
