"""The FCF paper's model: queue disciplines, the Internet pipe, one request end to end, policies."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from procsift.simulate import (
    ServerSpec,
    SimulationError,
    WorkloadSpec,
    simulate_web,
    summarise,
    transfer_time,
)
from procsift.simulate.engine import Calendar
from procsift.simulate.internet import MSS, Pipe
from procsift.simulate.web import BLOCK
from procsift.simulate.web_experiments import calibration_sweep, service_time
from procsift.simulate.web_queues import FcfQueue, FifoQueue, Server, SharingServer, SrptQueue


def item(seq: int, remaining: int, rate: float = 1.0) -> SimpleNamespace:
    return SimpleNamespace(seq=seq, remaining=remaining, rate=rate)


def drain(q: FifoQueue | SrptQueue | FcfQueue) -> list[int]:
    return [q.pop().seq for _ in range(len(q))]


def test_fifo_and_srpt_orders() -> None:
    items = [item(0, 50), item(1, 10), item(2, 30), item(3, 10)]
    fifo, srpt = FifoQueue(), SrptQueue()
    for it in items:
        fifo.push(it)
        srpt.push(it)
    assert drain(fifo) == [0, 1, 2, 3]
    assert drain(srpt) == [1, 3, 2, 0]


def test_fifo_is_by_the_requests_arrival_so_a_returning_request_keeps_its_place() -> None:
    """The paper's FIFO orders by the request's arrival: request 1 coming back for its next
    16 KB block goes ahead of requests 2 and 3, which arrived after it (not behind them, as a
    queue ordered by arrival at the disk would put it)."""
    fifo = FifoQueue()
    for seq in (2, 3):
        fifo.push(item(seq, 10))
    fifo.push(item(1, 40))  # back from the network with blocks left
    assert drain(fifo) == [1, 2, 3]


def test_fcf_takes_the_fastest_within_beta_times_the_smallest() -> None:
    q = FcfQueue(beta=5)
    for it in (item(0, 10, rate=1.0), item(1, 40, rate=9.0), item(2, 60, rate=99.0),
               item(3, 45, rate=3.0)):
        q.push(it)
    # bound 5 x 10 = 50: candidates 0, 1, 3 -> fastest is 1; then bound 50 again -> 3 (rate 3)
    assert q.pop().seq == 1
    assert q.pop().seq == 3
    # now the smallest is 10 -> bound 50 excludes the fast 60-byte one
    assert q.pop().seq == 0
    assert q.pop().seq == 2


def test_fcf_with_beta_one_is_srpt_on_distinct_sizes() -> None:
    q, s = FcfQueue(beta=1), SrptQueue()
    rng = np.random.default_rng(0)
    for k, size in enumerate(rng.permutation(50)):
        it = item(k, int(size) + 1, rate=float(rng.random()))
        q.push(it)
        s.push(it)
    assert drain(q) == drain(s)


def test_single_server_and_processor_sharing_times() -> None:
    cal = Calendar()
    done: list[tuple[str, int, float]] = []
    fifo = Server(cal, FifoQueue(), lambda it: it.remaining, lambda it: done.append(("f", it.seq, cal.now)))
    ps = SharingServer(cal, lambda it: it.remaining, lambda it: done.append(("p", it.seq, cal.now)))
    for it in (item(0, 1), item(1, 2)):
        fifo.arrive(it)
        ps.arrive(it)
    cal.run()
    assert sorted(done) == [("f", 0, 1.0), ("f", 1, 3.0), ("p", 0, 2.0), ("p", 1, 3.0)]


def test_transfer_time_follows_slow_start_and_bandwidth() -> None:
    # fast link: rounds of 2, 4 segments take one RTT each
    assert transfer_time(MSS, 0.1, 8e6) == pytest.approx(0.1)
    assert transfer_time(3 * MSS, 0.1, 8e6) == pytest.approx(0.2)
    assert transfer_time(6 * MSS, 0.1, 8e6) == pytest.approx(0.2)
    # slow link: each round lasts as long as its bytes take at 14 kbit/s
    assert transfer_time(3 * MSS, 0.1, 14_000) == pytest.approx(3 * MSS / 1750)
    # a loss costs one more RTT; data handed later waits for the pipe
    p = Pipe(0.1, 8e6, lost=True)
    assert p.send(0.0, MSS) == pytest.approx(0.2)
    assert p.send(0.0, MSS) == pytest.approx(0.3)


def test_one_request_through_cpu_disk_and_network() -> None:
    spec = ServerSpec()
    r = simulate_web("fifo", 1, 1, seed=3, server=spec, workload=WorkloadSpec(files=1), warmup=0.0)
    assert r.requests == 1
    size = int(r.size[0])
    expected = spec.cpu_base + size * spec.cpu_per_kb / 1024
    left = size
    while left > 0:
        blk = min(BLOCK, left)
        expected += spec.disk_block_base + blk / spec.disk_rate + blk / spec.nic_rate
        left -= blk
    assert r.server_time[0] == pytest.approx(expected)
    assert service_time(r, spec)[0] == pytest.approx(expected)
    assert r.total_time[0] > r.server_time[0]
    assert r.slowdown[0] == pytest.approx(expected / r.cost[0])


def test_runs_are_deterministic_per_seed() -> None:
    a = simulate_web("fcf", 50, 2000, seed=2)
    b = simulate_web("fcf", 50, 2000, seed=2)
    assert np.array_equal(a.server_time, b.server_time) and np.array_equal(a.size, b.size)
    c = simulate_web("fcf", 50, 2000, seed=3)
    assert not np.array_equal(a.size, c.size)


def test_every_policy_sees_the_same_requests_and_fcf_beats_fifo_under_load() -> None:
    runs = {p: simulate_web(p, 1000, 20_000, seed=1) for p in ("fifo", "fcf")}
    assert runs["fifo"].losses == runs["fcf"].losses  # the same issued stream
    fifo, fcf = summarise(runs["fifo"]), summarise(runs["fcf"])
    assert fifo.mean_response_ms > 1.6 * fcf.mean_response_ms
    assert fcf.mean_slowdown < 1.0 < fifo.mean_slowdown


def test_losses_are_about_five_percent() -> None:
    r = simulate_web("fifo", 100, 20_000, seed=4)
    assert 100.0 * r.losses / 20_000 == pytest.approx(100 * 8 ** -1.4, abs=0.6)


def test_bad_input_is_a_simulation_error() -> None:
    with pytest.raises(SimulationError):
        simulate_web("lifo", 10, 10)
    with pytest.raises(SimulationError):
        simulate_web("fcf", 0, 10)
    with pytest.raises(SimulationError):
        simulate_web("fcf", 10, -1)


def test_a_small_socket_buffer_ties_the_server_to_the_connection() -> None:
    free = simulate_web("fifo", 20, 400, seed=6, warmup=0.0)
    tied = simulate_web("fifo", 20, 400, seed=6, warmup=0.0, server=ServerSpec(sockbuf_blocks=1))
    # every issued request completes, so both runs hold the same requests (in another order)
    assert np.array_equal(np.sort(free.size), np.sort(tied.size))
    multi_free, multi_tied = free.size > BLOCK, tied.size > BLOCK
    assert multi_free.any()
    # multi-block responses now wait for the client to drain its buffer
    assert tied.server_time[multi_tied].sum() > 2 * free.server_time[multi_free].sum()


def test_closed_users_wait_for_their_responses() -> None:
    open_ = simulate_web("fifo", 100, 3000, seed=2)
    closed = simulate_web("fifo", 100, 3000, seed=2, closed=True)
    # the same 3000 requests take longer when each user first waits for its response
    assert closed.sim_time > 1.2 * open_.sim_time


def test_service_time_of_one_request_on_an_idle_server() -> None:
    # 40,000 bytes: 3 blocks; CPU 0.8 ms + 0.02 ms/KB, disk 3 x 0.5 ms + 40,000 / 20e6,
    # interface 40,000 / 6.25e6.
    r = SimpleNamespace(size=np.array([40_000]))
    expected = 0.0008 + 40_000 / 1024 * 0.00002 + 3 * 0.0005 + 40_000 / 20e6 + 40_000 / 6.25e6
    assert service_time(r, ServerSpec())[0] == pytest.approx(expected)  # type: ignore[arg-type]


def test_calibration_sweep_puts_fifo_beside_fcf_and_scales_the_interface() -> None:
    rows = calibration_sweep([1.0], [10.0, 5.0], [20], 400)
    assert [(r.disk_ms, r.nic_mb_s, r.users) for r in rows] == [(1.0, 10.0, 20), (1.0, 5.0, 20)]
    for r in rows:
        assert r.ratio == pytest.approx(r.fifo_ms / r.fcf_ms)
        assert r.fifo_ms == pytest.approx(r.service_ms + r.fifo_wait_ms)
        assert r.fcf_ms == pytest.approx(r.service_ms + r.fcf_wait_ms)
        assert min(r.fifo_wait_ms, r.fcf_wait_ms) >= -1e-9
        assert set(r.slower_classes_fcf) <= {"<=1K", "1-2K", "2-4K", "4-8K", "8-16K", "16-32K",
                                             "32-64K", "64-128K", ">128K"}
    # the same bytes cross an interface half as fast: twice as busy over the same span
    assert rows[1].net_utilisation == pytest.approx(2 * rows[0].net_utilisation, rel=0.05)
    assert rows[1].disk_utilisation == pytest.approx(rows[0].disk_utilisation, rel=0.05)
