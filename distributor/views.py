"""Plain frozen data crossing the planner boundary: what the planners see and what they decide."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from procsift.collector.schema import Window

__all__ = ["Psi", "ProcessView", "SystemView", "Action", "Plan", "PlannerState"]


@dataclass(frozen=True)
class Psi:
    """One /proc/pressure/* file: the share of wall time (%) some / all tasks stalled on a resource."""

    some_avg10: float
    some_avg60: float
    some_avg300: float
    some_total_us: int
    full_avg10: float | None = None
    full_avg60: float | None = None
    full_avg300: float | None = None
    full_total_us: int | None = None


@dataclass(frozen=True)
class ProcessView:
    """One process as the planner sees it: identity, where it lives, its label and its last window."""

    pid: int
    start_time: int
    comm: str
    label: str | None
    probability: float = 1.0
    exe: str = ""
    uid: int = -1
    ppid: int = 0
    cgroup: str = ""
    autogroup: str | None = None
    nthreads: int = 1
    runq_ns: int = 0
    run_ns: int = 0
    dispatches: int = 0
    """switches_in in the window: run-queue delay per dispatch is runq_ns / dispatches."""

    @classmethod
    def from_window(cls, w: Window, label: str | None, probability: float = 1.0,
                    autogroup: str | None = None) -> ProcessView:
        """Build the planner's view from a collector Window row plus the model's smoothed label."""
        return cls(pid=w.pid, start_time=w.start_time, comm=w.comm, label=label, probability=probability,
                   exe=w.exe, uid=w.uid, ppid=w.ppid, cgroup=w.cgroup, autogroup=autogroup,
                   nthreads=w.nthreads, runq_ns=w.runq_ns, run_ns=w.run_ns, dispatches=w.switches_in)


@dataclass(frozen=True)
class SystemView:
    """The machine as the planner sees it."""

    online_cpus: tuple[int, ...]
    psi_cpu: Psi | None = None
    psi_io: Psi | None = None

    @property
    def ncpu(self) -> int:
        """Number of online CPUs."""
        return len(self.online_cpus)


@dataclass(frozen=True)
class Action:
    """What one process should look like, and why. A None field means "leave as it is"."""

    pid: int
    start_time: int
    comm: str
    label: str | None
    profile: str
    rule: str
    cpus: tuple[int, ...] | None = None
    nice: int | None = None
    io_class: str | None = None
    io_level: int | None = None
    sched_policy: str | None = None
    slice_us: int | None = None
    cpu_weight: int | None = None
    cpu_idle: bool | None = None
    autogroup_nice: int | None = None
    """Set only when every process of the autogroup the planner saw gets this same nice."""


@dataclass(frozen=True)
class PlannerState:
    """The small state a planner carries from one window to the next (pure: passed in, returned)."""

    urgency: tuple[tuple[str, int], ...] = ()
    """deadline: urgency per group, 1..ceiling."""
    contended: tuple[tuple[str, bool], ...] = ()
    """html-first: whether "cpu" / "io" were judged contended last window (hysteresis)."""

    def urgency_of(self, group: str) -> int:
        """The urgency carried for a group (1 if none yet)."""
        return dict(self.urgency).get(group, 1)

    def is_contended(self, resource: str) -> bool:
        """Whether a resource was judged contended last window."""
        return dict(self.contended).get(resource, False)


@dataclass(frozen=True)
class Plan:
    """The planner's output: the actions, the processes deliberately left alone, and the next state."""

    actions: tuple[Action, ...]
    skipped: tuple[tuple[int, str], ...] = ()
    """(pid, why) for processes left alone on purpose: exceptions, no label, low probability."""
    state: PlannerState = field(default_factory=PlannerState)
    kind: str = ""

    def for_pid(self, pid: int) -> Action | None:
        """The action for a pid, if any (for `explain`)."""
        return next((a for a in self.actions if a.pid == pid), None)

    def why(self, pid: int) -> str | None:
        """Why a pid got its action, or why it was left alone; None if the plan never saw it."""
        action = self.for_pid(pid)
        if action is not None:
            return action.rule
        return next((why for p, why in self.skipped if p == pid), None)
