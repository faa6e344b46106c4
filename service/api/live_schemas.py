"""What the live endpoints answer (pydantic), so /openapi.json documents each of them."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["Placement", "PlannedAction", "LastWindow", "ProcessRow", "ProcessList", "WindowSummary",
           "ProcessDetail", "Group", "Groups", "Skipped", "LabelChange", "PlanView",
           "HistoryPoint", "ProcessTimeline", "History"]


class Placement(BaseModel):
    """What procsift set on a process (absent fields: left as they were)."""

    profile: str
    cpus: list[int] | None = None
    nice: int | None = None
    io_class: str | None = None
    io_level: int | None = None
    sched_policy: str | None = None
    slice_us: int | None = None
    cpu_weight: int | None = None
    cpu_idle: bool | None = None
    autogroup_nice: int | None = None


class PlannedAction(Placement):
    """One process's line of the plan, with who it is and the rule that chose it."""

    pid: int
    start_time: int
    comm: str
    label: str | None
    rule: str


class LastWindow(BaseModel):
    """The key figures of a process's last window (null before its first)."""

    run_ms: float | None = None
    runq_ms: float | None = None
    max_wait_ms: float | None = None
    syscalls: int | None = None
    top_syscalls: list[tuple[str, int]] | None = None
    run_wait_transitions: int | None = None


class ProcessRow(BaseModel):
    """One tracked process in /v1/processes."""

    pid: int
    start_time: int
    comm: str
    label: str | None = Field(description="smoothed label; null before any verdict")
    probability: float
    profile: str | None
    placement: Placement | None
    rule: str = Field(description="why it is placed so, or why it is left alone")
    last_window: LastWindow


class ProcessList(BaseModel):
    """Every tracked process."""

    windows: int
    t: float = Field(description="when the snapshot was published, unix seconds")
    paused: bool
    processes: list[ProcessRow]


class WindowSummary(BaseModel):
    """One of a process's recent windows, as the daemon labelled it."""

    t_start: float
    dur_s: float
    label: str
    proba: dict[str, float]
    insufficient: bool
    run_ms: float
    runq_ms: float
    max_wait_ms: float
    syscalls: int
    top_syscalls: list[tuple[str, int]]
    run_wait_transitions: int


class ProcessDetail(BaseModel):
    """/v1/processes/{pid}: why a process is placed as it is."""

    pid: int
    start_time: int
    comm: str
    label: str | None
    demand: float | None = Field(description="share of a window on a CPU or in D state, before placement")
    probability: float
    last_window_label: str
    last_window_proba: dict[str, float]
    windows: list[WindowSummary]
    rule: str
    action: Placement | None


class Group(BaseModel):
    """One label's group."""

    processes: int
    profiles: list[str]
    cpus: list[int] = Field(description="CPUs the group may use; empty: all")


class Groups(BaseModel):
    """/v1/groups."""

    policy: str
    paused: bool
    groups: dict[str, Group]


class Skipped(BaseModel):
    """A process deliberately left alone, and why."""

    pid: int
    why: str


class LabelChange(BaseModel):
    """A process whose smoothed label changed."""

    model_config = ConfigDict(populate_by_name=True)

    t: float
    pid: int
    comm: str
    from_: str | None = Field(alias="from")
    to: str | None
    probability: float


class PlanView(BaseModel):
    """/v1/plan: the last window's plan."""

    policy: str
    dry_run: bool
    paused: bool
    actions: list[PlannedAction]
    skipped: list[Skipped]
    label_changes: list[LabelChange]


class HistoryPoint(BaseModel):
    """One window of the daemon's recent history."""

    t: float = Field(description="end of the window, unix seconds")
    processes: dict[str, int] = Field(description="tracked processes per label")
    cpu_share: dict[str, float] = Field(description="per label: CPU time over the window, in CPUs (1.0 = one core)")
    runq_ms: dict[str, float] = Field(description="per label: mean run-queue delay per process in the window, ms")
    psi_cpu: float | None = Field(description="/proc/pressure/cpu some avg10, percent")
    psi_io: float | None = Field(description="/proc/pressure/io some avg10, percent")
    changes: int = Field(description="values written to processes in the window")


class ProcessTimeline(BaseModel):
    """One process's smoothed label over the same span, as the windows where it changed."""

    pid: int
    start_time: int
    comm: str
    first_t: float = Field(description="end of the first window it was tracked in (within the span)")
    last_t: float = Field(description="end of the last window it was tracked in")
    changes: list[tuple[float, str | None]] = Field(
        description="(window end, label from then on) pairs, oldest first; null: no verdict yet")


class History(BaseModel):
    """/v1/history: the last minutes, one point per window, oldest first."""

    window_s: float
    span_s: float
    points: list[HistoryPoint]
    timelines: list[ProcessTimeline]
