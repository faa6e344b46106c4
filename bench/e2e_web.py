"""End-to-end: the POS paper's experiment on today's kernel. nginx serves a small HTML page
(~2 KB) and a large image (~500 KB) on 127.0.0.1 while two CPU hogs run in another session
(their own autogroup). Per arm, three measurements of `--seconds` each:

  paced       wrk -t1 -c2 with a Lua delay() of 10 ms between a connection's requests
              (think time; ~150-190 req/s): the HTML page's latency, mean / p50 / p99
  saturation  wrk -t1 -c16, no think time: HTML requests/s and latency
  image       wrk -t1 -c4 on the image (throughput), with the paced HTML load beside it

and the hogs' work rate during each. Arms: none (kernel defaults); procsift (`procsift run`
with the default policy, started cold after the workload, given `--warmup` s of paced HTML
traffic after its first window, stopped with SIGTERM and checked restored); oracle (the
hogs by hand in a cpu.idle cgroup).
Arms are interleaved, the order rotated each repeat; figures are medians over repeats.

Needs root. Run: `sudo .venv/bin/python bench/e2e_web.py [--repeats 3] [--seconds 10]
[--model BUNDLE]`. Writes bench/results/e2e_web.json.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import _e2e as e2e

NGINX_CONF = """
worker_processes 2;
pid {tmp}/nginx.pid;
error_log {tmp}/error.log;
events {{ worker_connections 1024; }}
http {{
    access_log off;
    sendfile on;
    keepalive_requests 1000000;
    types {{ text/html html; image/jpeg jpg; }}
    server {{ listen 127.0.0.1:{port}; root {tmp}/www; }}
}}
"""

# Prints wrk's own figures in microseconds (its text output rounds to 2 decimals of ms/us).
# E2E_DELAY_MS > 0 paces each connection: delay() is think time before the next request,
# and wrk starts a request's clock when it is written, so the delay is not in the latency.
WRK_LUA = """
local delay_ms = tonumber(os.getenv("E2E_DELAY_MS") or "0")
if delay_ms > 0 then
  function delay() return delay_ms end
end
function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format("E2E %d %d %d %d %.2f %d %d %d %d\\n",
    summary.requests, summary.duration, summary.bytes,
    e.connect + e.read + e.write + e.status + e.timeout,
    latency.mean, latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.max))
