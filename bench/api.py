"""REST API speed: a real `procsift serve` (uvicorn) on 127.0.0.1, real recorded windows as bodies.

Arms, interleaved over repeats (medians reported):
  single-1  one window per request, wrk with one connection, back to back
  single-4  one window per request, wrk with four connections, 5 ms think time each (moderate load)
  batch     1,000 windows per request, one httpx client
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
IDENT = ("host", "t_start", "dur_s", "pid", "start_time", "ppid", "comm", "exe", "uid", "nthreads", "cgroup")
NUMS = ("run_ns", "runq_ns", "sleep_ns", "block_ns", "switches_in", "voluntary", "involuntary", "max_wait_ns",
        "run_wait_transitions", "wakeups", "wakes_others", "read_bytes", "write_bytes", "rchar", "wchar", "rss_bytes",
        "net_tx", "net_tx_bytes", "net_rx", "net_rx_bytes", "unix_calls")


def real_windows(n: int) -> list[dict[str, Any]]:
    """n window rows from the shipped recordings, as API bodies (active windows of every source)."""
    from procsift.collector import read_trace

    out: list[dict[str, Any]] = []
    files = sorted(DATA.glob("*.parquet"))
    per = max(1, n // len(files) + 1)
    for f in files:
        frame = read_trace(f).frame
        frame = frame[~frame["insufficient"]].head(per)
        sys_cols = [c for c in frame.columns if c.startswith("sys_")]
        for _, r in frame.iterrows():
            w = {k: (r[k].item() if hasattr(r[k], "item") else r[k]) for k in IDENT + NUMS}
            w["uid"] = max(-1, int(w["uid"]))
            w["syscall_counts"] = {c[4:]: int(r[c]) for c in sys_cols if r[c] > 0 and c[4:] != "unknown"}
            out.append(w)
    return (out * (n // len(out) + 1))[:n]


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


def run_batch(url: str, body: bytes, n_windows: int, seconds: float) -> dict[str, float]:
    lat = []
    with httpx.Client(headers={"content-type": "application/json"}, timeout=60) as c:
        stop = time.perf_counter() + seconds
        t0 = time.perf_counter()
        while time.perf_counter() < stop or len(lat) < 3:
            t = time.perf_counter()
            r = c.post(url, content=body)
            lat.append(time.perf_counter() - t)
            assert r.status_code == 200 and len(r.json()["windows"]) == n_windows
        wall = time.perf_counter() - t0
    return {"requests": len(lat), "windows_per_s": n_windows * len(lat) / wall, "p50_ms": 1e3 * pct(lat, 0.5),
            "p99_ms": 1e3 * pct(lat, 0.99)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--batch", type=int, default=1000)
    args = ap.parse_args()
    singles = [json.dumps({"windows": [w]}).encode() for w in real_windows(500)]
    batch = json.dumps({"windows": real_windows(args.batch)}).encode()
    port = free_port()
    with tempfile.TemporaryDirectory() as tmp:
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
            arms: dict[str, list[dict[str, float]]] = {"single-1": [], "single-4": [], "batch": []}
            order = list(arms)
            for rep in range(args.repeats):
                for name in order[rep % 3:] + order[:rep % 3]:
                    if name == "batch":
                        arms[name].append(run_batch(url, batch, args.batch, args.seconds))
                    else:
                        conns = int(name[-1])
                        arms[name].append(run_single(url, lua, bodies, args.seconds, conns, 0 if conns == 1 else 5))
                print(f"  repeat {rep + 1}/{args.repeats} done", file=sys.stderr)
        finally:
            server.terminate()
            server.wait(timeout=10)
    med = {a: {k: statistics.median(r[k] for r in runs) for k in runs[0]} for a, runs in arms.items()}
    result = {**host_facts(), "loadavg": os.getloadavg(), "args": vars(args),
              "batch_body_bytes": len(batch), "runs": arms, "medians": med,
              "targets": {"single p99 < 10 ms (single-4)": med["single-4"]["p99_ms"] < 10,
                          "batch >= 50,000 windows/s": med["batch"]["windows_per_s"] >= 50_000}}
    out = write_json("api", result)
    print(f"\nprocsift serve on 127.0.0.1, bundled model; medians of {args.repeats} x {args.seconds:g} s")
    print(f"{'arm':<10} {'req/s':>9} {'p50 ms':>8} {'p99 ms':>8} {'windows/s':>11}")
    for a, m in med.items():
        rps = m["rps"] if "rps" in m else m["windows_per_s"] / args.batch
        print(f"{a:<10} {rps:9.0f} {m['p50_ms']:8.2f} {m['p99_ms']:8.2f} {m.get('windows_per_s', rps):11,.0f}")
    for t, ok in result["targets"].items():
        print(f"  {'MET ' if ok else 'MISS'} {t}")
    print(f"\nwrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
