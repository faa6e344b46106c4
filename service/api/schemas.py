"""Request and response bodies (pydantic), kept apart from the internal Window dataclass."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, field_validator

from procsift.collector.syscalls import SYSCALL_NAMES

__all__ = ["WindowIn", "PredictRequest", "PredictResponse", "WindowPrediction", "ProcessPrediction",
           "ModelInfo", "CommandResult", "Health"]

_KNOWN = frozenset(SYSCALL_NAMES)


def _number(v: Any) -> Any:
    """JSON numbers only: pydantic's lax mode would also take true/false and "12"."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise ValueError("must be a number")
    return v


Int = Annotated[int, BeforeValidator(_number)]
Float = Annotated[float, BeforeValidator(_number)]
SyscallName = Literal.__getitem__(SYSCALL_NAMES)  # the enum of names in the OpenAPI schema
_COUNT = Field(0, ge=0, le=2**53)         # nanoseconds, counts, bytes: exact in a float64


class WindowIn(BaseModel):
    """One process's window (the DESIGN.md Window row); syscall counts by x86_64 name."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    host: str = Field("", max_length=255)
    t_start: Float = Field(0.0, ge=0, description="window start, unix seconds")
    dur_s: Float = Field(1.0, gt=0, le=3600, description="window length, seconds")
    pid: Int = Field(ge=0, le=2**22)
    start_time: Int = Field(ge=0, le=2**53, description="field 22 of /proc/PID/stat")
    ppid: Int = Field(0, ge=0, le=2**22)
    comm: str = Field("", max_length=64)
    exe: str = Field("", max_length=4096)
    uid: Int = Field(-1, ge=-1, le=2**32)
    nthreads: Int = Field(1, ge=0, le=2**22)
    cgroup: str = Field("", max_length=4096)
    run_ns: Int = _COUNT
    runq_ns: Int = _COUNT
    sleep_ns: Int = _COUNT
    block_ns: Int = _COUNT
    switches_in: Int = _COUNT
    voluntary: Int = _COUNT
    involuntary: Int = _COUNT
    max_wait_ns: Int = _COUNT
    run_wait_transitions: Int = _COUNT
    wakeups: Int = _COUNT
    wakes_others: Int = _COUNT
    read_bytes: Int = _COUNT
    write_bytes: Int = _COUNT
    rchar: Int = _COUNT
    wchar: Int = _COUNT
    rss_bytes: Int = _COUNT
    net_tx: Int = _COUNT
    net_tx_bytes: Int = _COUNT
    net_rx: Int = _COUNT
    net_rx_bytes: Int = _COUNT
    unix_calls: Int = _COUNT
    syscall_counts: dict[SyscallName, Annotated[int, Field(ge=0, le=2**53), BeforeValidator(_number)]] = Field(  # type: ignore[valid-type]
        default_factory=dict, description="count per x86_64 syscall name, e.g. {\"epoll_wait\": 40}")

    @field_validator("syscall_counts", mode="before")
    @classmethod
    def _known_names(cls, v: Any) -> Any:
        if isinstance(v, dict):
            bad = sorted(str(n) for n in v if n not in _KNOWN)
            if bad:
                raise ValueError(f"unknown syscall name(s) {', '.join(bad[:5])}; "
                                 "use x86_64 names such as read, epoll_wait")
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
