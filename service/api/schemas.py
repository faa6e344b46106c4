"""Request and response bodies (pydantic), kept apart from the internal Window dataclass."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from procsift.collector.syscalls import SYSCALL_NAMES

__all__ = ["WindowIn", "PredictRequest", "PredictResponse", "WindowPrediction", "ProcessPrediction",
           "ModelInfo", "CommandResult", "Health"]

_KNOWN = frozenset(SYSCALL_NAMES)
_NS = Field(0, ge=0, le=2**53)            # nanoseconds / counts: exact in a float64
_COUNT = Field(0, ge=0, le=2**53)


class WindowIn(BaseModel):
    """One process's window (the DESIGN.md Window row); syscall counts by x86_64 name."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    host: str = Field("", max_length=255)
    t_start: float = Field(0.0, ge=0, description="window start, unix seconds")
    dur_s: float = Field(1.0, gt=0, le=3600, description="window length, seconds")
    pid: int = Field(ge=0, le=2**22)
    start_time: int = Field(ge=0, le=2**53, description="field 22 of /proc/PID/stat")
    ppid: int = Field(0, ge=0, le=2**22)
    comm: str = Field("", max_length=64)
    exe: str = Field("", max_length=4096)
    uid: int = Field(-1, ge=-1, le=2**32)
    nthreads: int = Field(1, ge=0, le=2**22)
    cgroup: str = Field("", max_length=4096)
    run_ns: int = _NS
    runq_ns: int = _NS
    sleep_ns: int = _NS
    block_ns: int = _NS
    switches_in: int = _COUNT
    voluntary: int = _COUNT
    involuntary: int = _COUNT
    max_wait_ns: int = _NS
    run_wait_transitions: int = _COUNT
    wakeups: int = _COUNT
    wakes_others: int = _COUNT
    read_bytes: int = _COUNT
    write_bytes: int = _COUNT
    rss_bytes: int = _COUNT
    syscall_counts: dict[str, int] = Field(default_factory=dict, max_length=len(SYSCALL_NAMES))

    @field_validator("syscall_counts")
    @classmethod
    def _known_names(cls, v: dict[str, int]) -> dict[str, int]:
        bad = sorted(n for n in v if n not in _KNOWN)
        if bad:
            raise ValueError(f"unknown syscall name(s) {', '.join(bad[:5])}; use x86_64 names such as read, epoll_wait")
        neg = sorted(n for n, c in v.items() if not 0 <= c <= 2**53)
        if neg:
            raise ValueError(f"syscall counts must be between 0 and 2**53: {', '.join(neg[:5])}")
        return v


class PredictRequest(BaseModel):
    """One or many windows, of one or many processes."""

    model_config = ConfigDict(extra="forbid")

    windows: list[WindowIn] = Field(min_length=1)


class Step(BaseModel):
    """The reasoning behind one window's label (decision path, cluster, thresholds)."""

    steps: list[str]
    details: dict[str, Any]


class WindowPrediction(BaseModel):
    """One window's label and probabilities."""

    pid: int
    start_time: int
    t_start: float
    label: str
    probabilities: dict[str, float]
    insufficient: bool = Field(description="too little activity to judge: the process keeps its label")
    explanation: Step | None = None


class ProcessPrediction(BaseModel):
    """A process's smoothed label over the windows sent (k of n hysteresis, as the daemon)."""

    pid: int
    start_time: int
    label: str | None = Field(description="None when every window was insufficient")
    probability: float
    windows: int


class PredictResponse(BaseModel):
    """Per-window and per-process labels."""

    model: str
    window_s: float
    windows: list[WindowPrediction]
    processes: list[ProcessPrediction]


class ModelInfo(BaseModel):
    """The served bundle: kind, labels, window length and its metadata (scores, versions, hashes)."""

    kind: str
    labels: list[str]
    window_s: float
    path: str | None
    metadata: dict[str, Any]


class CommandResult(BaseModel):
    """What the daemon did with a control command."""

    model_config = ConfigDict(extra="allow")

    ok: bool
    command: Literal["pause", "resume", "reload", "restore"]


class Health(BaseModel):
    """Liveness, and whether a daemon is attached."""

    status: Literal["ok"]
    model: str
    live: bool
    windows: int | None = None
