"""A minimal discrete-event calendar: events ordered by time, ties broken by scheduling order."""

from __future__ import annotations

import heapq
from collections.abc import Callable
from typing import Any

from procsift.simulate.errors import SimulationError

Handler = Callable[[Any], None]


class Calendar:
    """Future events in chronological order; `run` pops them one by one (the papers' basic cycle).

    Two events at the same instant fire in the order they were scheduled, so a run is a pure
    function of its inputs and seed. Cancelling is by token: `schedule` returns an id, and
    `cancel(id)` makes the event a no-op when it comes up (lazy deletion keeps pushes O(log n)).
    """

    __slots__ = ("now", "_heap", "_seq", "_cancelled", "fired", "_halt")

    def __init__(self) -> None:
        self.now = 0.0
        self._heap: list[tuple[float, int, Handler, Any]] = []
        self._seq = 0
        self._cancelled: set[int] = set()
        self.fired = 0
        self._halt = False

    def schedule(self, time: float, handler: Handler, payload: Any = None) -> int:
        """Put `handler(payload)` on the calendar at absolute `time`; returns a cancel token."""
        if time < self.now:
            raise SimulationError(f"event scheduled in the past ({time} < now {self.now})")
        self._seq += 1
        heapq.heappush(self._heap, (time, self._seq, handler, payload))
        return self._seq

    def after(self, delay: float, handler: Handler, payload: Any = None) -> int:
        """Put `handler(payload)` on the calendar `delay` time units from now."""
        return self.schedule(self.now + delay, handler, payload)

    def cancel(self, token: int) -> None:
        """Make a scheduled event a no-op."""
        self._cancelled.add(token)

    def halt(self) -> None:
        """Make `run` return after the event being fired."""
        self._halt = True

    def __len__(self) -> int:
        return len(self._heap)

    def peek(self) -> float | None:
        """Time of the next event, or None if the calendar is empty."""
        return self._heap[0][0] if self._heap else None

    def run(self, until: float = float("inf"), stop: Callable[[], bool] | None = None) -> float:
        """Fire events in order until the calendar empties, `until` passes, or `stop()` is true."""
        heap = self._heap
        pop = heapq.heappop
        cancelled = self._cancelled
        while heap:
            if heap[0][0] > until:
                self.now = until
                break
            time, seq, handler, payload = pop(heap)
            if cancelled and seq in cancelled:
                cancelled.discard(seq)
                continue
            self.now = time
            self.fired += 1
            handler(payload)
            if self._halt or (stop is not None and stop()):
                self._halt = False
                break
        return self.now
