"""Wall-clock time of the web model at the FCF paper's scale (about 1,000,000 requests per run).

Prints a table and writes bench/results/simulate_speed.json. Usage:
    .venv/bin/python bench/simulate_speed.py [--requests N] [--users N] [--policy P ...]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path

from procsift.simulate import simulate_web, summarise


def main() -> None:
    """Time one run per policy and record the figures beside the time."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--requests", type=int, default=1_006_149, help="the paper's count")
    ap.add_argument("--users", type=int, default=1000)
    ap.add_argument("--policy", action="append", default=None)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    rows = []
    print(f"{'policy':<6} {'users':>5} {'requests':>9} {'wall s':>7} {'resp ms':>9} {'slowdown':>9}")
    for policy in args.policy or ["fifo", "fcf"]:
        t0 = time.perf_counter()
        result = simulate_web(policy, args.users, args.requests, seed=args.seed)
        wall = time.perf_counter() - t0
        row = summarise(result)
        rows.append({"policy": policy, "users": args.users, "requests": args.requests,
                     "wall_s": round(wall, 2), "mean_response_ms": row.mean_response_ms,
                     "mean_slowdown": row.mean_slowdown})
        print(f"{policy:<6} {args.users:>5} {args.requests:>9} {wall:>7.1f} "
              f"{row.mean_response_ms:>9.1f} {row.mean_slowdown:>9.3f}")
    out = Path(__file__).parent / "results" / "simulate_speed.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                                           "processor": platform.processor()},
                               "runs": rows}, indent=1) + "\n")
    print("wrote", out)


if __name__ == "__main__":
    main()
