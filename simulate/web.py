"""The FCF paper's web server: a process pool, CPU (processor sharing), disk and network queues."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from procsift.simulate.engine import Calendar
from procsift.simulate.errors import SimulationError
from procsift.simulate.internet import Pipe, transfer_time
from procsift.simulate.web_load import BANDWIDTHS, WorkloadSpec, file_sizes, users
from procsift.simulate.web_queues import FcfQueue, FifoQueue, Server, SharingServer, SrptQueue

POLICIES = ("fifo", "ps", "srpt", "fcf")
BLOCK = 16 * 1024


@dataclass(frozen=True)
class ServerSpec:
    """Costs of the simulated server (seconds); the paper gives the structure, not these numbers."""

    pool: int = 256                 # processes (Apache's compiled-in MaxClients limit)
    cpu_base: float = 0.0008        # parse request, open, log
    cpu_per_kb: float = 0.00002     # packetising, copies
    disk_block_base: float = 0.0005  # positioning per 16 KB block (mostly file-cache hits)
    disk_rate: float = 20e6          # bytes/s
    nic_rate: float = 6.25e6         # bytes/s onto the outgoing link (50 Mbit/s), the bottleneck:
    #                                  99 % busy at 1000 users (docs/simulation.md, calibration)
    sockbuf_blocks: int = 0         # socket send buffer in 16 KB blocks; 0: unlimited (the paper)
    beta: float = 5.0

    def check(self) -> None:
        """Raise SimulationError for impossible costs."""
        if self.pool < 1 or min(self.disk_rate, self.nic_rate) <= 0 or self.beta < 1 \
                or self.sockbuf_blocks < 0:
            raise SimulationError(f"bad server parameters: {self}")


class Request:
    """One HTTP request's state."""

    __slots__ = ("user", "k", "size", "remaining", "rate", "seq", "arrival", "admitted",
                 "server_done", "pipe", "cost", "blk", "speed", "last_delivery", "in_flight")

    def __init__(self, user: int, k: int, size: int, seq: int, arrival: float, pipe: Pipe,
                 cost: float, speed: int) -> None:
        self.user, self.k, self.size, self.remaining, self.seq = user, k, size, size, seq
        self.arrival, self.pipe, self.cost, self.speed = arrival, pipe, cost, speed
        self.rate = size / cost if cost > 0 else float("inf")
        self.admitted = self.server_done = self.last_delivery = 0.0
        self.blk = 0
        self.in_flight: deque[float] = deque()


@dataclass
class WebResult:
    """Per-request figures after warm-up (arrays share one order) and run-level figures."""

    policy: str
    users: int
    requests: int
    size: np.ndarray
    server_time: np.ndarray   # arrival -> last byte in the interface buffer (the paper's response time)
    total_time: np.ndarray    # arrival -> last byte delivered to the client
    cost: np.ndarray          # Internet transfer cost on an idle connection
    speed: np.ndarray         # index into BANDWIDTHS
    pending_mean: float
    losses: int
    sim_time: float
    utilisation: dict[str, float] = field(default_factory=dict)

    @property
    def slowdown(self) -> np.ndarray:
        """Time in the server over the request's Internet cost (the paper's definition)."""
        return self.server_time / self.cost


class _Tally:
    """Counters one run mutates (a class, not a dict, so each has its own type)."""

    __slots__ = ("issued", "done", "active", "pending", "losses", "area", "last", "t0", "t_end")

    def __init__(self) -> None:
        self.issued = self.done = self.active = self.pending = self.losses = 0
        self.area = self.last = self.t0 = 0.0
        self.t_end = float("inf")


def _queue(policy: str, beta: float) -> FifoQueue | SrptQueue | FcfQueue:
    if policy == "fifo":
        return FifoQueue()
    if policy == "srpt":
        return SrptQueue()
    return FcfQueue(beta)


