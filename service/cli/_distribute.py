"""`procsift restore` and `procsift check-policy`: the distributor's verbs that need no daemon."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path
from typing import Any

from procsift.distributor import Applier, default_journal_path, load_policy

__all__ = ["register"]

_RESTORE_EPILOG = """examples:
  procsift restore                      # undo what a crashed or killed daemon changed
  procsift restore --journal /tmp/j.json
The journal defaults to $PROCSIFT_STATE_DIR/journal.json (else /var/lib/procsift/journal.json).
A value someone else changed after procsift set it is left as they set it."""

_CHECK_EPILOG = """examples:
  procsift check-policy /etc/procsift/policy.toml
  procsift check-policy                 # the bundled default"""


def register(sub: Any) -> None:
    """Add the `restore` and `check-policy` verbs."""
    p = sub.add_parser("restore", help="put back every value a previous procsift run changed",
                       description="Restore the original nice, affinity, I/O class, scheduling policy, "
                       "slice, cgroup and autogroup nice of every process a previous run changed.",
                       epilog=_RESTORE_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--journal", metavar="PATH", help="journal file (default: %(default)s)",
                   default=str(default_journal_path()))
    p.add_argument("-v", "--verbose", action="store_true", help="log every value restored")
    p.set_defaults(func=_restore)
    c = sub.add_parser("check-policy", help="validate a policy file and summarise it",
                       epilog=_CHECK_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    c.add_argument("policy", nargs="?", metavar="FILE", help="policy TOML (default: the bundled one)")
    c.set_defaults(func=_check)


def _restore(args: argparse.Namespace) -> int:
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(asctime)s %(levelname)s %(message)s", stream=sys.stderr)
    if not Path(args.journal).exists():
        print(f"nothing to restore: no journal at {args.journal}")
        return 0
    applier = Applier(args.journal, backend="none")
    try:
        report = applier.recover()
        applier.restore_all()
    finally:
        applier.close()
    print(f"restored {report.restored} process(es), {report.writes} value(s); "
          f"{report.gone} gone since; {report.failed} failed")
    return 1 if report.failed else 0


def _check(args: argparse.Namespace) -> int:
    policy = load_policy(args.policy)
    print(f"{policy.source}: ok — kind {policy.kind}, backend {policy.backend}, "
          f"{len(policy.profiles)} profiles, {len(policy.exceptions)} exceptions")
    for label, prof in sorted(policy.labels.items()):
        p = policy.profiles[prof]
        fields = ", ".join(f"{k}={v}" for k, v in vars(p).items() if v is not None and k != "name")
        print(f"  {label:<13} -> {prof}: {fields or 'left alone'}")
    return 0
