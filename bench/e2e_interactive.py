"""End-to-end: an interactive-like process under two CPU hogs (in another session). The probe
sleeps 10 ms (absolute CLOCK_MONOTONIC deadline, timer slack 1 ns), wakes, records how late it
woke, spins a short burst (default 0.5 ms) and sleeps again: a UI thread's shape. It runs in
this benchmark's session, like a program started from the user's terminal.

Arms as in e2e_web.py: none; procsift (`procsift run`, default policy, started cold after the
hogs and the probe, `--warmup` s after its first window, SIGTERM, restore checked); oracle
(the hogs by hand in a cpu.idle cgroup). Interleaved, order rotated, medians over repeats of
the per-run p50 / p99 / mean lateness.

Needs root. Run: `sudo .venv/bin/python bench/e2e_interactive.py [--repeats 3] [--seconds 10]`.
Writes bench/results/e2e_interactive.json.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import _e2e as e2e

# On SIGUSR1: write the latenesses (ns, int64) since the last dump to OUT (tmp + rename),
# then start a new record. Signals only set flags; the loop acts on them.
PROBE_C = r"""
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>
static volatile sig_atomic_t dump = 0;
static void on_usr1(int s) { (void)s; dump = 1; }
static int64_t now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec * 1000000000LL + t.tv_nsec; }
int main(int argc, char **argv) {
    const char *out = argv[1];
    int64_t period = atol(argv[2]) * 1000LL, burst = atol(argv[3]) * 1000LL;
    static int64_t lat[1 << 20];
    long n = 0;
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", out);
    prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
    struct sigaction sa = {0};
    sa.sa_handler = on_usr1;
    sigaction(SIGUSR1, &sa, 0);
    volatile uint64_t x = 1;
    for (;;) {
        int64_t target = now() + period;
        struct timespec ts = {target / 1000000000LL, target % 1000000000LL};
        while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, 0) == EINTR) {}
        int64_t woke = now();
        if (n < (1 << 20)) lat[n++] = woke - target;
        while (now() - woke < burst) x = x * 6364136223846793005ULL + 1;
        if (dump) {
            FILE *f = fopen(tmp, "wb");
            if (f) { fwrite(lat, sizeof lat[0], n, f); fclose(f); rename(tmp, out); }
            n = 0;
            dump = 0;
        }
    }
}
"""


class Probe:
    """The interactive-like process and its lateness record."""

    def __init__(self, exe: Path, tmp: Path, period_us: int, burst_us: int) -> None:
        self.out = tmp / "lateness.bin"
        self.proc = subprocess.Popen([str(exe), str(self.out), str(period_us), str(burst_us)])

    def collect(self) -> list[float]:
        """Ask for the record since the last call; return the latenesses in microseconds."""
        self.out.unlink(missing_ok=True)
        self.proc.send_signal(signal.SIGUSR1)
        deadline = time.monotonic() + 10
        while not self.out.exists():
            if time.monotonic() > deadline:
                raise RuntimeError("probe did not dump its record")
            time.sleep(0.01)
        data = self.out.read_bytes()
        return [v / 1e3 for v in struct.unpack(f"{len(data) // 8}q", data)]

    def stop(self) -> None:
        e2e.stop_proc(self.proc, signal.SIGKILL)


def pct(vals: list[float], p: float) -> float:
    s = sorted(vals)
    return s[min(len(s) - 1, int(round(p / 100 * (len(s) - 1))))]


def measure(probe: Probe, hogs: e2e.Hogs, arm: e2e.Arm, seconds: float) -> dict[str, Any]:
    probe.collect()  # drop what came before the measurement
    with e2e.Meter(hogs, arm.daemon_pid) as m:
        time.sleep(seconds)
        lat = probe.collect()
    out = {"wakeups": len(lat), "mean_us": statistics.fmean(lat), "p50_us": pct(lat, 50),
           "p90_us": pct(lat, 90), "p99_us": pct(lat, 99), "max_us": max(lat),
           "over_1ms": sum(v > 1000 for v in lat) / len(lat),
           "hog_rate": m.hog_rate, "daemon_cpu_pct": m.daemon_cpu_pct, "psi_cpu_end": e2e.psi_cpu()}
    if isinstance(arm, e2e.ProcsiftArm):
        arm.snapshot("after measuring")
    return out


FIELDS = ("wakeups", "mean_us", "p50_us", "p90_us", "p99_us", "max_us", "over_1ms", "hog_rate", "daemon_cpu_pct")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--seconds", type=int, default=10, help="length of each measurement")
    ap.add_argument("--warmup", type=float, default=8.0,
                    help="s between procsift's first window (after its start-up) and measuring")
    ap.add_argument("--model", default=e2e.default_model(), help="model bundle for procsift run")
    ap.add_argument("--window", type=float, default=2.0, help="procsift window (s); 2 = the bundled model's")
    ap.add_argument("--period-us", type=int, default=10_000)
    ap.add_argument("--burst-us", type=int, default=500)
    ap.add_argument("--oracle", choices=("idle", "weight2"), default="idle")
    ap.add_argument("--arms", default="none,procsift,oracle",
                    help="comma-separated; also procsift-exempt (the workload exempted by policy: "
                         "only the hogs' labels act)")
    ap.add_argument("--policy-arm", action="append", default=[], metavar="NAME=FILE",
                    help="an extra procsift arm NAME run with policy FILE (repeatable; add NAME to --arms)")
    ap.add_argument("--out", default="e2e_interactive", help="name of the JSON under bench/results/")
    args = ap.parse_args()
    if os.geteuid() != 0:
        print("e2e_interactive: needs root (BPF, cgroups)", file=sys.stderr)
        return 1
    log = lambda s: print(s, file=sys.stderr, flush=True)  # noqa: E731
    result: dict[str, Any] = {**e2e.host_facts(), "args": vars(args), "loadavg_start": e2e.loadavg()}
    with tempfile.TemporaryDirectory(prefix="e2e-int-") as tmpd:
        tmp = Path(tmpd)
        hogs = e2e.Hogs(e2e.compile_c(e2e.HOG_C, "hog", tmp), tmp, 2)
        probe = None
        try:
            probe = Probe(e2e.compile_c(PROBE_C, "probe", tmp), tmp, args.period_us, args.burst_us)
            p = probe
            watch = lambda: {"hogs": hogs.pids, "probe": [p.proc.pid]}  # noqa: E731
            def procsift_arm(name: str, extra: list[str]) -> e2e.ProcsiftArm:
                return e2e.ProcsiftArm(tmp, args.model, lambda: hogs.pids + [p.proc.pid], watch,
                                       args.warmup, args.window, extra=extra, name=name)
            arms: dict[str, e2e.Arm] = {
                "none": e2e.Arm(),
                "procsift": procsift_arm("procsift", []),
                "procsift-exempt": procsift_arm(
                    "procsift-exempt", ["--policy", str(e2e.exempt_policy(tmp, ["probe"]))]),
                **{name: procsift_arm(name, ["--policy", str(Path(file).resolve())])
                   for name, file in e2e.policy_arms(args.policy_arm)},
                "oracle": e2e.OracleArm(hogs.pids, args.oracle)}
            chosen = [arms[a] for a in args.arms.split(",")]
            log(f"e2e_interactive: {len(chosen)} arms x {args.repeats} repeats, {args.seconds} s each; "
                f"hogs {hogs.pids}, probe {p.proc.pid}; load {e2e.loadavg()}")
            time.sleep(2)
            runs = e2e.run_arms(chosen, args.repeats, lambda a: measure(p, hogs, a, args.seconds), log)
        finally:
            if probe:
                probe.stop()
            hogs.stop()
    med = {name: {f: e2e.median_of(rs, f) for f in FIELDS} for name, rs in runs.items()}
    result.update(loadavg_end=e2e.loadavg(), runs=runs, medians=med)
    if all(a in med for a in ("none", "procsift")):
        n99, p99 = med["none"]["p99_us"] or float("nan"), med["procsift"]["p99_us"] or float("nan")
        daemon = med["procsift"]["daemon_cpu_pct"] or float("nan")
        result["targets"] = [
            {"target": "wake-up p99 lateness >= 3x better than none", "value": round(n99 / p99, 3),
             "need": ">= 3", "met": n99 / p99 >= 3},
            {"target": "daemon CPU (1 s windows) < 2%", "value": round(daemon, 3), "need": "< 2",
             "met": daemon < 2}]
    ps_arms = [a for a in chosen if isinstance(a, e2e.ProcsiftArm)]
    result["procsift_argv"] = {a.name: getattr(a, "argv", None) for a in ps_arms}
    result["labels"] = {a.name: a.snapshots for a in ps_arms}
    out = e2e.write_json(args.out, result)

    names = list(runs)
    print(f"\nInteractive probe ({args.period_us / 1000:g} ms sleep, {args.burst_us} us burst) under two CPU hogs; "
          f"medians of {args.repeats} x {args.seconds} s; load {result['loadavg_start'][0]:.2f} -> "
          f"{result['loadavg_end'][0]:.2f}")
    print(f"{'':<30}" + "".join(f"{n:>11}" for n in names))
    for f, head, scale, fmt in (("p50_us", "lateness p50 (us)", 1, "{:.0f}"), ("p99_us", "lateness p99 (us)", 1, "{:.0f}"),
                                ("mean_us", "lateness mean (us)", 1, "{:.0f}"), ("max_us", "lateness max (us)", 1, "{:.0f}"),
                                ("over_1ms", "wake-ups > 1 ms late (%)", 100, "{:.1f}"),
                                ("wakeups", "wake-ups", 1, "{:.0f}"),
                                ("hog_rate", "hog work (M chunks/s)", 1e-6, "{:.2f}"),
                                ("daemon_cpu_pct", "daemon CPU (% core)", 1, "{:.2f}")):
        vals = [med[n][f] for n in names]
        cells = [f"{fmt.format(v * scale) if v is not None else '-':>11}" for v in vals]
        print(f"{head:<30}" + "".join(cells))
    for t in result.get("targets", []):
        print(f"  {'MET ' if t['met'] else 'MISS'} {t['target']:<46} {t['value']:>8} (need {t['need']})")
    for run in runs.get("procsift", []):
        r = run["teardown"].get("restored", {})
        print(f"  procsift repeat {run['repeat']}: exit {run['teardown'].get('daemon_exit')}, "
              f"{r.get('checked')} processes checked, not restored: {r.get('not_restored')}")
    print(f"\nwrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
