"""Plans and applies per-group CPU placement, niceness and I/O class, safely and reversibly.

Pure: load_policy / parse_policy (policy TOML), plan (the four policies), parse_psi.
Side effects: Applier (the only thing that changes processes), read_psi (reads /proc).
"""

from procsift.distributor._sys import read_autogroup as autogroup_of
from procsift.distributor.apply import Applier, ApplyReport, resolve_backend
from procsift.distributor.errors import BackendUnavailable, JournalError, PolicyError
from procsift.distributor.journal import STATE_DIR_ENV, default_journal_path
from procsift.distributor.planners import plan
from procsift.distributor.policy import (
    ExceptionRule, Policy, Profile, load_policy, parse_policy,
)
from procsift.distributor.psi import parse_psi, read_psi
from procsift.distributor.views import Action, Plan, PlannerState, ProcessView, Psi, SystemView

__all__ = [
    "Action", "Applier", "ApplyReport", "autogroup_of", "BackendUnavailable", "ExceptionRule", "JournalError",
    "Plan", "PlannerState", "Policy", "PolicyError", "ProcessView", "Profile", "Psi",
    "STATE_DIR_ENV", "SystemView", "default_journal_path", "load_policy", "parse_policy",
    "parse_psi", "plan", "read_psi", "resolve_backend", "system_view",
]


def system_view() -> SystemView:
    """The machine now: online CPUs (this process's usable set) and PSI for cpu and io."""
    import os
    from pathlib import Path

    from procsift.distributor.policy import parse_cpulist

    try:
        online = parse_cpulist(Path("/sys/devices/system/cpu/online").read_text().strip())
    except (OSError, ValueError):
        online = tuple(sorted(os.sched_getaffinity(0)))
    return SystemView(online_cpus=online,
                      psi_cpu=read_psi("cpu"), psi_io=read_psi("io"))
