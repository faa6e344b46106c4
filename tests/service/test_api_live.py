"""The API inside a real `procsift run` (root, BPF): live endpoints, control with the token, and
the dashboard in headless Chromium (Debian's, driven by Playwright) showing real process rows."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from .policies import one_profile_policy

pytestmark = pytest.mark.kernel

PROCSIFT = [sys.executable, "-m", "procsift.service.cli"]
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
CHROMIUM = "/usr/bin/chromium"
POLICY = one_profile_policy(6)
HOG = "import time\nwhile True:\n    t = time.time()\n    while time.time() - t < 0.05: pass\n    time.sleep(0.01)\n"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def call(url: str, method: str = "GET", token: str | None = None) -> tuple[int, Any]:
    req = urllib.request.Request(url, method=method, headers={"Authorization": f"Bearer {token}"} if token else {})
    try:
        with urllib.request.urlopen(req, timeout=300) as r:
            body = r.read()
            return r.status, json.loads(body) if r.headers.get_content_type() == "application/json" else body.decode()
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read() or b"null")


def nice(pid: int) -> int:
    return os.getpriority(os.PRIO_PROCESS, pid)


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    tmp = tmp_path_factory.mktemp("live")
    (tmp / "policy.toml").write_text(POLICY)
    # Its own session, so its own autogroup: the autogroup nice the daemon sets is not also
    # the test runner's (nor shared with another suite's daemon on the same machine).
    hog = subprocess.Popen([sys.executable, "-c", HOG], start_new_session=True)
    port = free_port()
    log = open(tmp / "daemon.log", "w")
    d = subprocess.Popen([*PROCSIFT, "run", "--policy", str(tmp / "policy.toml"), "--journal", str(tmp / "j.json"),
                          "--no-table", "-w", "0.5", "--port", str(port), "-p", str(hog.pid)],
                         env={**os.environ, "PROCSIFT_STATE_DIR": str(tmp)}, stdout=log, stderr=log)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 180  # start-up (BPF compile) on a busy machine; returns when ready
        while True:
            try:
                if call(f"{base}/healthz")[1]["windows"] and nice(hog.pid) == 6:
                    break
            except (urllib.error.URLError, ConnectionError, TypeError):
                pass
            assert d.poll() is None and time.monotonic() < deadline, (tmp / "daemon.log").read_text()
            time.sleep(0.2)
        yield {"base": base, "hog": hog.pid, "token": (tmp / "api-token").read_text().strip(), "daemon": d,
               "log": tmp / "daemon.log"}
    finally:
        if d.poll() is None:
            d.send_signal(signal.SIGTERM)
            d.wait(timeout=300)
        log.close()
        hog.kill()
        hog.wait()


def test_live_endpoints_show_the_real_process(service: dict[str, Any]) -> None:
    base, pid = service["base"], service["hog"]
    code, procs = call(f"{base}/v1/processes")
    assert code == 200
    row = next(r for r in procs["processes"] if r["pid"] == pid)
    assert row["profile"] == "p" and row["placement"]["nice"] == 6 and row["last_window"]["run_ms"] > 0
    code, one = call(f"{base}/v1/processes/{pid}")
    assert code == 200 and one["windows"] and one["label"] in ("interactive", "html-serving", "background")
    assert call(f"{base}/v1/processes/999999")[0] == 404
    code, groups = call(f"{base}/v1/groups")
    assert code == 200 and sum(g["processes"] for g in groups["groups"].values()) >= 1
    code, plan = call(f"{base}/v1/plan")
    assert code == 200 and any(a["pid"] == pid for a in plan["actions"])
    code, hist = call(f"{base}/v1/history")
    assert code == 200 and hist["points"] and hist["span_s"] == 600
    assert any(tl["pid"] == pid for tl in hist["timelines"])
    assert sum(sum(p["cpu_share"].values()) for p in hist["points"]) > 0
    code, text = call(f"{base}/metrics")
    windows = next(float(ln.split()[1]) for ln in text.splitlines() if ln.startswith("procsift_windows_collected_total"))
    assert code == 200 and windows >= 1
    cpu = [float(ln.split()[1]) for ln in text.splitlines() if ln.startswith("procsift_group_cpu_seconds_total{")]
    assert sum(cpu) > 0 and 'procsift_group_runq_delay_seconds_bucket{label="' in text


def test_control_changes_only_with_the_token_and_really_restores(service: dict[str, Any]) -> None:
    base, pid, token = service["base"], service["hog"], service["token"]
    for cmd in ("pause", "resume", "reload", "restore"):
        assert call(f"{base}/v1/{cmd}", "POST")[0] == 401
        assert call(f"{base}/v1/{cmd}", "POST", token="wrong")[0] == 401
    assert nice(pid) == 6  # nothing changed by the refused calls
    code, res = call(f"{base}/v1/pause", "POST", token)
    assert code == 200 and res["ok"] and res["paused"] and nice(pid) == 0
    time.sleep(1.5)  # three windows: still paused, still untouched
    assert nice(pid) == 0 and call(f"{base}/v1/plan")[1]["paused"]
    code, res = call(f"{base}/v1/resume", "POST", token)
    assert code == 200 and not res["paused"]
    deadline = time.monotonic() + 60  # the next window places it; generous for a busy machine
    while nice(pid) != 6:
        assert time.monotonic() < deadline, "not placed again after resume"
        time.sleep(0.1)
    code, res = call(f"{base}/v1/reload", "POST", token)
    assert code == 200 and res["ok"] and res["policy"] == "html-first"
    code, res = call(f"{base}/v1/restore", "POST", token)
    assert code == 200 and res["restored"] >= 1 and nice(pid) == 0
    call(f"{base}/v1/resume", "POST", token)


@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="Debian's chromium is not installed (make test installs it)")
def test_dashboard_shows_real_process_rows_in_chromium(service: dict[str, Any]) -> None:
    from playwright.sync_api import sync_playwright

    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=[
            "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
            "--disable-sync", "--no-first-run"])
        try:
            page = browser.new_page(viewport={"width": 1366, "height": 768})  # a laptop screen
            page.goto(service["base"] + "/")
            page.wait_for_selector(f"tr.proc[data-pid='{service['hog']}']", timeout=120_000)
            page.wait_for_selector(".group", timeout=10_000)
            # the charts drawn from /v1/history: several windows of real data, the hog on its timeline
            page.wait_for_function("document.querySelector('#c-cpu path.line') && "
                                   "document.querySelector('#c-cpu path.line').getAttribute('d').split('L').length > 3",
                                   timeout=120_000)
            page.wait_for_selector(f"#c-timeline rect.seg[data-pid='{service['hog']}']", timeout=10_000)
            lines = {c: page.locator(f"#{c} path.line").count() for c in ("c-procs", "c-cpu", "c-runq", "c-psi")}
            rows = page.locator("tr.proc").count()
            status = page.locator("#status").inner_text()
            page.screenshot(path=str(ARTIFACTS / "dashboard.png"), full_page=True)
        finally:
            browser.close()
    assert rows >= 1 and status.startswith("window ")
    assert all(n >= 1 for n in lines.values()), lines
    assert (ARTIFACTS / "dashboard.png").stat().st_size > 10_000
