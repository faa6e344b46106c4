"""The event calendar: chronological order, ties in scheduling order, cancelling, determinism."""

from __future__ import annotations

import pytest

from procsift.simulate import Calendar, SimulationError


def test_events_fire_in_time_order_and_ties_in_scheduling_order() -> None:
    cal = Calendar()
    seen: list[tuple[float, str]] = []
    for t, name in ((3.0, "c"), (1.0, "a"), (2.0, "b1"), (2.0, "b2"), (2.0, "b3")):
        cal.schedule(t, lambda n: seen.append((cal.now, n)), name)
    cal.run()
    assert seen == [(1.0, "a"), (2.0, "b1"), (2.0, "b2"), (2.0, "b3"), (3.0, "c")]
    assert cal.fired == 5


def test_handlers_can_schedule_further_events_and_cancel_others() -> None:
    cal = Calendar()
    seen: list[str] = []
    doomed = cal.schedule(5.0, seen.append, "cancelled")

    def first(_: object) -> None:
        seen.append("first")
        cal.after(1.0, seen.append, "second")
        cal.cancel(doomed)

    cal.schedule(1.0, first)
    cal.run()
    assert seen == ["first", "second"]
    assert cal.now == 2.0


def test_run_until_stops_before_later_events_and_resumes() -> None:
    cal = Calendar()
    seen: list[float] = []
    for t in (1.0, 2.0, 3.0):
        cal.schedule(t, seen.append, t)
    assert cal.run(until=2.5) == 2.5
    assert seen == [1.0, 2.0]
    cal.run()
    assert seen == [1.0, 2.0, 3.0]


def test_halt_returns_after_current_event() -> None:
    cal = Calendar()
    seen: list[int] = []
    cal.schedule(1.0, lambda _: (seen.append(1), cal.halt()))
    cal.schedule(2.0, seen.append, 2)
    cal.run()
    assert seen == [1] and len(cal) == 1


def test_scheduling_in_the_past_is_refused() -> None:
    cal = Calendar()
    cal.schedule(2.0, lambda _: None)
    cal.run()
    with pytest.raises(SimulationError):
        cal.schedule(1.0, lambda _: None)


def test_same_inputs_give_same_trace() -> None:
    import random

    def trace(seed: int) -> list[float]:
        rng = random.Random(seed)
        cal = Calendar()
        out: list[float] = []

        def tick(n: int) -> None:
            out.append(cal.now)
            if n:
                cal.after(rng.expovariate(1.0), tick, n - 1)

        for _ in range(3):
            cal.schedule(rng.random(), tick, 20)
        cal.run()
        return out

    assert trace(7) == trace(7)
    assert trace(7) != trace(8)
