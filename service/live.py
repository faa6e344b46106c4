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

__all__ = ["COMMANDS", "Command", "LiveLink", "Metrics", "CommandTimeout"]

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


class Metrics:
    """Thread-safe counters and gauges, rendered in the Prometheus text format."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._values = dict.fromkeys(METRICS, 0.0)

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
