"""One- and two-level time slicing as the deadline paper models them (multiprogramming ring)."""

from __future__ import annotations

from collections import deque

from procsift.simulate._machine import DORMANT, Job, Machine, MachineSpec
from procsift.simulate.errors import SimulationError
from procsift.simulate.transactions import Transaction


class TimeSlicing(Machine):
    """Dormant transactions are promoted into the ring when their working set plus a reserve fits.

    A ring member is demoted (its pages freed) when it has used `time_slice` seconds of CPU
    since promotion or asks for more pages than are free. CPUs go round-robin among ready ring
    members. One level: the longest-dormant transaction is promoted first. Two levels: the
    longest-dormant one that has not yet completed a slice, else the longest-dormant other.
    """

    def __init__(self, spec: MachineSpec, load: list[Transaction], *, time_slice: float,
                 levels: int = 1, reserve: int = 10, period: float = 100.0) -> None:
        if time_slice <= 0:
            raise SimulationError(f"time slice must be positive, got {time_slice}")
        if levels not in (1, 2):
            raise SimulationError(f"time slicing has 1 or 2 levels, got {levels}")
        if reserve < 0 or reserve >= spec.pages:
            raise SimulationError(f"page reserve must be in [0, {spec.pages}), got {reserve}")
        super().__init__(spec, load, period)
        self.time_slice = time_slice
        self.levels = levels
        self.reserve = reserve
        self.fresh: deque[Job] = deque()  # dormant, never completed a slice (two-level)
        self.used: deque[Job] = deque()   # dormant otherwise (all dormant jobs when one-level)
        self.ready: deque[Job] = deque()

    def _make_dormant(self, job: Job) -> None:
        job.state = DORMANT
        job.dormant_since = self.cal.now
        if job.alloc:
            self._take_pages(job, job.alloc)
        job.fetch_version += 1
        if self.levels == 2 and job.slices == 0:
            self.fresh.append(job)
        else:
            self.used.append(job)

    def _promote(self) -> None:
        while True:
            queue = self.fresh if self.fresh else self.used
            if not queue or self.free < queue[0].ws + self.reserve:
                return
            job = queue.popleft()
            job.sliced = 0.0
            self._give_pages(job, job.ws)

    def _dispatch(self) -> None:
        while self.idle > 0 and self.ready:
            self._start(self.ready.popleft())

    def _on_arrival(self, job: Job) -> None:
        self._make_dormant(job)
        self._promote()

    def _on_ready(self, job: Job) -> None:
        self.ready.append(job)
        self._dispatch()

    def _on_grow(self, job: Job, count: int) -> None:
        if self.free >= count:
            self._give_pages(job, count)
        else:  # page shortage: demoted without completing its slice
            self._make_dormant(job)
            self._promote()

    def _on_slice_end(self, job: Job) -> None:
        job.slices += 1
        self._make_dormant(job)
        self._promote()

    def _on_pages_freed(self) -> None:
        self._promote()

    def _on_cpu_freed(self) -> None:
        self._dispatch()
