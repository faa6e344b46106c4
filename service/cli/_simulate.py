"""`procsift simulate deadline|web`: try the papers' scheduling policies offline."""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
from pathlib import Path
from typing import Any

from tqdm import tqdm

from procsift.simulate import (
    FETCH_MODES,
    POLICIES,
    MachineSpec,
    STRATEGIES,
    ServerSpec,
    SimulationError,
    capacity,
    run_deadline,
    size_mix,
    sweep,
    table2,
    table3,
)
from procsift.simulate.deadline_experiments import PAPER_SLICES, best_slice
from procsift.simulate.web_experiments import PAPER_USERS

DEADLINE_EXAMPLES = """examples:
  procsift simulate deadline              all three strategies at 48 trans./min
  procsift simulate deadline --strategy two-level --slice 2 --rate 42
  procsift simulate deadline --paper      Fig. 4, Tables 2-3, Fig. 5 (~1 min)
  procsift simulate deadline --paper --fetch parallel    the same, pages fetched in parallel
  procsift simulate deadline --paper --fetch drum-fifo   the same, pages from a paging drum
"""
WEB_EXAMPLES = """examples:
  procsift simulate web --users 1000 --requests 100000
  procsift simulate web --policy fcf --policy srpt --users 900 --json
  procsift simulate web --paper           Figs. 1-6, 200k requests/run (~7 min)
  procsift simulate web --paper --policy fifo --policy fcf --requests 1006149
"""


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text}")
    return value


def _nonneg_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"must be a number >= 0, got {text}")
    return value


def register(subparsers: Any) -> None:
    """Add the `simulate` verb with its `deadline` and `web` models."""
    sim = subparsers.add_parser("simulate", help="simulate the papers' scheduling policies offline",
                                description="Simulate scheduling policies from procsift's papers.")
    models = sim.add_subparsers(dest="model", metavar="MODEL", required=True)
    fmt = argparse.RawDescriptionHelpFormatter

    d = models.add_parser("deadline", help="deadline scheduling vs time slicing (1973 paper)",
                          epilog=DEADLINE_EXAMPLES, formatter_class=fmt)
    d.add_argument("--strategy", choices=(*STRATEGIES, "all"), default="all", metavar="NAME",
                   help=f"{', '.join(STRATEGIES)} or all (default)")
    d.add_argument("--rate", type=_nonneg_float, default=48.0,
                   help="terminal transactions per minute, besides the background (default 48)")
    d.add_argument("--slice", type=float, default=None, dest="time_slice",
                   help="time slice in s (default: the paper's best, 3.5 one-level, 2.0 two-level)")
    d.add_argument("--duration", type=_nonneg_float, default=1800.0, help="simulated seconds (default 1800)")
    d.add_argument("--seed", type=int, default=1)
    fetch_ms = MachineSpec().fetch_time * 1e3
    drum_ms = {m: MachineSpec(fetch=m).page_transfer * 1e3 for m in ("drum", "drum-fifo")}
    d.add_argument("--fetch", choices=FETCH_MODES, default="serial",
                   help=f"how k pages given together arrive: one after another, {fetch_ms:g} ms each "
                        f"(serial, default); all {fetch_ms:g} ms later (parallel); from a paging drum, "
                        f"{fetch_ms:g} ms for the first and {drum_ms['drum']:.1f} ms (drum, one chained "
                        f"request) or {drum_ms['drum-fifo']:.1f} ms (drum-fifo, one request per page) for "
                        "each further page; see docs/simulation.md")
    d.add_argument("--paper", action="store_true", help="reproduce Fig. 4, Tables 2 and 3 and Fig. 5")
    d.add_argument("--png-dir", type=Path, default=None, help="write Fig. 5 as a PNG here")
    d.add_argument("--json", action="store_true", help="print JSON instead of a table")
    d.set_defaults(func=_deadline)

    w = models.add_parser("web", help="FCF vs FIFO/PS/SRPT for a web server (FCF paper)",
                          epilog=WEB_EXAMPLES, formatter_class=fmt)
    w.add_argument("--policy", choices=POLICIES, action="append", default=None,
                   help="repeatable (default: fifo and fcf)")
    w.add_argument("--users", type=_positive_int, action="append", default=None,
                   help="simultaneous users, repeatable (default 1000)")
    w.add_argument("--requests", type=_positive_int, default=None,
                   help="requests per run (default 100000; 200000 with --paper)")
    w.add_argument("--seed", type=int, default=1)
    w.add_argument("--disk-ms", type=_nonneg_float, default=None,
                   help=f"disk positioning time per 16 KB block in ms "
                        f"(default {ServerSpec().disk_block_base * 1e3:g})")
    w.add_argument("--closed", action="store_true",
                   help="users wait for each response before thinking (default: SURGE's own clock)")
    w.add_argument("--paper", action="store_true",
                   help="every policy at 300-1000 users: the paper's Figs. 1-6")
    w.add_argument("--png-dir", type=Path, default=None, help="write Figs. 1-3, 5, 6 as PNGs here")
    w.add_argument("--json", action="store_true", help="print JSON instead of a table")
    w.set_defaults(func=_web)


