"""Human-readable plans for `--dry-run` and `explain` (pure)."""

from __future__ import annotations

import textwrap

from procsift.collector.schema import printable
from procsift.distributor.views import Action, Plan

__all__ = ["format_plan", "format_action"]


def _values(a: Action) -> str:
    parts = []
    if a.nice is not None:
        parts.append(f"nice {a.nice}")
    if a.sched_policy is not None:
        parts.append(a.sched_policy)
    if a.io_class is not None:
        parts.append(a.io_class if a.io_class == "idle" else f"{a.io_class}/{a.io_level}")
    if a.cpus is not None:
        parts.append("cpus " + ",".join(map(str, a.cpus)))
    if a.slice_us is not None:
        parts.append(f"slice {a.slice_us}us")
    if a.cpu_idle:
        parts.append("cpu.idle")
    elif a.cpu_weight is not None:
        parts.append(f"weight {a.cpu_weight}")
    if a.autogroup_nice is not None:
        parts.append(f"autogroup nice {a.autogroup_nice}")
    return ", ".join(parts) or "left as is"


def format_action(a: Action, width: int = 80) -> str:
    """One action: what (one line), then why (wrapped to `width`)."""
    why = textwrap.wrap(a.rule, width, initial_indent=" " * 8 + "why: ", subsequent_indent=" " * 13)
    return "\n".join([f"{a.pid:>7} {printable(a.comm)[:15]:<15} {(a.label or '-')[:12]:<12} {_values(a)}", *why])


def format_plan(plan: Plan, width: int = 80) -> str:
    """The whole plan: a header, one entry per action, then the processes left alone and why."""
    lines = [f"plan ({plan.kind}): {len(plan.actions)} to place, {len(plan.skipped)} left alone",
             f"{'PID':>7} {'COMM':<15} {'LABEL':<12} PLACEMENT"]
    for a in sorted(plan.actions, key=lambda a: (a.label or "", a.pid)):
        for line in format_action(a, width).splitlines():
            lines.append(line if len(line) <= width else line[:width - 1] + "…")
    if plan.skipped:
        lines.append("left alone:")
        for pid, why in sorted(plan.skipped):
            lines += textwrap.wrap(why, width, initial_indent=f"{pid:>7} ", subsequent_indent=" " * 8)
    return "\n".join(lines)
