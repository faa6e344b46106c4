"""REST API speed: a real `procsift serve` (uvicorn) on 127.0.0.1, real recorded windows as bodies.

Arms, interleaved over repeats (medians reported):
  single-1  one window per request, wrk with one connection, back to back
  single-4  one window per request, wrk with four connections, 5 ms think time each (moderate load)
  json-1k      1,000 windows per request as JSON rows, one httpx client
  json-10k     10,000 windows per request as JSON rows
  parquet-10k  the same 10,000 windows as a Parquet trace body (application/vnd.apache.parquet)
wrk (C) drives the single-window arms so the client takes little of the 2 vCPUs it shares with
the server; it rotates over 500 real window bodies.
Run: `.venv/bin/python bench/api.py [--repeats 3] [--seconds 5]`. Writes bench/results/api.json.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _results import host_facts, write_json  # noqa: E402
DATA = HERE.parent / "datasets" / "data"
PARQUET = "application/vnd.apache.parquet"
IDENT = ("host", "t_start", "dur_s", "pid", "start_time", "ppid", "comm", "exe", "uid", "nthreads", "cgroup")
NUMS = ("run_ns", "runq_ns", "sleep_ns", "block_ns", "switches_in", "voluntary", "involuntary", "max_wait_ns",
        "run_wait_transitions", "wakeups", "wakes_others", "read_bytes", "write_bytes", "rchar", "wchar", "rss_bytes",
        "net_tx", "net_tx_bytes", "net_rx", "net_rx_bytes", "unix_calls")


def real_frame(n: int) -> Any:
    """n trace rows from the shipped recordings (active windows of every source, repeated to n)."""
    import pandas as pd

    from procsift.collector import read_trace

    files = sorted(DATA.glob("*.parquet"))
    per = max(1, n // len(files) + 1)
    frames = [(lambda f: f[~f["insufficient"]].head(per))(read_trace(f).frame) for f in files]
    frame = pd.concat(frames, ignore_index=True)
    return pd.concat([frame] * (n // len(frame) + 1), ignore_index=True).head(n)


def real_windows(n: int) -> list[dict[str, Any]]:
    """The same rows as real_frame(n), as JSON API rows (syscalls by name)."""
    frame = real_frame(n)
    sys_cols = [c for c in frame.columns if c.startswith("sys_")]
    out: list[dict[str, Any]] = []
    for _, r in frame.iterrows():
        w = {k: (r[k].item() if hasattr(r[k], "item") else r[k]) for k in IDENT + NUMS}
        w["uid"] = max(-1, int(w["uid"]))
        w["syscall_counts"] = {c[4:]: int(r[c]) for c in sys_cols if r[c] > 0 and c[4:] != "unknown"}
        out.append(w)
    return out


def parquet_body(n: int, folder: Path) -> bytes:
    """real_frame(n) as `procsift record` writes a trace."""
    from procsift.collector import TraceMeta, write_trace

    return write_trace(folder / "batch.parquet", real_frame(n), TraceMeta(window_s=0.5)).read_bytes()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * (len(xs) - 1) + 0.5))]


WRK_LUA = """
local bodies = {}
for line in io.lines(os.getenv("API_BODIES")) do bodies[#bodies + 1] = line end
local i = 0
local delay_ms = tonumber(os.getenv("API_DELAY_MS") or "0")
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
function request()
  i = i % #bodies + 1
  return wrk.format(nil, nil, nil, bodies[i])
end
if delay_ms > 0 then
  function delay() return delay_ms end
end
function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format("API %d %d %d %.2f %d %d %d\\n", summary.requests, summary.duration,
    e.connect + e.read + e.write + e.status + e.timeout, latency.mean,
    latency:percentile(50), latency:percentile(99), latency.max))