# -- deadline ---------------------------------------------------------------------------
_DEFAULT_SLICE = {"one-level": 3.5, "two-level": 2.0, "deadline": None}


def _deadline(args: argparse.Namespace) -> int:
    if args.paper:
        return _deadline_paper(args)
    if args.duration < 600:
        raise SimulationError(f"--duration must be at least 600 s, got {args.duration:g}")
    names = STRATEGIES if args.strategy == "all" else (args.strategy,)
    runs = []
    for name in names:
        ts = None if name == "deadline" else (args.time_slice or _DEFAULT_SLICE[name])
        if ts is not None and not (math.isfinite(ts) and ts > 0):
            raise SimulationError(f"--slice must be positive, got {ts:g}")
        runs.append(run_deadline(name, args.rate, seed=args.seed, time_slice=ts, horizon=args.duration,
                                 spec=MachineSpec(fetch=args.fetch)))
    if args.json:
        print(json.dumps([_run_dict(r) for r in runs], indent=1))
        return 0
    print(f"terminal rate {args.rate:g}/min + background 3/min, {args.duration:g} s, seed {args.seed}, "
          f"{args.fetch} page fetches")
    _print_runs(runs)
    if args.png_dir:
        from procsift.simulate.plots import response_ratio_png

        args.png_dir.mkdir(parents=True, exist_ok=True)
        print("wrote", response_ratio_png({r.strategy: r for r in runs}, args.png_dir / "deadline_fig5.png"))
    return 0


def _run_dict(r: Any) -> dict[str, Any]:
    d = dataclasses.asdict(r)
    d.pop("ratios")
    return d


def _print_runs(runs: list[Any]) -> None:
    print(f"{'strategy':<11} {'slice':>5} {'fetches':>8} {'dispatch':>8} {'mean RR':>8} {'late %':>7} {'queue':>9}")
    for r in runs:
        ts = "-" if r.time_slice is None else f"{r.time_slice:g}"
        print(f"{r.strategy:<11} {ts:>5} {r.page_fetches:>8} {r.dispatches:>8} "
              f"{r.mean_ratio_terminal:>8.3f} {100 * r.late_fraction:>7.1f} {r.verdict:>9}")


