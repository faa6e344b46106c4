"""Collector overhead: what attaching procsift costs a syscall-heavy program, against
no tracer, the floor (an empty raw sys_enter program) and bcc's own syscount; and what
draining and building rows costs with ~1,000 live processes.

Arms are interleaved (each repeat runs every arm once, in a rotated order); figures are
medians. Needs root. Run: `sudo .venv/bin/python bench/collector_overhead.py`
Writes bench/results/collector_overhead.json.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _results import host_facts, write_json  # noqa: E402

LOOP_C = r"""
#include <stdlib.h>
#include <unistd.h>
#include <sys/syscall.h>
int main(int argc, char **argv) {
    long n = atol(argv[1]);
    for (long i = 0; i < n; i++) syscall(SYS_getppid);
    return 0;
}
"""

# A process that wakes every 200 ms and makes one syscall: "live" but light.
TICKER_C = r"""
#include <time.h>
#include <unistd.h>
#include <sys/syscall.h>
int main(void) {
    struct timespec ts = {0, 200 * 1000 * 1000};
    for (;;) { nanosleep(&ts, 0); syscall(SYS_getppid); }
}
"""

# Steady syscalls: 100 getppid() then 1 ms asleep, forever.
BURST_C = r"""
#include <time.h>
#include <unistd.h>
#include <sys/syscall.h>
int main(void) {
    struct timespec ts = {0, 1000 * 1000};
    for (;;) { for (int i = 0; i < 100; i++) syscall(SYS_getppid); nanosleep(&ts, 0); }
}
"""

NGINX_CONF = """
worker_processes 2;
pid {tmp}/nginx.pid;
error_log {tmp}/error.log;
events {{ worker_connections 1024; }}
http {{
    access_log off;
    server {{ listen 127.0.0.1:{port}; root {tmp}/www; }}
}}
"""

EMPTY_PROBE = r"""
import sys
from bcc import BPF
b = BPF(text="RAW_TRACEPOINT_PROBE(sys_enter) { return 0; }")
print("ready", flush=True)
sys.stdin.read()
"""


def _compile(src: str, name: str, tmp: Path) -> Path:
    c, exe = tmp / f"{name}.c", tmp / name
    c.write_text(src)
    subprocess.run(["gcc", "-O2", "-o", str(exe), str(c)], check=True)
    return exe


class Tracer:
    """One arm: a tracer process started before the loop and stopped after it."""

    def __init__(self, name: str, argv: list[str] | None, ready: str | None, stop_sig: int = signal.SIGINT):
        self.name, self.argv, self.ready, self.stop_sig = name, argv, ready, stop_sig
        self.proc: subprocess.Popen[str] | None = None

    def start(self) -> None:
        if self.argv is None:
            return
        self.proc = subprocess.Popen(self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True)
        assert self.proc.stdout is not None
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError(f"{self.name} exited before it was ready")
            if self.ready is None or self.ready in line:
                return
        raise RuntimeError(f"{self.name} not ready after 60 s")

    def stop(self) -> None:
        if self.proc is None:
            return
        self.proc.send_signal(self.stop_sig)
        try:
            self.proc.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.communicate()
        self.proc = None


def _arms(with_syscount: bool = True) -> list[Tracer]:
    procsift = [sys.executable, "-m", "procsift.service.cli", "top", "--json", "-d", "1"]
    arms = [
        Tracer("none", None, None),
        Tracer("empty raw sys_enter (floor)", [sys.executable, "-c", EMPTY_PROBE], "ready", signal.SIGTERM),
        Tracer("procsift collector", procsift, '"rows"'),
        Tracer("procsift, syscall duty 0.5", procsift + ["--syscall-duty", "0.5"], '"rows"'),
        Tracer("procsift, syscall duty 0.2", procsift + ["--syscall-duty", "0.2"], '"rows"'),
    ]
    syscount = shutil.which("syscount-bpfcc")
    if syscount and with_syscount:
        arms.append(Tracer("bcc syscount", [syscount], "Tracing syscalls"))
    return arms


def bench_loop(loop: Path, calls: int, repeats: int) -> dict[str, object]:
    arms = _arms()
    times: dict[str, list[float]] = {a.name: [] for a in arms}
    for r in range(repeats):
        order = arms[r % len(arms):] + arms[:r % len(arms)]
        for arm in order:
            arm.start()
            t0 = time.perf_counter()
            subprocess.run([str(loop), str(calls)], check=True)
            times[arm.name].append(time.perf_counter() - t0)
            arm.stop()
        print(f"  repeat {r + 1}/{repeats} done", file=sys.stderr)
    base = statistics.median(times["none"])
    rows = []
    for name, ts in times.items():
        med = statistics.median(ts)
        rows.append({"arm": name, "median_s": med, "ns_per_call": med / calls * 1e9,
                     "slowdown": med / base, "runs_s": ts})
    return {"calls": calls, "repeats": repeats, "arms": rows}


def bench_nginx(tmp: Path, repeats: int, seconds: int) -> dict[str, object] | None:
    """Requests/s of nginx serving a 2 KB page to wrk on 127.0.0.1, per arm."""
    nginx, wrk = shutil.which("nginx"), shutil.which("wrk")
    if not nginx or not wrk:
        print("  (nginx or wrk missing: apt-get install nginx wrk; skipped)", file=sys.stderr)
        return None
    (tmp / "www").mkdir()
    (tmp / "www" / "index.html").write_text("<html><body>" + "procsift " * 220 + "</body></html>")
    port = 18080
    (tmp / "nginx.conf").write_text(NGINX_CONF.format(tmp=tmp, port=port))
    master = subprocess.Popen([nginx, "-c", str(tmp / "nginx.conf"), "-g", "daemon off;"])
    try:
        time.sleep(1.0)
        arms = _arms(with_syscount=True)
        rps: dict[str, list[float]] = {a.name: [] for a in arms}
        for r in range(repeats):
            order = arms[r % len(arms):] + arms[:r % len(arms)]
            for arm in order:
                arm.start()
                out = subprocess.run([wrk, "-t1", "-c16", f"-d{seconds}s", f"http://127.0.0.1:{port}/"],
                                     capture_output=True, text=True, timeout=seconds + 30).stdout
                arm.stop()
                line = next(ln for ln in out.splitlines() if ln.startswith("Requests/sec:"))
                rps[arm.name].append(float(line.split()[1]))
        base = statistics.median(rps["none"])
        return {"seconds": seconds, "repeats": repeats,
                "arms": [{"arm": k, "median_rps": statistics.median(v), "relative": statistics.median(v) / base,
                          "runs": v} for k, v in rps.items()]}
    finally:
        master.terminate()
        master.wait(timeout=10)


def bench_duty_accuracy(burst: Path, windows: int, duty: float) -> dict[str, object]:
    """Per-window syscall counts of a steady process: the duty-cycle estimate against the exact count."""
    from procsift.collector.session import Collector  # noqa: PLC0415

    proc = subprocess.Popen([str(burst)])
    errors = []
    try:
        with Collector(window_s=1.0, pids=[proc.pid]) as full, \
                Collector(window_s=1.0, pids=[proc.pid], syscall_duty=duty) as half:
            full.close_window()
            half.close_window()
            for _ in range(windows):
                time.sleep(duty)
                half.probe.detach_syscalls()  # type: ignore[attr-defined]
                time.sleep(1.0 - duty)
                exact = sum(w.syscalls.get("getppid", 0) for w in full.close_window())
                est = sum(w.syscalls.get("getppid", 0) for w in half.close_window())
                half.probe.attach_syscalls()  # type: ignore[attr-defined]
                if exact:
                    errors.append(abs(est - exact) / exact)
    finally:
        proc.kill()
        proc.wait()
    errors.sort()
    return {"duty": duty, "windows": len(errors), "median_rel_error": statistics.median(errors),
            "p90_rel_error": errors[int(0.9 * (len(errors) - 1))]}


def bench_drain(ticker: Path, nproc: int, windows: int) -> dict[str, object]:
    from procsift.collector.session import Collector  # noqa: PLC0415

    procs = [subprocess.Popen([str(ticker)]) for _ in range(nproc)]
    try:
        time.sleep(1.0)
        out: dict[str, object] = {"processes": nproc}
        for kind, force_proc in (("bpf", False), ("proc", True)):
            with Collector(window_s=1.0, force_proc=force_proc, announce=lambda m: None) as col:
                me = psutil.Process()
                cost, nrows = [], []
                cpu0, wall0 = sum(me.cpu_times()[:2]), time.monotonic()
                for _ in range(windows):
                    time.sleep(1.0)
                    t0 = time.perf_counter()
                    rows = col.close_window()
                    cost.append((time.perf_counter() - t0) * 1e3)
                    nrows.append(len(rows))
                cpu = sum(me.cpu_times()[:2]) - cpu0
                wall = time.monotonic() - wall0
            out[kind] = {"drain_build_ms_median": statistics.median(cost), "drain_build_ms_max": max(cost),
                         "rows_per_window_median": statistics.median(nrows),
                         "cpu_percent_of_one_core": 100 * cpu / wall}
        return out
    finally:
        for p in procs:
            p.kill()
        for p in procs:
            p.wait()


def bench_idle_cpu(seconds: int) -> dict[str, float]:
    """CPU of the procsift collector process itself at 1 s windows (user + system)."""
    # SIGINT back to its default in the child: a benchmark started in the background by a
    # shell inherits SIGINT ignored, and `top` would then never see the Ctrl-C that stops it.
    proc = subprocess.Popen([sys.executable, "-m", "procsift.service.cli", "top", "--json", "-d", "1"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        assert proc.stdout is not None
        proc.stdout.readline()  # loaded and one window done
        ps = psutil.Process(proc.pid)
        c0, t0 = sum(ps.cpu_times()[:4]), time.monotonic()
        deadline = t0 + seconds
        while time.monotonic() < deadline:
            proc.stdout.readline()
        c1, t1 = sum(ps.cpu_times()[:4]), time.monotonic()
        return {"seconds": t1 - t0, "cpu_percent_of_one_core": 100 * (c1 - c0) / (t1 - t0)}
    finally:
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=20)  # keep reading stdout until it has stopped


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--calls", type=int, default=5_000_000)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--procs", type=int, default=1000)
    ap.add_argument("--windows", type=int, default=8)
    ap.add_argument("--idle-seconds", type=int, default=20)
    ap.add_argument("--nginx-seconds", type=int, default=5)
    args = ap.parse_args()
    if os.geteuid() != 0:
        print("collector_overhead: needs root (BPF)", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory() as tmpd:
        tmp = Path(tmpd)
        loop = _compile(LOOP_C, "getppid_loop", tmp)
        ticker = _compile(TICKER_C, "ticker", tmp)
        burst = _compile(BURST_C, "burst", tmp)
        print(f"syscall loop: {args.calls:,} getppid() x {args.repeats} repeats per arm", file=sys.stderr)
        loop_res = bench_loop(loop, args.calls, args.repeats)
        print(f"drain + build rows with {args.procs} live processes", file=sys.stderr)
        drain_res = bench_drain(ticker, args.procs, args.windows)
        print("syscall duty cycle accuracy", file=sys.stderr)
        duty_res = [bench_duty_accuracy(burst, args.windows, d) for d in (0.5, 0.2)]
        print("nginx requests/s under each arm", file=sys.stderr)
        nginx_res = bench_nginx(tmp, max(3, args.repeats // 2), args.nginx_seconds)
    print("collector CPU on this machine", file=sys.stderr)
    idle_res = bench_idle_cpu(args.idle_seconds)
    result = {**host_facts(), "loop": loop_res, "drain": drain_res,
              "duty_accuracy": duty_res, "nginx": nginx_res,
              "collector_cpu": idle_res}
    out = write_json("collector_overhead", result)

    print(f"\nSyscall loop ({args.calls:,} getppid, median of {args.repeats}, interleaved)")
    print(f"{'arm':<30} {'median s':>9} {'ns/call':>8} {'slowdown':>9}")
    for row in loop_res["arms"]:  # type: ignore[union-attr]
        print(f"{row['arm']:<30} {row['median_s']:9.3f} {row['ns_per_call']:8.1f} {row['slowdown']:8.2f}x")
    print(f"\nDrain + build rows, {args.procs} processes waking 5x/s, 1 s windows")
    print(f"{'collector':<10} {'median ms':>10} {'max ms':>8} {'rows':>6} {'CPU % core':>11}")
    for kind in ("bpf", "proc"):
        d = drain_res[kind]  # type: ignore[index]
        print(f"{kind:<10} {d['drain_build_ms_median']:10.1f} {d['drain_build_ms_max']:8.1f} "
              f"{d['rows_per_window_median']:6.0f} {d['cpu_percent_of_one_core']:11.2f}")
    for d in duty_res:
        print(f"\nSyscall duty {d['duty']}, steady process, {d['windows']} windows: per-window count error "
              f"median {100 * d['median_rel_error']:.1f}%, p90 {100 * d['p90_rel_error']:.1f}%")
    if nginx_res:
        print(f"\nnginx, 2 KB page, wrk -t1 -c16 {args.nginx_seconds} s, median of {nginx_res['repeats']}")
        print(f"{'arm':<30} {'req/s':>10} {'relative':>9}")
        for row in nginx_res["arms"]:  # type: ignore[index]
            print(f"{row['arm']:<30} {row['median_rps']:10.0f} {row['relative']:8.3f}x")
    print(f"\nCollector process CPU at 1 s windows ({idle_res['seconds']:.0f} s): "
          f"{idle_res['cpu_percent_of_one_core']:.2f}% of one core")
    print(f"\nwrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
