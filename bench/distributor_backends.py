"""How much each applier backend makes two CPU hogs yield to a paced small-page nginx request.

Part 1 starts its own nginx (127.0.0.1, a 1 KiB page) and two busy-loop hogs, each hog in its own
session (as if started from another terminal), then measures request latency with the hogs
untouched, reniced only (backend none), autogroup-niced (backend autogroup) and in a cpu.idle
cgroup (backend cgroup). Conditions are interleaved over several rounds; the table shows
medians of the per-round p50/p99. Part 2 pins two hogs to one CPU, each in its own session,
places one and reports the other's share of that CPU (0.5 = placing did nothing).
Needs root and nginx. Writes JSON to bench/results/.
"""

from __future__ import annotations

import http.client
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from procsift.distributor import Action, Applier, Plan

PORT = 18480
HOG = "while True: pass"


def start_nginx(root: Path) -> subprocess.Popen[bytes]:
    (root / "html").mkdir()
    (root / "html" / "index.html").write_text("<p>" + "x" * 1024 + "</p>\n")
    (root / "logs").mkdir()
    conf = root / "nginx.conf"
    conf.write_text(f"""
worker_processes 1;
pid {root}/nginx.pid;
error_log {root}/logs/error.log;
events {{ worker_connections 64; }}
http {{
  access_log off;
  server {{ listen 127.0.0.1:{PORT}; root {root}/html; keepalive_requests 100000; }}
}}
""")
    proc = subprocess.Popen([shutil.which("nginx") or "nginx", "-p", str(root), "-c", str(conf),
                             "-g", "daemon off;"])
    for _ in range(50):
        try:
            c = http.client.HTTPConnection("127.0.0.1", PORT, timeout=1)
            c.request("GET", "/")
            c.getresponse().read()
            return proc
        except OSError:
            time.sleep(0.1)
    raise SystemExit("nginx did not start")


def probe(n: int = 400, period_s: float = 0.005) -> tuple[float, float]:
    """p50 and p99 (ms) of n paced GETs on one keep-alive connection."""
    c = http.client.HTTPConnection("127.0.0.1", PORT, timeout=5)
    lat = []
    nxt = time.perf_counter()
    for _ in range(n):
        nxt += period_s
        t0 = time.perf_counter()
        c.request("GET", "/")
        c.getresponse().read()
        lat.append((time.perf_counter() - t0) * 1e3)
        time.sleep(max(0.0, nxt - time.perf_counter()))
    lat.sort()
    return lat[len(lat) // 2], lat[int(len(lat) * 0.99)]


def hog_actions(hogs: list[subprocess.Popen[bytes]], **fields: object) -> Plan:
    acts = []
    for h in hogs:
        start = int(Path(f"/proc/{h.pid}/stat").read_text().rsplit(")", 1)[1].split()[19])
        acts.append(Action(pid=h.pid, start_time=start, comm="hog", label="background", profile="background",
                           rule="bench", **fields))  # type: ignore[arg-type]
    return Plan(tuple(acts))


def cpu_ticks(pid: int) -> int:
    f = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(f[11]) + int(f[12])  # utime + stime (fields 14, 15)


def share_table(seconds: float = 1.0) -> dict[str, float]:
    """Two hogs pinned to one CPU, each in its own session: the unplaced one's share of that CPU."""
    out = {}
    for name, backend in (("untouched", None), ("nice 19 (backend none)", "none"),
                          ("autogroup nice 19", "autogroup"), ("cpu.idle cgroup", "cgroup")):
        hogs = [subprocess.Popen([sys.executable, "-c", HOG], start_new_session=True) for _ in range(2)]
        try:
            for h in hogs:
                os.sched_setaffinity(h.pid, {min(os.sched_getaffinity(0))})
            applier = None
            if backend is not None:
                applier = Applier(Path(tempfile.mkdtemp()) / "j.json", backend=backend,
                                  cgroup_prefix="procsift-bench")
                applier.apply(hog_actions(hogs[1:], nice=19, autogroup_nice=19, cpu_idle=True, cpu_weight=1))
            f0, b0 = cpu_ticks(hogs[0].pid), cpu_ticks(hogs[1].pid)
            time.sleep(seconds)
            f, b = cpu_ticks(hogs[0].pid) - f0, cpu_ticks(hogs[1].pid) - b0
            out[name] = f / max(1, f + b)
            if applier is not None:
                applier.restore_all()
                applier.close()
        finally:
            for h in hogs:
                h.kill()
                h.wait()
    return out


def main() -> int:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    tmp = Path(tempfile.mkdtemp(prefix="procsift-bench-"))
    nginx = start_nginx(tmp)
    results: dict[str, list[tuple[float, float]]] = {}
    try:
        results["no hogs"] = [probe()]
        hogs = [subprocess.Popen([sys.executable, "-c", HOG], start_new_session=True) for _ in range(2)]
        time.sleep(0.5)
        bg = dict(nice=19, sched_policy="batch")
        conditions = {
            "hogs, untouched": None,
            "hogs nice 19 (backend none)": ("none", hog_actions(hogs, **bg)),
            "hogs autogroup nice 19": ("autogroup", hog_actions(hogs, autogroup_nice=19, **bg)),
            "hogs cpu.idle cgroup": ("cgroup", hog_actions(hogs, cpu_idle=True, cpu_weight=1, **bg)),
        }
        for _ in range(rounds):
            for name, how in conditions.items():
                applier = None
                if how is not None:
                    applier = Applier(tmp / f"journal-{how[0]}.json", backend=how[0],
                                      cgroup_prefix="procsift-bench")
                    applier.apply(how[1])
                time.sleep(0.3)
                results.setdefault(name, []).append(probe())
                if applier is not None:
                    applier.restore_all()
                    applier.close()
        for h in hogs:
            h.kill()
            h.wait()
        time.sleep(0.3)
        results["no hogs"].append(probe())
    finally:
        nginx.terminate()
        nginx.wait()
    print(f"{'condition':<32} {'p50 ms':>8} {'p99 ms':>8}   (medians of {rounds} interleaved rounds)")
    table = {}
    for name, runs in results.items():
        p50 = statistics.median(r[0] for r in runs)
        p99 = statistics.median(r[1] for r in runs)
        table[name] = {"p50_ms": p50, "p99_ms": p99, "runs": runs}
        print(f"{name:<32} {p50:8.3f} {p99:8.3f}")
    shares = share_table()
    print(f"\n{'two hogs on one CPU, one placed':<32} {'share of the other':>18}")
    for name, share in shares.items():
        print(f"{name:<32} {share:18.2f}")
    table["cpu_share_of_unplaced_hog"] = shares  # type: ignore[assignment]
    out = Path(__file__).with_name("results")
    out.mkdir(exist_ok=True)
    (out / "distributor_backends.json").write_text(json.dumps(table, indent=1))
    return 0


if __name__ == "__main__":
    if os.geteuid() != 0:
        raise SystemExit("needs root")
    sys.exit(main())