def simulate(policy: str, n_users: int, requests: int, *, seed: int = 1,
             server: ServerSpec = ServerSpec(), workload: WorkloadSpec = WorkloadSpec(),
             warmup: float = 0.05, progress: Callable[[int], None] | None = None,
             closed: bool = False) -> WebResult:
    """Serve `requests` requests from `n_users` SURGE-like users under `policy` for disk and network.

    Users issue each request one think time after the previous one (`closed=False`, every
    policy sees the same stream) or after the previous response has arrived (`closed=True`).
    """
    if policy not in POLICIES:
        raise SimulationError(f"unknown policy {policy!r}; choose from {', '.join(POLICIES)}")
    if n_users < 1:
        raise SimulationError(f"users must be at least 1, got {n_users}")
    if requests < 1:
        raise SimulationError(f"requests must be at least 1, got {requests}")
    server.check()
    workload.check()
    rng = np.random.default_rng(seed)
    sizes = file_sizes(workload, rng)
    # Each user's sequence is replayed from its start if the user outpaces it (fast users do).
    per_user = int(requests / n_users * 1.5) + 20
    pop = users(n_users, per_user, workload, rng)
    files, think, rtts, lost = pop.files, pop.think, pop.rtt, pop.lost
    user_bw = [BANDWIDTHS[s] for s in pop.speed.tolist()]
    user_speed = pop.speed.tolist()
    sizes_l = sizes.tolist()

    cal = Calendar()
    out_size = np.zeros(requests, np.int64)
    out_server = np.zeros(requests)
    out_total = np.zeros(requests)
    out_cost = np.zeros(requests)
    out_speed = np.zeros(requests, np.int64)
    state = _Tally()
    waiting: deque[Request] = deque()
    cpu_base, cpu_kb = server.cpu_base, server.cpu_per_kb / 1024.0
    d_base, d_rate, n_rate = server.disk_block_base, server.disk_rate, server.nic_rate
    skip = int(requests * warmup)
    sock_blocks = server.sockbuf_blocks

    def issue(u: int) -> None:
        if state.issued >= requests:
            return
        if state.issued + 1 == requests:
            state.t_end = cal.now
        k = next_k[u]
        next_k[u] = (k + 1) % per_user
        seq = state.issued
        state.issued = seq + 1
        size = sizes_l[files.item(u, k)]
        rtt = rtts.item(u, k)
        loss = lost.item(u, k)
        if loss:
            state.losses += 1
        cost = transfer_time(size, rtt, user_bw[u])
        req = Request(u, k, size, seq, cal.now, Pipe(rtt, user_bw[u], loss), cost, user_speed[u])
        if not closed:
            cal.after(think.item(u, next_k[u]), issue, u)
        if state.active < server.pool:
            admit(req)
        else:
            waiting.append(req)

    def admit(req: Request) -> None:
        state.active += 1
        req.admitted = cal.now
        cpu.arrive(req)

    def to_disk(req: Request) -> None:
        req.blk = BLOCK if req.remaining > BLOCK else req.remaining
        disk.arrive(req)

    def disk_done(req: Request) -> None:
        net.arrive(req)

    def net_done(req: Request) -> None:
        now = cal.now
        req.remaining -= req.blk
        req.last_delivery = req.pipe.send(now, req.blk)
        if req.remaining > 0:
            # The socket buffer holds `sockbuf_blocks` blocks: the process blocks in write()
            # until the connection has delivered the oldest of them.
            flight = req.in_flight
            flight.append(req.last_delivery)
            if len(flight) >= sock_blocks > 0:
                free_at = flight.popleft()
                if free_at > now:
                    cal.schedule(free_at, to_disk, req)
                    return
            to_disk(req)
            return
        req.server_done = now
        _pending(+1)
        # The process is free once the last byte is in the interface buffer; the kernel
        # finishes the transfer (the request is then "pending", as the paper counts it).
        state.active -= 1
        if waiting:
            admit(waiting.popleft())
        cal.schedule(req.last_delivery, delivered, req)

    def _pending(delta: int) -> None:
        now = min(cal.now, state.t_end)
        if now > state.t0:
            state.area += state.pending * (now - max(state.last, state.t0))
        state.last = now
        state.pending += delta

    def delivered(req: Request) -> None:
        _pending(-1)
        i = state.done
        state.done = i + 1
        if i == skip:
            state.t0 = cal.now
        out_size[i] = req.size
        out_server[i] = req.server_done - req.arrival
        out_total[i] = cal.now - req.arrival
        out_cost[i] = req.cost
        out_speed[i] = req.speed
        if progress is not None and (i + 1) % 10_000 == 0:
            progress(10_000)
        if i + 1 == requests:
            cal.halt()
        if closed:
            cal.after(think.item(req.user, next_k[req.user]), issue, req.user)

    cpu = SharingServer(cal, lambda r: cpu_base + r.size * cpu_kb, to_disk)
    if policy == "ps":
        disk: Server | SharingServer = SharingServer(cal, lambda r: d_base + r.blk / d_rate, disk_done)
        net: Server | SharingServer = SharingServer(cal, lambda r: r.blk / n_rate, net_done)
    else:
        disk = Server(cal, _queue(policy, server.beta), lambda r: d_base + r.blk / d_rate, disk_done)
        net = Server(cal, _queue(policy, server.beta), lambda r: r.blk / n_rate, net_done)
    next_k = [0] * n_users
    for u in range(n_users):
        cal.schedule(think.item(u, 0), issue, u)
    cal.run()
    done = state.done
    end = min(cal.now, state.t_end)
    span = end - state.t0
    keep = slice(skip, done)
    return WebResult(
        policy=policy, users=n_users, requests=done - skip,
        size=out_size[keep], server_time=out_server[keep], total_time=out_total[keep],
        cost=out_cost[keep], speed=out_speed[keep],
        pending_mean=state.area / span if span > 0 else 0.0,
        losses=state.losses, sim_time=end,
        utilisation={"cpu": cpu.busy_time / end, "disk": disk.busy_time / end,
                     "net": net.busy_time / end} if end > 0 else {})
