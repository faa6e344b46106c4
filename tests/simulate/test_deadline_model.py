"""The deadline paper's model on hand-checkable scenarios, plus the generator and experiments."""

from __future__ import annotations

import numpy as np
import pytest

from procsift.simulate import (
    DeadlineScheduling,
    MachineSpec,
    SimulationError,
    TimeSlicing,
    Transaction,
    generate,
    paper_categories,
    run_deadline,
)
from procsift.simulate.deadline_experiments import verdict


def tr(ident: int, arrival: float, cpu: float, deadline: float, ws: tuple[int, ...] = (10,),
       change_at: tuple[float, ...] = ()) -> Transaction:
    return Transaction(ident, "terminal", arrival, cpu, deadline, ws, change_at)


def finished(machine: DeadlineScheduling | TimeSlicing) -> list[float]:
    return [round(j.finished, 9) for j in machine.jobs]


def test_deadline_two_transactions_one_cpu_most_urgent_first() -> None:
    # Both fetch 10 pages (0.2 s) in parallel; A (earlier deadline) runs 0.2-1.2, B 1.2-3.2.
    m = DeadlineScheduling(MachineSpec(cpus=1), [tr(0, 0, 1.0, 4.0), tr(1, 0, 2.0, 8.0)])
    m.run(100.0)
    assert finished(m) == [1.2, 3.2]
    assert (m.page_fetches, m.dispatches) == (20, 2)
    assert m.response_ratios("terminal") == pytest.approx([1.2 / 4.0, 3.2 / 8.0])


def test_time_slicing_demotes_at_slice_end_and_refetches() -> None:
    # Slice 0.5 s: A runs 0.2-0.7, refetches to 0.9; B runs 0.7-1.2, refetches to 1.4;
    # A runs 1.2-1.7 and ends; B runs 1.7-2.2, 2.4-2.9, 3.1-3.6.
    m = TimeSlicing(MachineSpec(cpus=1), [tr(0, 0, 1.0, 4.0), tr(1, 0, 2.0, 8.0)], time_slice=0.5)
    m.run(100.0)
    assert finished(m) == [1.7, 3.6]
    assert (m.page_fetches, m.dispatches) == (60, 6)


def test_time_slicing_keeps_a_reserve_of_pages() -> None:
    # 40 user pages, reserve 10: A (25 pages) is promoted; B (10) needs 20 free and waits for A.
    m = TimeSlicing(MachineSpec(cpus=2, pages=40), [tr(0, 0, 1.0, 4.0, (25,)), tr(1, 0, 1.0, 4.0)],
                    time_slice=5.0)
    m.run(100.0)
    # A fetches 25 pages (0.5 s) and runs to 1.5; only then B is promoted, fetches, runs to 2.7.
    assert finished(m) == [1.5, 2.7]
    assert m.dispatches == 2


def test_working_set_growth_fetches_pages_and_redispatches() -> None:
    # A grows from 10 to 15 pages after 0.5 s of CPU: 5 more fetches (0.1 s) and a second dispatch.
    m = DeadlineScheduling(MachineSpec(cpus=1), [tr(0, 0, 1.0, 4.0, (10, 15), (0.5,))])
    m.run(10.0)
    assert finished(m) == [1.3]
    assert (m.page_fetches, m.dispatches) == (15, 2)


def test_parallel_fetch_delays_a_batch_of_pages_by_one_fetch_time() -> None:
    # fetch="parallel": 10 pages arrive together 0.02 s after they are given. A runs 0.02-1.02,
    # B 1.02-3.02 (serial: 0.2 s of fetching first, see the test above).
    m = DeadlineScheduling(MachineSpec(cpus=1, fetch="parallel"), [tr(0, 0, 1.0, 4.0), tr(1, 0, 2.0, 8.0)])
    m.run(100.0)
    assert finished(m) == [1.02, 3.02]
    assert (m.page_fetches, m.dispatches) == (20, 2)


def test_parallel_fetch_under_time_slicing_refetches_in_one_fetch_time() -> None:
    # Slice 0.5 s: A 0.02-0.52, refetched by 0.54; B 0.52-1.02, by 1.04; A 1.02-1.52 ends;
    # B 1.52-2.02, 2.04-2.54, 2.56-3.06. Same fetch and dispatch counts as serial.
    m = TimeSlicing(MachineSpec(cpus=1, fetch="parallel"), [tr(0, 0, 1.0, 4.0), tr(1, 0, 2.0, 8.0)],
                    time_slice=0.5)
    m.run(100.0)
    assert finished(m) == [1.52, 3.06]
    assert (m.page_fetches, m.dispatches) == (60, 6)


def test_drum_fetch_is_one_latency_plus_a_transfer_per_further_page() -> None:
    # fetch="drum", a 20 ms revolution passing 4 pages: 5 ms per further page, so 10 pages arrive
    # 0.02 + 9 x 0.005 = 0.065 s after they are given. A runs 0.065-1.065, B (fetched alongside,
    # no device queue) 1.065-3.065.
    m = DeadlineScheduling(MachineSpec(cpus=1, fetch="drum", drum_revolution=0.02, drum_pages=4),
                           [tr(0, 0, 1.0, 4.0), tr(1, 0, 2.0, 8.0)])
    m.run(100.0)
    assert finished(m) == [1.065, 3.065]
    assert (m.page_fetches, m.dispatches) == (20, 2)
    drum = MachineSpec(fetch="drum", drum_revolution=0.02, drum_pages=4)
    assert [drum.batch_time(k) for k in (1, 2, 10)] == pytest.approx([0.020, 0.025, 0.065])
    # one request per page: each further page waits half a revolution, then transfers
    fifo = MachineSpec(fetch="drum-fifo", drum_revolution=0.02, drum_pages=4)
    assert [fifo.batch_time(k) for k in (1, 2, 10)] == pytest.approx([0.020, 0.035, 0.155])


