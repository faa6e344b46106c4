"""Per-group figures of each window: the dashboard's ring buffer of the last minutes, and the
per-label Prometheus series. Pure: the daemon hands in what it measured, nothing here reads
the system."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from procsift.service.live import Metrics

__all__ = ["Sample", "GroupHistory", "UNLABELLED", "export"]

UNLABELLED = "unlabelled"
Key = tuple[int, int]


@dataclass(frozen=True)
class Sample:
    """One process's window, with the label it holds after the window (None: no verdict yet)."""

    key: Key
    label: str | None
    run_ns: int
    runq_ns: int
    switches_in: int


@dataclass
class _Timeline:
    comm: str
    first_t: float
    last_t: float
    changes: deque[tuple[float, str | None]] = field(default_factory=deque)


class GroupHistory:
    """The last `span_s` seconds, one point per window, and each process's label changes in it."""

    def __init__(self, span_s: float = 600.0) -> None:
        self.span_s = span_s
        self._points: deque[dict[str, Any]] = deque()
        self._timelines: dict[Key, _Timeline] = {}

    def record(self, t: float, dur_s: float, samples: Iterable[Sample], tracked: Mapping[Key, tuple[str, str | None]],
               changes: int, psi_cpu: float | None, psi_io: float | None) -> dict[str, Any]:
        """Add the window that ended at `t`; `tracked` is every tracked process's (comm, label)."""
        counts: dict[str, int] = {}
        for _comm, label in tracked.values():
            counts[label or UNLABELLED] = counts.get(label or UNLABELLED, 0) + 1
        run: dict[str, float] = {}
        runq: dict[str, float] = {}
        active: dict[str, int] = {}
        for s in samples:
            g = s.label or UNLABELLED
            run[g] = run.get(g, 0.0) + s.run_ns
            runq[g] = runq.get(g, 0.0) + s.runq_ns
            active[g] = active.get(g, 0) + 1
        span = max(dur_s, 1e-9) * 1e9
        point = {"t": round(t, 3), "processes": counts,
                 "cpu_share": {g: round(v / span, 4) for g, v in run.items()},
                 "runq_ms": {g: round(runq[g] / active[g] / 1e6, 3) for g in runq},
                 "psi_cpu": psi_cpu, "psi_io": psi_io, "changes": int(changes)}
        self._points.append(point)
        cutoff = t - self.span_s
        while self._points and self._points[0]["t"] < cutoff:
            self._points.popleft()
        self._timeline(t, tracked, cutoff)
        return point

    def _timeline(self, t: float, tracked: Mapping[Key, tuple[str, str | None]], cutoff: float) -> None:
        for key, (comm, label) in tracked.items():
            tl = self._timelines.get(key)
            if tl is None:
                tl = self._timelines[key] = _Timeline(comm=comm, first_t=t, last_t=t)
                tl.changes.append((t, label))
            elif tl.changes[-1][1] != label:
                tl.changes.append((t, label))
            tl.last_t = t
        for key in [k for k, tl in self._timelines.items() if tl.last_t < cutoff]:
            del self._timelines[key]
        for tl in self._timelines.values():
            # keep the change in force at the cutoff, moved up to it
            while len(tl.changes) > 1 and tl.changes[1][0] <= cutoff:
                tl.changes.popleft()
            if tl.changes[0][0] < cutoff:
                tl.changes[0] = (cutoff, tl.changes[0][1])
            tl.first_t = max(tl.first_t, cutoff)

    def snapshot(self, window_s: float) -> dict[str, Any]:
        """Plain data for /v1/history (a copy: the loop goes on changing the buffer)."""
        return {"window_s": window_s, "span_s": self.span_s, "points": list(self._points),
                "timelines": [{"pid": k[0], "start_time": k[1], "comm": tl.comm, "first_t": tl.first_t,
                               "last_t": tl.last_t, "changes": list(tl.changes)}
                              for k, tl in self._timelines.items()]}


def export(metrics: Metrics, point: Mapping[str, Any], samples: Iterable[Sample], labels: Iterable[str]) -> None:
    """The window's per-label figures as Prometheus series (every label present, zeros included)."""
    groups = [*labels, UNLABELLED]
    for g in groups:
        metrics.set_labelled("procsift_group_processes", g, point["processes"].get(g, 0))
        metrics.add_labelled("procsift_group_cpu_seconds_total", g, 0.0)
        metrics.add_labelled("procsift_group_runq_seconds_total", g, 0.0)
        metrics.observe("procsift_group_runq_delay_seconds", g, None)
    for s in samples:
        g = s.label or UNLABELLED
        metrics.add_labelled("procsift_group_cpu_seconds_total", g, s.run_ns / 1e9)
        metrics.add_labelled("procsift_group_runq_seconds_total", g, s.runq_ns / 1e9)
        if s.switches_in > 0:  # the mean wait for a CPU per dispatch, in this window
            metrics.observe("procsift_group_runq_delay_seconds", g, s.runq_ns / s.switches_in / 1e9)