end
"""
WRK_FIELDS = ("requests", "duration_us", "bytes", "errors", "mean_us", "p50_us", "p90_us", "p99_us", "max_us")


class Web:
    """nginx (own session, like a service) plus the wrk clients."""

    def __init__(self, tmp: Path, port: int) -> None:
        self.tmp, self.port = tmp, port
        www = tmp / "www"
        www.mkdir()
        (www / "index.html").write_text("<html><body>" + "procsift " * 220 + "</body></html>\n")  # ~2 KB
        (www / "image.jpg").write_bytes(os.urandom(500 * 1024))
        (tmp / "nginx.conf").write_text(NGINX_CONF.format(tmp=tmp, port=port))
        (tmp / "e2e.lua").write_text(WRK_LUA)
        self.wrk = shutil.which("wrk") or "/usr/bin/wrk"
        nginx = shutil.which("nginx") or "/usr/sbin/nginx"
        self.master = subprocess.Popen([nginx, "-c", str(tmp / "nginx.conf"), "-g", "daemon off;"],
                                       start_new_session=True)
        try:
            deadline = time.monotonic() + 10
            while len(self.workers()) < 2:
                if time.monotonic() > deadline or self.master.poll() is not None:
                    raise RuntimeError(f"nginx did not start (port {port} taken? see {tmp}/error.log)")
                time.sleep(0.05)
            for page in ("index.html", "image.jpg"):  # warm the page cache and check both serve
                subprocess.run(["curl", "-sf", "-o", "/dev/null", f"http://127.0.0.1:{port}/{page}"],
                               check=True, timeout=10)
        except BaseException:
            self.stop()
            raise

    def workers(self) -> list[int]:
        return e2e.children_of(self.master.pid)

    def start_wrk(self, page: str, conns: int, seconds: float, delay_ms: int) -> subprocess.Popen[str]:
        env = dict(os.environ, E2E_DELAY_MS=str(delay_ms))
        return subprocess.Popen([self.wrk, "-t1", f"-c{conns}", f"-d{int(seconds)}s", "-s", str(self.tmp / "e2e.lua"),
                                 f"http://127.0.0.1:{self.port}/{page}"],
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)

    @staticmethod
    def result(proc: subprocess.Popen[str], seconds: float) -> dict[str, float]:
        out, _ = proc.communicate(timeout=seconds + 30)
        line = next((ln for ln in out.splitlines() if ln.startswith("E2E ")), None)
        if line is None:
            raise RuntimeError(f"wrk gave no result:\n{out}")
        r = dict(zip(WRK_FIELDS, (float(x) for x in line.split()[1:])))
        r["rps"] = r["requests"] / (r["duration_us"] / 1e6)
        r["mb_per_s"] = r["bytes"] / (r["duration_us"] / 1e6) / 1e6
        return r

    def stop(self) -> None:
        e2e.stop_proc(self.master, signal.SIGTERM)


def measure(web: Web, hogs: e2e.Hogs, arm: e2e.Arm, seconds: float, paced_delay: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    with e2e.Meter(hogs, arm.daemon_pid) as m:
        psi0 = e2e.psi_cpu()
        out["paced"] = web.result(web.start_wrk("index.html", 2, seconds, paced_delay), seconds)
    out["paced"].update(hog_rate=m.hog_rate, daemon_cpu_pct=m.daemon_cpu_pct, psi_cpu_before=psi0)
    if isinstance(arm, e2e.ProcsiftArm):
        arm.snapshot("after paced")
    with e2e.Meter(hogs, arm.daemon_pid) as m:
        out["saturation"] = web.result(web.start_wrk("index.html", 16, seconds, 0), seconds)
    out["saturation"].update(hog_rate=m.hog_rate, daemon_cpu_pct=m.daemon_cpu_pct)
    if isinstance(arm, e2e.ProcsiftArm):
        arm.snapshot("after saturation")
    with e2e.Meter(hogs, arm.daemon_pid) as m:
        img = web.start_wrk("image.jpg", 4, seconds, 0)
        html = web.start_wrk("index.html", 2, seconds, paced_delay)
        out["image"] = web.result(img, seconds)
        out["image_html"] = web.result(html, seconds)
    out["image"].update(hog_rate=m.hog_rate, daemon_cpu_pct=m.daemon_cpu_pct)
    if isinstance(arm, e2e.ProcsiftArm):
        arm.snapshot("after image")
    return out


ROWS = [  # (phase, field, heading, scale, format)
    ("paced", "mean_us", "HTML paced mean (us)", 1, "{:.0f}"),
    ("paced", "p50_us", "HTML paced p50 (us)", 1, "{:.0f}"),
    ("paced", "p99_us", "HTML paced p99 (us)", 1, "{:.0f}"),
    ("paced", "rps", "HTML paced req/s", 1, "{:.0f}"),
    ("paced", "hog_rate", "hog work, paced (M chunks/s)", 1e-6, "{:.2f}"),
    ("saturation", "rps", "HTML saturated req/s", 1, "{:.0f}"),
    ("saturation", "mean_us", "HTML saturated mean (us)", 1, "{:.0f}"),
    ("saturation", "p99_us", "HTML saturated p99 (us)", 1, "{:.0f}"),
    ("saturation", "hog_rate", "hog work, saturated (M chunks/s)", 1e-6, "{:.2f}"),
    ("image", "mb_per_s", "image MB/s (c4)", 1, "{:.0f}"),
    ("image", "rps", "image req/s (c4)", 1, "{:.0f}"),
    ("image_html", "mean_us", "HTML mean beside image (us)", 1, "{:.0f}"),
    ("image_html", "p99_us", "HTML p99 beside image (us)", 1, "{:.0f}"),
    ("image", "hog_rate", "hog work, image (M chunks/s)", 1e-6, "{:.2f}"),
    ("paced", "daemon_cpu_pct", "daemon CPU, paced (% core)", 1, "{:.2f}"),
    ("saturation", "daemon_cpu_pct", "daemon CPU, saturated (% core)", 1, "{:.2f}"),
    ("image", "daemon_cpu_pct", "daemon CPU, image (% core)", 1, "{:.2f}"),
]


def targets(med: dict[str, dict[str, dict[str, float | None]]]) -> list[dict[str, Any]]:
    """The issue's targets, from the medians."""
    def g(arm: str, phase: str, field: str) -> float:
        v = med[arm][phase][field]
        return float("nan") if v is None else v
    none_mean, ps_mean, or_mean = (g(a, "paced", "mean_us") for a in ("none", "procsift", "oracle"))
    none_p99, ps_p99 = g("none", "paced", "p99_us"), g("procsift", "paced", "p99_us")
    t = [
        ("HTML mean >= 40% lower than none", 1 - ps_mean / none_mean, ">= 0.40", 1 - ps_mean / none_mean >= 0.40),
        ("HTML p99 >= 5x lower than none", none_p99 / ps_p99, ">= 5", none_p99 / ps_p99 >= 5),
        ("HTML mean within 15% of oracle", ps_mean / or_mean, "<= 1.15", ps_mean / or_mean <= 1.15),
        ("image throughput >= 90% of oracle", g("procsift", "image", "mb_per_s") / g("oracle", "image", "mb_per_s"),
         ">= 0.90", g("procsift", "image", "mb_per_s") / g("oracle", "image", "mb_per_s") >= 0.90),
        ("hog work (paced) >= 90% of oracle", g("procsift", "paced", "hog_rate") / g("oracle", "paced", "hog_rate"),
         ">= 0.90", g("procsift", "paced", "hog_rate") / g("oracle", "paced", "hog_rate") >= 0.90),
        ("daemon CPU (paced, 1 s windows) < 2%", g("procsift", "paced", "daemon_cpu_pct"), "< 2",
         g("procsift", "paced", "daemon_cpu_pct") < 2),
    ]
    return [{"target": a, "value": round(b, 3), "need": c, "met": bool(d)} for a, b, c, d in t]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--seconds", type=int, default=10, help="length of each wrk measurement")
    ap.add_argument("--warmup", type=float, default=8.0,
                    help="s between procsift's first window (after its start-up) and measuring")
    ap.add_argument("--model", default=e2e.default_model(), help="model bundle for procsift run")
    ap.add_argument("--window", type=float, default=2.0, help="procsift window (s); 2 = the bundled model's")
    ap.add_argument("--delay-ms", type=int, default=10, help="think time of the paced HTML load")
    ap.add_argument("--port", type=int, default=18181)
    ap.add_argument("--oracle", choices=("idle", "weight2"), default="idle")
    ap.add_argument("--arms", default="none,procsift,oracle",
                    help="comma-separated; also procsift-exempt (the workload exempted by policy: "
                         "only the hogs' labels act)")
    ap.add_argument("--policy-arm", action="append", default=[], metavar="NAME=FILE",
                    help="an extra procsift arm NAME run with policy FILE (repeatable; add NAME to --arms)")
    ap.add_argument("--out", default="e2e_web", help="name of the JSON under bench/results/")
    args = ap.parse_args()
    if os.geteuid() != 0:
        print("e2e_web: needs root (BPF, cgroups)", file=sys.stderr)
        return 1
    log = lambda s: print(s, file=sys.stderr, flush=True)  # noqa: E731
    result: dict[str, Any] = {**e2e.host_facts(), "args": vars(args), "loadavg_start": e2e.loadavg()}
    with tempfile.TemporaryDirectory(prefix="e2e-web-") as tmpd:
        tmp = Path(tmpd)
        tmp.chmod(0o755)  # nginx workers run as www-data
        hogs = e2e.Hogs(e2e.compile_c(e2e.HOG_C, "hog", tmp), tmp, 2)
        web = None
        try:
            web = Web(tmp, args.port)
            w = web
            watch = lambda: {"hogs": hogs.pids, "nginx_master": [w.master.pid],  # noqa: E731
                             "nginx_workers": w.workers()}
            def paced_load(s: float) -> None:  # what the daemon watches during its warm-up
                w.result(w.start_wrk("index.html", 2, s, args.delay_ms), s)

            def procsift_arm(name: str, extra: list[str]) -> e2e.ProcsiftArm:
                return e2e.ProcsiftArm(tmp, args.model, lambda: hogs.pids + [w.master.pid], watch,
                                       args.warmup, args.window, extra=extra, name=name, load=paced_load)
            arms: dict[str, e2e.Arm] = {
                "none": e2e.Arm(),
                "procsift": procsift_arm("procsift", []),
                "procsift-exempt": procsift_arm(
                    "procsift-exempt", ["--policy", str(e2e.exempt_policy(tmp, ["nginx"]))]),
                **{name: procsift_arm(name, ["--policy", str(Path(file).resolve())])
                   for name, file in e2e.policy_arms(args.policy_arm)},
                "oracle": e2e.OracleArm(hogs.pids, args.oracle)}
            chosen = [arms[a] for a in args.arms.split(",")]
            log(f"e2e_web: {len(chosen)} arms x {args.repeats} repeats, 3 x {args.seconds} s each; "
                f"hogs {hogs.pids}, nginx {w.master.pid} workers {w.workers()}; load {e2e.loadavg()}")
            time.sleep(2)
            runs = e2e.run_arms(chosen, args.repeats, lambda a: measure(w, hogs, a, args.seconds, args.delay_ms), log)
        finally:
            if web:
                web.stop()
            hogs.stop()
    med = {name: {ph: {f: e2e.median_of(rs, ph, f) for f in
                       (*WRK_FIELDS, "rps", "mb_per_s", "hog_rate", "daemon_cpu_pct")}
                  for ph in ("paced", "saturation", "image", "image_html")}
           for name, rs in runs.items()}
    result.update(loadavg_end=e2e.loadavg(), runs=runs, medians=med)
    if all(a in med for a in ("none", "procsift", "oracle")):
        result["targets"] = targets(med)
    ps_arms = [a for a in chosen if isinstance(a, e2e.ProcsiftArm)]
    result["procsift_argv"] = {a.name: getattr(a, "argv", None) for a in ps_arms}
    result["labels"] = {a.name: a.snapshots for a in ps_arms}
    out = e2e.write_json(args.out, result)

    names = list(runs)
    print(f"\nnginx on 127.0.0.1 under two CPU hogs (own session); medians of {args.repeats}, "
          f"{args.seconds} s per measurement; load {result['loadavg_start'][0]:.2f} -> {result['loadavg_end'][0]:.2f}")
    print(f"{'':<34}" + "".join(f"{n:>11}" for n in names))
    for ph, f, head, scale, fmt in ROWS:
        cells = []
        for n in names:
            v = med[n][ph][f]
            cells.append(f"{fmt.format(v * scale) if v is not None else '-':>11}")
        print(f"{head:<34}" + "".join(cells))
    for t in result.get("targets", []):
        print(f"  {'MET ' if t['met'] else 'MISS'} {t['target']:<42} {t['value']:>8} (need {t['need']})")
    for run in runs.get("procsift", []):
        r = run["teardown"].get("restored", {})
        print(f"  procsift repeat {run['repeat']}: exit {run['teardown'].get('daemon_exit')}, "
              f"{r.get('checked')} processes checked, not restored: {r.get('not_restored')}")
    print(f"\nwrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