def test_drum_fetch_under_time_slicing_refetches_a_working_set_in_one_chained_transfer() -> None:
    # Slice 0.5 s, 0.065 s per 10-page refetch: A 0.065-0.565, refetched by 0.63; B 0.565-1.065,
    # by 1.13; A 1.065-1.565 ends; B 1.565-2.065, 2.13-2.63, 2.695-3.195.
    m = TimeSlicing(MachineSpec(cpus=1, fetch="drum", drum_revolution=0.02, drum_pages=4),
                    [tr(0, 0, 1.0, 4.0), tr(1, 0, 2.0, 8.0)], time_slice=0.5)
    m.run(100.0)
    assert finished(m) == [1.565, 3.195]
    assert (m.page_fetches, m.dispatches) == (60, 6)


def test_drum_defaults_are_the_2301s_revolution_and_pages() -> None:
    assert MachineSpec(fetch="drum").page_transfer == pytest.approx(0.0175 / 4.5)
    assert MachineSpec(fetch="drum-fifo").page_transfer == pytest.approx(0.0175 / 2 + 0.0175 / 4.5)


def test_unknown_fetch_mode_is_refused() -> None:
    with pytest.raises(SimulationError, match="unknown fetch mode 'tape'"):
        DeadlineScheduling(MachineSpec(fetch="tape"), [])
    with pytest.raises(SimulationError, match="bad machine"):
        DeadlineScheduling(MachineSpec(fetch="drum", drum_pages=0), [])


def test_partial_allocation_is_stolen_by_more_urgent_arrival() -> None:
    # 40 pages, 1 CPU. C (deadline 200, 30 pages) arrives first and gets a full allocation.
    # B (deadline 100, 30 pages) gets the 10 left: partial. A (deadline 4, 10 pages) steals
    # B's partial pages (C's full allocation is safe), fetches them (0.2 s) and runs first.
    load = [tr(0, 0.0, 1.0, 200.0, (30,)), tr(1, 0.01, 0.2, 100.0, (30,)), tr(2, 0.05, 0.5, 4.0)]
    m = DeadlineScheduling(MachineSpec(cpus=1, pages=40), load)
    m.run(100.0)
    # A: ready 0.25, runs to 0.75. C: fetched at 0.6, waits for the CPU, runs 0.75-1.75.
    # B: 10 pages back at 0.75 (fetched by 0.95), 20 more at 1.75 (by 2.15), runs to 2.35.
    assert finished(m) == [1.75, 2.35, 0.75]
    assert m.page_fetches == 30 + 10 + 10 + 10 + 20
    assert m.dispatches == 3


def test_generator_is_seeded_and_follows_the_categories() -> None:
    cats = paper_categories(48)
    a, b = generate(cats, 600.0, 3), generate(cats, 600.0, 3)
    assert a == b and a != generate(cats, 600.0, 4)
    term = [t for t in a if t.category == "terminal"]
    assert len(term) == 480 and len(a) == 480 + 30
    assert all(0 <= t.arrival < 600 for t in a)
    assert np.mean([t.cpu for t in term]) == pytest.approx(0.8, rel=0.1)
    assert np.mean([np.mean(t.ws) for t in term]) == pytest.approx(20, rel=0.15)
    # changing the terminal rate leaves the background stream alone
    bg = [t for t in generate(paper_categories(30), 600.0, 3) if t.category == "background"]
    assert [t.cpu for t in bg] == [t.cpu for t in a if t.category == "background"]


def test_verdict_tells_growth_from_a_stable_queue() -> None:
    assert verdict([3, 4, 3, 4, 3, 4, 3, 4, 3, 4]) == "stable"
    assert verdict([3, 5, 8, 10, 12, 15, 18, 20, 22, 25]) == "growing"
    assert verdict([1, 2], gave_up=True) == "growing"


def test_repeated_input_runs_are_deterministic_and_periodic() -> None:
    a = run_deadline("deadline", 12, seed=4, horizon=800.0, repeated=True)
    b = run_deadline("deadline", 12, seed=4, horizon=800.0, repeated=True)
    assert a == b
    assert a != run_deadline("deadline", 12, seed=5, horizon=800.0, repeated=True)
    # a light load on a repeated 100 s input settles into the same queue every period
    assert a.verdict == "stable"
    assert a.queue[-1] == pytest.approx(a.queue[-2], abs=0.05)


def test_bad_input_is_a_simulation_error() -> None:
    with pytest.raises(SimulationError):
        run_deadline("round-robin", 10)
    with pytest.raises(SimulationError):
        run_deadline("deadline", -1)
    with pytest.raises(SimulationError):
        run_deadline("one-level", 10)  # no slice
