"""What the daemon loop shares with the API threads: a published snapshot, counters, a command queue.

The daemon loop stays the only owner of its state (STYLE.md, "one loop owns the state"): each
window it publishes an immutable snapshot here and drains the commands the API queued, answering
each through its future. API threads only read snapshots and counters and queue commands.
"""

from __future__ import annotations

import queue
import threading
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from typing import Any

__all__ = ["COMMANDS", "Command", "LiveLink", "Metrics", "CommandTimeout", "METRICS", "LABELLED", "RUNQ_BUCKETS"]

COMMANDS = ("pause", "resume", "reload", "restore")


class CommandTimeout(Exception):
    """The daemon did not take a command in time (it acts between windows)."""


@dataclass(frozen=True)
class Command:
    """One control request waiting for the daemon loop."""

    name: str
    future: Future[dict[str, Any]]


# name -> (Prometheus type, help). Counters only grow; gauges are set.
METRICS: dict[str, tuple[str, str]] = {
    "procsift_windows_collected_total": ("counter", "Windows the collector closed"),
    "procsift_rows_collected_total": ("counter", "Window rows (process x window) collected"),
    "procsift_predictions_total": ("counter", "Windows labelled by the model"),
    "procsift_changes_applied_total": ("counter", "Values written to processes (nice, affinity, ...)"),
    "procsift_restores_total": ("counter", "Processes put back to their original values"),
    "procsift_backoffs_total": ("counter", "Processes left alone after someone else changed a value"),
    "procsift_collector_drops_total": ("counter", "Events the BPF maps had no room for"),
    "procsift_loop_seconds_total": ("counter", "Time spent labelling, planning and applying"),
    "procsift_loop_seconds_last": ("gauge", "Time the last window's loop took"),
    "procsift_processes": ("gauge", "Processes the daemon tracks"),
    "procsift_paused": ("gauge", "1 while changes are paused"),
}


# Series per group (label="interactive" | "html-serving" | "background" | "unlabelled"), fed each
# window by service/groupstats.py: name -> (Prometheus type, help).
LABELLED: dict[str, tuple[str, str]] = {
    "procsift_group_processes": ("gauge", "Tracked processes per smoothed label"),
    "procsift_group_cpu_seconds_total": ("counter", "CPU time of the processes of each label (rate(): CPUs used)"),
    "procsift_group_runq_seconds_total": ("counter",
                                          "Time the processes of each label waited runnable for a CPU"),
    "procsift_group_runq_delay_seconds": ("histogram",
                                          "Per process and window: mean wait for a CPU per dispatch, by label"),
}
RUNQ_BUCKETS = (1e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 1e-2, 2.5e-2, 5e-2, 1e-1, 2.5e-1, 1.0)
"""Upper bounds (seconds) of the run-queue delay histogram; +Inf is added."""


class Metrics:
    """Thread-safe counters and gauges, rendered in the Prometheus text format."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._values = dict.fromkeys(METRICS, 0.0)
        self._labelled: dict[str, dict[str, float]] = {n: {} for n, (k, _) in LABELLED.items() if k != "histogram"}
        self._hist: dict[str, dict[str, list[float]]] = {n: {} for n, (k, _) in LABELLED.items() if k == "histogram"}

    def set_labelled(self, name: str, label: str, value: float) -> None:
        """Set one group's gauge."""
        with self._lock:
            self._labelled[name][label] = float(value)

    def add_labelled(self, name: str, label: str, value: float) -> None:
        """Add to one group's counter (creating it at 0)."""
        with self._lock:
            series = self._labelled[name]
            series[label] = series.get(label, 0.0) + value

    def observe(self, name: str, label: str, value: float | None) -> None:
        """Count one observation in a group's histogram (None: only make sure the series exists)."""
        with self._lock:
            h = self._hist[name].setdefault(label, [0.0] * (len(RUNQ_BUCKETS) + 3))  # buckets, +Inf, sum, count
            if value is None:
                return
            for i, bound in enumerate(RUNQ_BUCKETS):
                if value <= bound:
                    h[i] += 1
            h[len(RUNQ_BUCKETS)] += 1
            h[-2] += value
            h[-1] += 1

    def add(self, name: str, value: float = 1.0) -> None:
        """Add to a counter."""
        with self._lock:
            self._values[name] += value

    def set(self, name: str, value: float) -> None:
        """Set a gauge (or a counter that mirrors a cumulative figure)."""
        with self._lock:
            self._values[name] = float(value)

    def values(self) -> dict[str, float]:
        """A copy of every value."""
        with self._lock:
            return dict(self._values)

    def render(self) -> str:
        """Prometheus text exposition format 0.0.4."""
        lines = []
        for name, value in self.values().items():
            kind, help_text = METRICS[name]
            lines += [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}", f"{name} {value:g}"]
        with self._lock:
            labelled = {n: dict(v) for n, v in self._labelled.items()}
            hist = {n: {g: list(h) for g, h in v.items()} for n, v in self._hist.items()}
        for name, (kind, help_text) in LABELLED.items():
            lines += [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}"]
            for group, value in sorted(labelled.get(name, {}).items()):
                lines.append(f'{name}{{label="{group}"}} {value:g}')
            for group, h in sorted(hist.get(name, {}).items()):
                bounds = [f"{b:g}" for b in RUNQ_BUCKETS] + ["+Inf"]
                lines += [f'{name}_bucket{{label="{group}",le="{b}"}} {c:g}' for b, c in zip(bounds, h)]
                lines += [f'{name}_sum{{label="{group}"}} {h[-2]:g}', f'{name}_count{{label="{group}"}} {h[-1]:g}']
        return "\n".join(lines) + "\n"


class LiveLink:
    """The daemon's side and the API's side of one running service."""

    def __init__(self) -> None:
        self.metrics = Metrics()
        self._snapshot: dict[str, Any] | None = None
        self._lock = threading.Lock()
        self._commands: queue.SimpleQueue[Command] = queue.SimpleQueue()

    # -- daemon loop ------------------------------------------------------------------
    def publish(self, snapshot: dict[str, Any]) -> None:
        """Replace the snapshot (the loop builds a new dict each window and never mutates it)."""
        with self._lock:
            self._snapshot = snapshot

    def take_commands(self) -> list[Command]:
        """Every command queued since the last call, oldest first."""
        out = []
        while True:
            try:
                out.append(self._commands.get_nowait())
            except queue.Empty:
                return out

    # -- API threads ------------------------------------------------------------------
    def snapshot(self) -> dict[str, Any] | None:
        """The last published snapshot, or None before the first window."""
        with self._lock:
            return self._snapshot

    def submit(self, name: str, timeout: float) -> dict[str, Any]:
        """Queue a command and wait for the daemon's answer; CommandTimeout if it does not come."""
        if name not in COMMANDS:
            raise ValueError(f"unknown command {name!r}; commands are {', '.join(COMMANDS)}")
        cmd = Command(name, Future())
        self._commands.put(cmd)
        try:
            return cmd.future.result(timeout=timeout)
        except FutureTimeout as err:
            cmd.future.cancel()
            raise CommandTimeout(f"the daemon did not take {name!r} within {timeout:g} s") from err