def _deadline_paper(args: argparse.Namespace) -> int:
    seeds = tuple(range(args.seed, args.seed + 5))
    spec = MachineSpec(fetch=args.fetch)
    with tqdm(desc="capacity runs", unit="rate", file=sys.stderr, disable=args.json) as bar:
        cap = capacity(seeds=seeds, tick=lambda: bar.update(1), spec=spec)
    t2 = table2(seed=args.seed, spec=spec)
    one, two = best_slice(t2["one-level"]), best_slice(t2["two-level"])
    t3 = table3(one, two, seed=args.seed, spec=spec)
    if args.json:
        print(json.dumps({"fetch": args.fetch, "capacity": dataclasses.asdict(cap),
                          "table2": {s: {str(k): _run_dict(v) for k, v in d.items()} for s, d in t2.items()},
                          "table3": {k: _run_dict(v) for k, v in t3.items()}}, indent=1))
    else:
        print(f"{args.fetch} page fetches")
        print(f"Fig. 4  maximum terminal rate sustained (trans./min; seeds {seeds}, majority stable)")
        print(f"  deadline scheduling: {cap.deadline:g}")
        print(f"  {'slice (s)':<10}" + "".join(f"{s:>6g}" for s in PAPER_SLICES))
        print(f"  {'one-level':<10}" + "".join(f"{cap.one_level[s]:>6g}" for s in PAPER_SLICES))
        print(f"  {'two-level':<10}" + "".join(f"{cap.two_level[s]:>6g}" for s in PAPER_SLICES))
        print(f"  best: one-level {max(cap.one_level.values()):g}, two-level {max(cap.two_level.values()):g}")
        print("\nTable 2  mean terminal response ratio, 48/min, 20-minute runs (* = growing queue)")
        print(f"  {'slice (s)':<10}{'one-level':>11}{'two-level':>11}")
        for s in PAPER_SLICES:
            cells = [t2[k][s] for k in ("one-level", "two-level")]
            print(f"  {s:<10g}" + "".join(
                f"{c.mean_ratio_terminal:>10.3f}{'*' if c.verdict == 'growing' else ' '}" for c in cells))
        print(f"\nTable 3  30-minute runs at 48/min (one-level slice {one:g} s, two-level {two:g} s)")
        _print_runs(list(t3.values()))
    if args.png_dir:
        from procsift.simulate.plots import response_ratio_png

        args.png_dir.mkdir(parents=True, exist_ok=True)
        path = response_ratio_png(t3, args.png_dir / "deadline_fig5.png")
        if not args.json:
            print("wrote", path)
    return 0


# -- web ---------------------------------------------------------------------------------
def _web(args: argparse.Namespace) -> int:
    policies = tuple(args.policy or (POLICIES if args.paper else ("fifo", "fcf")))
    users = tuple(args.users or (PAPER_USERS if args.paper else (1000,)))
    requests = args.requests or (200_000 if args.paper else 100_000)
    total = len(policies) * len(users) * requests
    with tqdm(total=total, desc="requests", unit="req", unit_scale=True, file=sys.stderr,
              disable=args.json or total < 200_000) as bar:
        server = ServerSpec() if args.disk_ms is None else \
            dataclasses.replace(ServerSpec(), disk_block_base=args.disk_ms / 1000.0)
        rows, last = sweep(policies, users, requests, seed=args.seed, progress=bar.update,
                           server=server, closed=args.closed)
    if args.json:
        out = {"rows": [dataclasses.asdict(r) for r in rows]}
        if last is not None:
            out["size_mix"] = size_mix(last)
        print(json.dumps(out, indent=1))
    else:
        _print_web(rows, last)
    if args.png_dir:
        from procsift.simulate.plots import web_pngs

        for path in web_pngs(rows, args.png_dir):
            if not args.json:
                print("wrote", path)
    return 0


def _print_web(rows: list[Any], last: Any) -> None:
    print(f"{'users':>5} {'policy':<6} {'slowdown':>9} {'max sd':>9} {'resp ms':>9} {'pending':>8} {'disk %':>7}")
    for r in rows:
        print(f"{r.users:>5} {r.policy:<6} {r.mean_slowdown:>9.3f} {r.max_slowdown:>9.1f} "
              f"{r.mean_response_ms:>9.1f} {r.pending:>8.1f} {100 * r.disk_utilisation:>7.1f}")
    top = max(r.users for r in rows)
    at_top = [r for r in rows if r.users == top]
    for title, field in (("by file size", "by_size_ms"), ("by connection speed", "by_speed_ms")):
        keys = list(getattr(at_top[0], field))
        print(f"\nmean response (ms) {title}, {top} users")
        print(f"  {'':<7}" + "".join(f"{k:>9}" for k in keys))
        for r in at_top:
            vals = getattr(r, field)
            print(f"  {r.policy:<7}" + "".join(f"{vals.get(k, float('nan')):>9.1f}" for k in keys))
    if last is not None:
        mix = size_mix(last)
        print("\nsize mix (Fig. 4): % requests / % bytes")
        print("  " + "  ".join(f"{k} {a:.1f}/{b:.1f}" for k, (a, b) in mix.items()))