end
"""


def run_single(url: str, lua: Path, bodies: Path, seconds: float, conns: int, delay_ms: int) -> dict[str, float]:
    env = {**os.environ, "API_BODIES": str(bodies), "API_DELAY_MS": str(delay_ms)}
    out = subprocess.run([shutil.which("wrk") or "wrk", "-t1", f"-c{conns}", f"-d{int(seconds)}s", "-s", str(lua), url],
                         capture_output=True, text=True, env=env, timeout=seconds + 60).stdout
    line = next((ln for ln in out.splitlines() if ln.startswith("API ")), None)
    if line is None:
        raise RuntimeError(f"wrk gave no result:\n{out}")
    req, dur, errors, mean, p50, p99, mx = (float(x) for x in line.split()[1:])
    if errors:
        raise RuntimeError(f"{errors:.0f} failed requests:\n{out}")
    return {"requests": req, "rps": req / (dur / 1e6), "mean_ms": mean / 1e3, "p50_ms": p50 / 1e3,
            "p99_ms": p99 / 1e3, "max_ms": mx / 1e3}


def run_batch(url: str, body: bytes, n_windows: int, seconds: float,
              content_type: str = "application/json") -> dict[str, float]:
    """One client, requests back to back; a request's time is from sending the body to having the
    whole answer. The client's own parse of each answer (2 MB of JSON for 10,000 windows, ~15 ms
    in Python) is left out of it: the first answer is parsed and checked fully, the rest by count."""
    lat = []
    with httpx.Client(headers={"content-type": content_type}, timeout=60) as c:
        first = c.post(url, content=body)
        assert first.status_code == 200 and len(first.json()["windows"]) == n_windows, first.text[:300]
        stop = time.perf_counter() + seconds
        while time.perf_counter() < stop or len(lat) < 3:
            t = time.perf_counter()
            r = c.post(url, content=body)
            lat.append(time.perf_counter() - t)
            assert r.status_code == 200 and r.content.count(b'"probabilities"') == n_windows
    return {"requests": len(lat), "windows_per_s": n_windows * len(lat) / sum(lat), "p50_ms": 1e3 * pct(lat, 0.5),
            "p99_ms": 1e3 * pct(lat, 0.99)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=5.0)
    args = ap.parse_args()
    singles = [json.dumps({"windows": [w]}).encode() for w in real_windows(500)]
    big = real_windows(10_000)
    bodies_by_arm = {"json-1k": (json.dumps({"windows": big[:1000]}).encode(), 1000, "application/json"),
                     "json-10k": (json.dumps({"windows": big}).encode(), 10_000, "application/json")}
    port = free_port()
    with tempfile.TemporaryDirectory() as tmp:
        bodies_by_arm["parquet-10k"] = (parquet_body(10_000, Path(tmp)), 10_000, PARQUET)
        env = {**os.environ, "PROCSIFT_STATE_DIR": tmp, "PROCSIFT_MAX_BODY_BYTES": str(64 << 20)}
        server = subprocess.Popen([sys.executable, "-m", "procsift.service.cli", "serve", "--port", str(port)],
                                  env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        url = f"http://127.0.0.1:{port}/v1/predict"
        try:
            deadline = time.monotonic() + 60
            while True:
                try:
                    if httpx.get(f"http://127.0.0.1:{port}/healthz").status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                if server.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit(f"procsift serve did not start: {server.stderr.read() if server.stderr else ''}")
                time.sleep(0.2)
            lua, bodies = Path(tmp) / "api.lua", Path(tmp) / "bodies.jsonl"
            lua.write_text(WRK_LUA)
            bodies.write_bytes(b"\n".join(singles) + b"\n")
            run_single(url, lua, bodies, 1.0, 1, 0)  # warm-up
            arms: dict[str, list[dict[str, float]]] = {"single-1": [], "single-4": [], **{a: [] for a in bodies_by_arm}}
            order = list(arms)
            for rep in range(args.repeats):
                for name in order[rep % len(order):] + order[:rep % len(order)]:
                    if name in bodies_by_arm:
                        body, n, ctype = bodies_by_arm[name]
                        arms[name].append(run_batch(url, body, n, args.seconds, ctype))
                    else:
                        conns = int(name[-1])
                        arms[name].append(run_single(url, lua, bodies, args.seconds, conns, 0 if conns == 1 else 5))
                print(f"  repeat {rep + 1}/{args.repeats} done", file=sys.stderr)
        finally:
            server.terminate()
            server.wait(timeout=10)
    med = {a: {k: statistics.median(r[k] for r in runs) for k in runs[0]} for a, runs in arms.items()}
    result = {**host_facts(), "loadavg": os.getloadavg(), "args": vars(args),
              "body_bytes": {a: len(b) for a, (b, _, _) in bodies_by_arm.items()}, "runs": arms, "medians": med,
              "targets": {"single p99 < 10 ms (single-4)": med["single-4"]["p99_ms"] < 10,
                          "parquet-10k >= 200,000 windows/s": med["parquet-10k"]["windows_per_s"] >= 200_000}}
    out = write_json("api", result)
    print(f"\nprocsift serve on 127.0.0.1, bundled model; medians of {args.repeats} x {args.seconds:g} s")
    print(f"{'arm':<12} {'req/s':>9} {'p50 ms':>8} {'p99 ms':>8} {'windows/s':>11} {'body bytes':>11}")
    for a, m in med.items():
        rps = m["rps"] if "rps" in m else m["windows_per_s"] / bodies_by_arm[a][1]
        size = len(bodies_by_arm[a][0]) if a in bodies_by_arm else 0
        print(f"{a:<12} {rps:9.0f} {m['p50_ms']:8.2f} {m['p99_ms']:8.2f} {m.get('windows_per_s', rps):11,.0f} "
              f"{size:11,}")
    for t, ok in result["targets"].items():
        print(f"  {'MET ' if ok else 'MISS'} {t}")
    print(f"\nwrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
