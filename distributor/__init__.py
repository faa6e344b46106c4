"""Plans and applies per-group CPU placement, niceness and I/O class, safely and reversibly.

Pure: load_policy / parse_policy (policy TOML), plan (the four policies), parse_psi.
Side effects: Applier (the only thing that changes processes), read_psi / system_view /
autogroup_of (read /proc).

How the daemon drives it::

    policy = load_policy(path)                     # PolicyError: keep the previous one on reload
    applier = Applier(default_journal_path(), backend=policy.backend, dry_run=dry_run)
    applier.recover()                              # undo what a crashed run left
    state = None
    every window:
        views = [ProcessView.from_window(w, label, p, autogroup_of(w.pid)) ...]  # all processes
        p = plan(policy, views, system_view(), state); state = p.state
        report = applier.apply(p)                  # p.why(pid) answers `explain`
    on SIGTERM: applier.restore_all(); applier.close()

Pass every process the collector saw (labelled or not) so exceptions reach descendants and
autogroup nice is only set where a whole session agrees.
"""

from procsift.distributor import _sys
from procsift.distributor.apply import Applier, ApplyReport, resolve_backend
from procsift.distributor.errors import BackendUnavailable, JournalError, PolicyError, ProcsiftError
from procsift.distributor.journal import STATE_DIR_ENV, default_journal_path
from procsift.distributor.planners import plan
from procsift.distributor.policy import (
    ExceptionRule, Policy, Profile, load_policy, parse_policy,
)
from procsift.distributor.psi import parse_psi, read_psi
from procsift.distributor.text import format_action, format_plan
from procsift.distributor.views import Action, Plan, PlannerState, ProcessView, Psi, SystemView

__all__ = [
    "Action", "Applier", "ApplyReport", "autogroup_of", "BackendUnavailable", "ExceptionRule", "JournalError",
    "Plan", "PlannerState", "Policy", "PolicyError", "ProcessView", "Profile", "Psi",
    "STATE_DIR_ENV", "SystemView", "default_journal_path", "format_action", "format_plan", "load_policy", "parse_policy",
    "parse_psi", "plan", "read_psi", "resolve_backend", "system_view",
]


def system_view() -> SystemView:
    """The machine now: online CPUs and PSI for cpu and io."""
    return SystemView(online_cpus=_sys.online_cpus(), psi_cpu=read_psi("cpu"), psi_io=read_psi("io"))


def autogroup_of(pid: int) -> str | None:
    """The autogroup (session) a process belongs to, e.g. "/autogroup-7"; None without one or if gone."""
    try:
        got = _sys.read_autogroup(pid)
    except ProcsiftError:
        return None
    return got[0] if got else None
