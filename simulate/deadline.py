"""Deadline scheduling as the deadline paper models it: urgency doubling, a stack, stealing."""

from __future__ import annotations

from procsift.simulate._machine import DONE, FETCHING, READY, RUNNING, WAITING, Job, Machine, MachineSpec
from procsift.simulate.errors import SimulationError
from procsift.simulate.transactions import Transaction


def _rank(job: Job) -> tuple[int, float, int]:
    """Stack order: most urgent first, then earliest deadline (then arrival order)."""
    return (-job.urgency, job.deadline_at, job.tr.ident)


class DeadlineScheduling(Machine):
    """Urgency starts at 1 and doubles each time half the time left to the deadline passes.

    Free pages go to the most urgent transaction short of its working set; free CPUs to the
    most urgent one holding its full working set. Partial allocations may be stolen by a more
    urgent transaction asking for pages; full ones only when some urgency reaches the
    ceiling, which makes the system reallocate everything from the top of the stack down.
    """

    def __init__(self, spec: MachineSpec, load: list[Transaction], *, ceiling: int = 8,
                 period: float = 100.0) -> None:
        if ceiling < 1 or ceiling & (ceiling - 1):
            raise SimulationError(f"urgency ceiling must be a power of two >= 1, got {ceiling}")
        super().__init__(spec, load, period)
        self.ceiling = ceiling
        self.live: list[Job] = []
        self.reconsiderations = 0

    def _stack(self) -> list[Job]:
        return sorted(self.live, key=_rank)

    # -- urgency ------------------------------------------------------------------------
    def _schedule_doublings(self, job: Job) -> None:
        start, span = job.tr.arrival, job.tr.deadline
        urgency, frac = 1, 0.5
        while urgency < self.ceiling:
            urgency *= 2
            self.cal.schedule(start + span * (1.0 - frac), self._double, job)
            frac /= 2

    def _double(self, job: Job) -> None:
        if job.state == DONE:
            return
        job.urgency = min(job.urgency * 2, self.ceiling)
        if job.urgency == self.ceiling:
            self._reconsider()

    # -- allocation ---------------------------------------------------------------------
    def _request(self, job: Job, count: int, *, full_too: bool = False) -> None:
        """Give `job` up to `count` pages: free ones, then stolen from the bottom of the stack.

        Only partial allocations of less urgent jobs are stolen, unless `full_too`.
        """
        take = min(self.free, count)
        self._give_pages(job, take)
        count -= take
        if count <= 0:
            return
        mine = _rank(job)
        for victim in reversed(self._stack()):
            if count <= 0 or _rank(victim) <= mine:
                break
            if victim.alloc == 0 or (victim.alloc >= victim.ws and not full_too):
                continue
            if victim.state == RUNNING:
                self._preempt(victim)
            got = min(victim.alloc, count)
            self._take_pages(victim, got)
            victim.fetch_version += 1
            victim.state = WAITING
            self._give_pages(job, got)
            count -= got

    def _spread_pages(self) -> None:
        """Spontaneously free pages go to the most urgent jobs short of their working set."""
        if self.free <= 0:
            return
        for job in self._stack():
            if self.free <= 0:
                break
            if job.alloc < job.ws and job.state != RUNNING:
                self._give_pages(job, min(self.free, job.ws - job.alloc))

    def _dispatch(self) -> None:
        """Free CPUs go to the most urgent jobs that hold and have fetched their working set."""
        if self.idle <= 0:
            return
        for job in self._stack():
            if self.idle <= 0:
                break
            if job.state == READY:
                self._start(job)

    def _reconsider(self) -> None:
        """Some urgency hit the ceiling: pages and CPUs to the top of the stack, stealing from the bottom."""
        self.reconsiderations += 1
        stack = self._stack()
        for job in stack:
            if job.alloc < job.ws and job.state != RUNNING:
                self._request(job, job.ws - job.alloc, full_too=True)
        top = [j for j in stack if j.state in (READY, RUNNING)][: self.spec.cpus]
        for job in stack:
            if job.state == RUNNING and job not in top and any(j.state == READY for j in top):
                self._preempt(job)
        self._dispatch()

    # -- hooks --------------------------------------------------------------------------
    def _on_arrival(self, job: Job) -> None:
        self.live.append(job)
        self._schedule_doublings(job)
        self._request(job, job.ws)

    def _on_ready(self, job: Job) -> None:
        self._dispatch()

    def _on_grow(self, job: Job, count: int) -> None:
        self._request(job, count)
        if job.alloc >= job.ws:
            job.state = FETCHING

    def _on_slice_end(self, job: Job) -> None:  # no time slices here
        raise SimulationError("deadline scheduling has no time slice")

    def _on_finish(self, job: Job) -> None:
        self.live.remove(job)

    def _on_pages_freed(self) -> None:
        self._spread_pages()

    def _on_cpu_freed(self) -> None:
        self._dispatch()
