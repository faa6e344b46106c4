"""`procsift run`: the background service; and the daemon form of `procsift explain PID`."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from typing import Any

from procsift.collector.errors import ProcsiftError
from procsift.collector.schema import printable
from procsift.distributor import default_journal_path
from procsift.service.cli._args import existing_pids, pid, port, positive_int, window_seconds

__all__ = ["register", "explain_daemon"]

EXAMPLES = """examples:
  procsift run                            bundled model and policy, live table
  procsift run --dry-run                  show the plan each window, change nothing
  procsift run --policy /etc/procsift/policy.toml --model ./bundle --window 2
  procsift explain 1234                   ask the running daemon why PID 1234 is placed so
SIGHUP reloads policy and model (validated first); SIGTERM or Ctrl-C restores every value
procsift changed and exits 0. `procsift restore` undoes a run that was killed.
"""


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add the `run` verb."""
    p = sub.add_parser("run", help="the service: label processes every window and place them",
                       epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--policy", metavar="FILE", help="policy TOML (default: the bundled one)")
    p.add_argument("--model", metavar="BUNDLE", help="model bundle folder (default: the bundled one)")
    p.add_argument("-w", "--window", type=window_seconds, metavar="S",
                   help="window length (default: the model's, 2 s for the bundled one)")
    p.add_argument("--dry-run", action="store_true", help="print the plan; change nothing")
    p.add_argument("--journal", default=str(default_journal_path()), metavar="PATH",
                   help="journal of original values (default: %(default)s)")
    p.add_argument("--backend", default="auto", choices=("auto", "cgroup", "autogroup", "none"),
                   help="how weights and autogroup nice are made real (default: auto)")
    p.add_argument("-n", "--count", type=positive_int, help="stop (and restore) after this many windows")
    p.add_argument("--no-table", action="store_true", help="no live table, logs only")
    p.add_argument("--proc", action="store_true", help="use the /proc collector (no syscall counts)")
    p.add_argument("-p", "--pid", type=pid, nargs="+", metavar="PID",
                   help="manage only these processes and their descendants")
    p.add_argument("-v", "--verbose", action="store_true", help="log every change (structured, to stderr)")
    p.add_argument("--no-api", action="store_true", help="do not serve the REST API and dashboard")
    p.add_argument("--host", default=os.environ.get("PROCSIFT_HOST", "127.0.0.1"),
                   help="API address (default: %(default)s; anything but loopback exposes it)")
    p.add_argument("--port", type=port, default=os.environ.get("PROCSIFT_PORT", "8765"),
                   help="API port (default: %(default)s)")
    p.add_argument("--token-file", default=os.environ.get("PROCSIFT_TOKEN_FILE"), metavar="PATH",
                   help="bearer token for control endpoints (default: api-token beside the journal)")
    p.set_defaults(func=cmd_run)


def cmd_run(args: argparse.Namespace) -> int:
    from pathlib import Path  # noqa: PLC0415

    from procsift.service.daemon import DaemonConfig, run_daemon  # noqa: PLC0415

    existing_pids(args.pid)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(asctime)s %(levelname)s %(name)s %(message)s", stream=sys.stderr)
    cfg = DaemonConfig(policy_path=args.policy, model_path=args.model, window_s=args.window,
                       dry_run=args.dry_run, journal_path=args.journal,
                       state_dir=str(Path(args.journal).parent), backend=args.backend,
                       table=not args.no_table, count=args.count, force_proc=args.proc,
                       pids=args.pid, api=not args.no_api, host=args.host, port=args.port,
                       token_file=args.token_file)
    return run_daemon(cfg)


def explain_daemon(pid: int, journal: str | None = None, as_json: bool = False) -> int:
    """Print what the running daemon knows about `pid`: windows, label, probability, rule, action."""
    from pathlib import Path  # noqa: PLC0415

    from procsift.service.daemon import read_state  # noqa: PLC0415

    state = read_state(Path(journal or default_journal_path()).parent)
    entry: dict[str, Any] | None = state["processes"].get(str(pid))
    if entry is None:
        raise ProcsiftError(f"the daemon has no record of PID {pid} (not active since it started, "
                            "excluded before labelling, or gone)")
    if as_json:
        print(json.dumps(entry, indent=2))
        return 0
    print(f"PID {pid} ({printable(entry['comm'])}), start_time {entry['start_time']}")
    print(f"label        {entry['label']}  (smoothed; probability {entry['probability']:.2f})")
    print(f"last window  {entry['last_window_label']}  {entry['last_window_proba']}")
    print(f"rule         {entry['rule']}")
    action = entry.get("action")
    print("action       " + (", ".join(f"{k}={v}" for k, v in action.items()) if action else "none"))
    print("recent windows:")
    for w in entry["windows"]:
        print(f"  {w['label']:<13} run {w['run_ms']:7.1f} ms  runq {w['runq_ms']:6.1f} ms  "
              f"max wait {w['max_wait_ms']:8.1f} ms  syscalls {w['syscalls']:6d}  "
              f"r/w {w['run_wait_transitions']:4d}{'  (too quiet)' if w['insufficient'] else ''}")
    return 0
