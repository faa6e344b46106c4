"""Service disciplines for the web server's resources: FIFO, SRPT, FCF queues and processor sharing."""

from __future__ import annotations

import heapq
from bisect import insort
from collections import deque
from collections.abc import Callable
from typing import Any, Protocol

from procsift.simulate.engine import Calendar


class Item(Protocol):
    """What a queue needs to know about a request."""

    remaining: int
    rate: float
    seq: int


class FifoQueue:
    """First come, first served, by the request's arrival at the server.

    The FCF paper's FIFO (its description of Apache): "the choice of the process that may use a
    resource (processor, disk, network interface) is made by the order of arrival of the
    request". A request that comes back for its next 16 KB block keeps its place, ahead of
    every request that arrived after it; ordering by arrival at the queue instead would make
    the disk a round robin over blocks.
    """

    def __init__(self) -> None:
        self._h: list[tuple[int, Any]] = []

    def push(self, item: Any) -> None:
        """Add an item (ordered by its request's arrival, `seq`)."""
        heapq.heappush(self._h, (item.seq, item))

    def pop(self) -> Any:
        """Remove and return the earliest-arrived request's item."""
        return heapq.heappop(self._h)[1]

    def __len__(self) -> int:
        return len(self._h)


class SrptQueue:
    """Fewest bytes left first."""

    def __init__(self) -> None:
        self._h: list[tuple[int, int, Any]] = []

    def push(self, item: Any) -> None:
        """Add an item."""
        heapq.heappush(self._h, (item.remaining, item.seq, item))

    def pop(self) -> Any:
        """Remove and return the next item."""
        return heapq.heappop(self._h)[2]

    def __len__(self) -> int:
        return len(self._h)


class FcfQueue:
    """Fastest Connection First: among items with at most beta x the fewest bytes left, the fastest.

    The paper's two searches: find the smallest remaining size m, then, among requests with
    remaining <= beta * m, take the one with the highest estimated transfer rate.
    """

    def __init__(self, beta: float) -> None:
        self.beta = beta
        self._s: list[tuple[int, int, Any]] = []

    def push(self, item: Any) -> None:
        """Add an item."""
        insort(self._s, (item.remaining, item.seq, item))

    def pop(self) -> Any:
        """Remove and return the next item."""
        s = self._s
        bound = s[0][0] * self.beta
        best, best_rate = 0, s[0][2].rate
        i, n = 1, len(s)
        while i < n and s[i][0] <= bound:
            if s[i][2].rate > best_rate:
                best, best_rate = i, s[i][2].rate
            i += 1
        return s.pop(best)[2]

    def __len__(self) -> int:
        return len(self._s)


class Server:
    """One resource serving one item at a time from a queue; `cost(item)` is its service time."""

    def __init__(self, cal: Calendar, queue: FifoQueue | SrptQueue | FcfQueue,
                 cost: Callable[[Any], float], done: Callable[[Any], None]) -> None:
        self.cal, self.queue, self.cost, self.done = cal, queue, cost, done
        self.busy = False
        self.busy_time = 0.0

    def arrive(self, item: Any) -> None:
        """An item joins; served at once if the resource is idle."""
        if self.busy:
            self.queue.push(item)
        else:
            self._start(item)

    def _start(self, item: Any) -> None:
        self.busy = True
        d = self.cost(item)
        self.busy_time += d
        self.cal.after(d, self._finish, item)

    def _finish(self, item: Any) -> None:
        if self.queue:
            self._start(self.queue.pop())
        else:
            self.busy = False
        self.done(item)


class SharingServer:
    """Processor sharing: every present item progresses at 1/n of the rate (virtual-time tags)."""

    def __init__(self, cal: Calendar, cost: Callable[[Any], float],
                 done: Callable[[Any], None]) -> None:
        self.cal, self.cost, self.done = cal, cost, done
        self._h: list[tuple[float, int, Any]] = []
        self._v = 0.0
        self._last = 0.0
        self._token = 0
        self.busy_time = 0.0

    def __len__(self) -> int:
        return len(self._h)

    def _advance(self) -> None:
        now = self.cal.now
        if self._h:
            self._v += (now - self._last) / len(self._h)
            self.busy_time += now - self._last
        self._last = now

    def _reschedule(self) -> None:
        if self._token:
            self.cal.cancel(self._token)
            self._token = 0
        if self._h:
            left = max(self._h[0][0] - self._v, 0.0) * len(self._h)
            self._token = self.cal.after(left, self._finish)

    def arrive(self, item: Any) -> None:
        """An item joins and shares the resource."""
        self._advance()
        heapq.heappush(self._h, (self._v + self.cost(item), item.seq, item))
        self._reschedule()

    def _finish(self, _: Any) -> None:
        self._token = 0
        self._advance()
        tag, _, item = heapq.heappop(self._h)
        self._v = max(self._v, tag)
        self._reschedule()
        self.done(item)
