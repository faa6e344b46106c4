"""The deadline paper's machine: CPUs, a page pool, page fetches and transaction execution.

Strategies subclass `Machine` and decide who gets pages and CPUs; this module owns the
mechanics every strategy shares (running a transaction to its next working-set change,
slice end or termination; fetching pages; the statistics the paper reports).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from procsift.simulate.engine import Calendar
from procsift.simulate.errors import SimulationError
from procsift.simulate.transactions import Transaction

WAITING, FETCHING, READY, RUNNING, DORMANT, DONE = range(6)
_FINISH, _CHANGE, _SLICE = range(3)
FETCH_MODES = ("serial", "parallel", "drum", "drum-fifo")


@dataclass(frozen=True)
class MachineSpec:
    """The simulated hardware: the paper's 2 CPUs, 100 user pages, 20 ms page fetch.

    `fetch` is how pages given together arrive (the paper does not say): "serial", one after
    another (k pages delay the transaction k x fetch_time), "parallel", all of them
    fetch_time later (no queue at the paging device at all), or from a paging drum: the first
    page after fetch_time, each further one a drum transfer later. "drum" chains the k pages
    into one sector-ordered request (a further page costs one revolution over the pages a
    revolution passes); "drum-fifo" issues one request per page, each waiting half a
    revolution on average before its transfer. The drum is IBM's 2301 (17.5 ms a revolution,
    4.5 4-KB pages a revolution), the IBM 360/67's paging drum.
    """

    cpus: int = 2
    pages: int = 100
    fetch_time: float = 0.020
    fetch: str = "serial"
    drum_revolution: float = 0.0175
    drum_pages: float = 4.5

    def check(self) -> None:
        """Raise SimulationError for an impossible machine."""
        if self.cpus < 1 or self.pages < 1 or min(self.fetch_time, self.drum_revolution) < 0 \
                or self.drum_pages <= 0:
            raise SimulationError(f"bad machine {self}: need cpus >= 1, pages >= 1, fetch >= 0")
        if self.fetch not in FETCH_MODES:
            raise SimulationError(f"unknown fetch mode {self.fetch!r}; choose {', '.join(FETCH_MODES)}")

    @property
    def page_transfer(self) -> float:
        """Drum time per page after the first: chained, or one request per page (drum-fifo)."""
        per_page = self.drum_revolution / self.drum_pages
        return per_page + self.drum_revolution / 2 if self.fetch == "drum-fifo" else per_page

    def batch_time(self, count: int) -> float:
        """Seconds until the last of `count` pages given together has arrived."""
        if self.fetch == "serial":
            return count * self.fetch_time
        if self.fetch == "parallel":
            return self.fetch_time
        return self.fetch_time + (count - 1) * self.page_transfer


class Job:
    """A transaction's run-time state."""

    __slots__ = ("tr", "ws", "seg", "used", "alloc", "state", "run_start", "stop_kind",
                 "token", "fetch_until", "fetch_version", "urgency", "slices", "sliced",
                 "dormant_since", "deadline_at", "finished")

    def __init__(self, tr: Transaction) -> None:
        self.tr = tr
        self.ws = tr.ws[0]
        self.seg = 0
        self.used = 0.0
        self.alloc = 0
        self.state = WAITING
        self.run_start = 0.0
        self.stop_kind = _FINISH
        self.token = 0
        self.fetch_until = 0.0
        self.fetch_version = 0
        self.urgency = 1
        self.slices = 0
        self.sliced = 0.0
        self.dormant_since = tr.arrival
        self.deadline_at = tr.arrival + tr.deadline
        self.finished = math.nan


class Machine:
    """Shared mechanics; a strategy overrides the `_on_*` hooks and `_next_ready`."""

    time_slice = math.inf

    def __init__(self, spec: MachineSpec, load: list[Transaction], period: float = 100.0) -> None:
        spec.check()
        self.spec = spec
        self.cal = Calendar()
        self.jobs = [Job(tr) for tr in load]
        self.free = spec.pages
        self.idle = spec.cpus
        self.page_fetches = 0
        self.dispatches = 0
        self.in_system = 0
        self.period = period
        self._area = 0.0
        self._last = 0.0
        self.period_means: list[float] = []
        for job in self.jobs:
            self.cal.schedule(job.tr.arrival, self._arrive, job)

    # -- the run ----------------------------------------------------------------------
    def run(self, horizon: float, give_up: int = 0) -> bool:
        """Simulate up to `horizon` s; False if stopped early with more than `give_up` jobs queued."""
        boundary = self.period
        while boundary <= horizon + 1e-9:
            self.cal.run(until=boundary)
            self._account(boundary)
            self.period_means.append(self._area / self.period)
            self._area = 0.0
            boundary += self.period
            if give_up and self.in_system > give_up:
                return False
        if boundary - self.period < horizon:
            self.cal.run(until=horizon)
            self._account(horizon)
        return True

    def _account(self, now: float) -> None:
        self._area += self.in_system * (now - self._last)
        self._last = now

    def _arrive(self, job: Job) -> None:
        self._account(self.cal.now)
        self.in_system += 1
        self._on_arrival(job)

    # -- pages ------------------------------------------------------------------------
    def _give_pages(self, job: Job, count: int) -> None:
        """Allocate `count` pages to `job` and start fetching them (see MachineSpec.fetch)."""
        if count <= 0:
            return
        self.free -= count
        job.alloc += count
        self.page_fetches += count
        now = self.cal.now
        job.fetch_until = max(now, job.fetch_until) + self.spec.batch_time(count)
        job.fetch_version += 1
        if job.state != RUNNING:
            job.state = FETCHING if job.alloc >= job.ws else WAITING
        self.cal.schedule(job.fetch_until, self._fetched, (job, job.fetch_version))

    def _take_pages(self, job: Job, count: int) -> None:
        """Release `count` of `job`'s pages to the free pool."""
        job.alloc -= count
        self.free += count

    def _fetched(self, arg: tuple[Job, int]) -> None:
        job, version = arg
        if version != job.fetch_version or job.state not in (FETCHING, WAITING):
            return
        if job.alloc >= job.ws:
            job.state = READY
            self._on_ready(job)

    # -- CPUs -------------------------------------------------------------------------
    def _start(self, job: Job) -> None:
        """Give a CPU to a READY job and schedule its next stop."""
        self.idle -= 1
        self.dispatches += 1
        self._continue(job)

    def _continue(self, job: Job) -> None:
        job.state = RUNNING
        job.run_start = self.cal.now
        tr = job.tr
        left = tr.cpu - job.used
        kind = _FINISH
        if job.seg < len(tr.change_at) and tr.change_at[job.seg] - job.used < left:
            left = tr.change_at[job.seg] - job.used
            kind = _CHANGE
        if self.time_slice - job.sliced < left:
            left = self.time_slice - job.sliced
            kind = _SLICE
        job.stop_kind = kind
        job.token = self.cal.after(max(left, 0.0), self._stop, job)

    def _preempt(self, job: Job) -> None:
        """Take the CPU away from a running job before its next stop."""
        self.cal.cancel(job.token)
        ran = self.cal.now - job.run_start
        job.used += ran
        job.sliced += ran
        job.state = READY if job.alloc >= job.ws else WAITING
        self.idle += 1

    def _stop(self, job: Job) -> None:
        ran = self.cal.now - job.run_start
        tr = job.tr
        job.sliced += ran
        if job.stop_kind == _FINISH:
            job.used = tr.cpu
            self._release_cpu(job, DONE)
            self._finish(job)
        elif job.stop_kind == _CHANGE:
            job.used = tr.change_at[job.seg]
            job.seg += 1
            new_ws = tr.ws[job.seg]
            grow = new_ws - job.ws
            job.ws = new_ws
            if grow <= 0:
                if job.alloc > new_ws:
                    self._take_pages(job, job.alloc - new_ws)
                    self._continue(job)
                    self._on_pages_freed()
                else:
                    self._continue(job)
            else:
                self._release_cpu(job, WAITING)
                self._on_grow(job, grow)
                self._on_cpu_freed()
        else:
            job.used += ran
            job.sliced = self.time_slice
            self._release_cpu(job, READY)
            self._on_slice_end(job)
            self._on_cpu_freed()

    def _release_cpu(self, job: Job, state: int) -> None:
        job.state = state
        self.idle += 1

    def _finish(self, job: Job) -> None:
        self._account(self.cal.now)
        self.in_system -= 1
        job.finished = self.cal.now
        job.fetch_version += 1
        self._take_pages(job, job.alloc)
        self._on_finish(job)
        self._on_pages_freed()
        self._on_cpu_freed()

    # -- results ----------------------------------------------------------------------
    def response_ratios(self, category: str, since: float = 0.0) -> list[float]:
        """Turnaround / deadline of every finished job of `category` that arrived after `since`."""
        return [(j.finished - j.tr.arrival) / j.tr.deadline for j in self.jobs
                if j.tr.category == category and j.tr.arrival >= since and j.state == DONE]

    # -- strategy hooks ---------------------------------------------------------------
    def _on_arrival(self, job: Job) -> None:
        raise NotImplementedError

    def _on_ready(self, job: Job) -> None:
        raise NotImplementedError

    def _on_grow(self, job: Job, count: int) -> None:
        raise NotImplementedError

    def _on_slice_end(self, job: Job) -> None:
        raise NotImplementedError

    def _on_finish(self, job: Job) -> None:
        """A job terminated (its pages are already free)."""

    def _on_pages_freed(self) -> None:
        raise NotImplementedError

    def _on_cpu_freed(self) -> None:
        raise NotImplementedError
