"""The deadline paper's experiments: capacity (Fig. 4), Table 2, Table 3 and Fig. 5's distribution."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np

from procsift.simulate._machine import Machine, MachineSpec
from procsift.simulate.deadline import DeadlineScheduling
from procsift.simulate.errors import SimulationError
from procsift.simulate.timeslicing import TimeSlicing
from procsift.simulate.transactions import Transaction, generate, paper_categories, repeat

STRATEGIES = ("deadline", "one-level", "two-level")
CAPACITY_RATES = (12, 18, 24, 30, 36, 42, 48, 54, 60, 66, 72, 78, 84, 90)
PAPER_SLICES = (1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0, 5.0)
PERIOD = 100.0
GIVE_UP = 300  # transactions in the system: growth is beyond doubt


@dataclass(frozen=True)
class DeadlineRun:
    """One run's figures: the paper's overhead counts, response ratios and queue trace."""

    strategy: str
    time_slice: float | None
    rate: float
    seed: int
    horizon: float
    page_fetches: int
    dispatches: int
    finished: int
    mean_ratio_terminal: float
    late_fraction: float
    verdict: str
    queue: tuple[float, ...]
    ratios: tuple[float, ...]


def build(strategy: str, load: list[Transaction], time_slice: float | None,
          spec: MachineSpec = MachineSpec()) -> Machine:
    """The machine for `strategy` ('deadline', 'one-level' or 'two-level')."""
    if strategy == "deadline":
        return DeadlineScheduling(spec, load, period=PERIOD)
    if strategy in ("one-level", "two-level"):
        if time_slice is None:
            raise SimulationError(f"{strategy} time slicing needs a time slice")
        levels = 1 if strategy == "one-level" else 2
        return TimeSlicing(spec, load, time_slice=time_slice, levels=levels, period=PERIOD)
    raise SimulationError(f"unknown strategy {strategy!r}; choose from {', '.join(STRATEGIES)}")


def verdict(queue: Iterable[float], gave_up: bool = False, periodic: bool = True) -> str:
    """'stable', 'growing' or 'uncertain' from per-period (100 s) mean queue lengths.

    Periodic (the repeated 100 s input): growing if the least-squares slope over the second
    half exceeds half a transaction per period, stable below 0.2 (in between mirrors the
    paper's "regions of uncertainty"). Random input fluctuates more: growing if the slope
    over the whole run exceeds one transaction per period, stable below 0.5. Passing GIVE_UP
    transactions in the system is growth beyond doubt.
    """
    q = np.asarray(list(queue), dtype=float)
    if gave_up:
        return "growing"
    tail = q[len(q) // 2:] if periodic else q
    if len(tail) < 3:
        raise SimulationError("a stability verdict needs at least 6 periods of 100 s")
    slope = float(np.polyfit(np.arange(len(tail)), tail, 1)[0])
    high, low = (0.5, 0.2) if periodic else (1.0, 0.5)
    if slope > high:
        return "growing"
    return "stable" if slope < low else "uncertain"


def run(strategy: str, rate: float, *, seed: int = 1, time_slice: float | None = None,
        horizon: float = 1800.0, repeated: bool = False, spec: MachineSpec = MachineSpec()) -> DeadlineRun:
    """One run at `rate` terminal transactions/min plus background; `repeated` = the 100 s input."""
    if rate < 0:
        raise SimulationError(f"arrival rate must be >= 0 per minute, got {rate}")
    if horizon < 6 * PERIOD:
        raise SimulationError(f"horizon must be at least {6 * PERIOD:.0f} s, got {horizon}")
    cats = paper_categories(rate)
    if repeated:
        load = repeat(generate(cats, PERIOD, seed), PERIOD, horizon)
    else:
        load = generate(cats, horizon, seed)
    machine = build(strategy, load, time_slice, spec)
    completed = machine.run(horizon, give_up=GIVE_UP)
    term = machine.response_ratios("terminal")
    every = machine.response_ratios("terminal") + machine.response_ratios("background")
    return DeadlineRun(
        strategy=strategy, time_slice=time_slice, rate=rate, seed=seed, horizon=horizon,
        page_fetches=machine.page_fetches, dispatches=machine.dispatches,
        finished=len(every),
        mean_ratio_terminal=float(np.mean(term)) if term else float("nan"),
        late_fraction=float(np.mean(np.asarray(every) > 1.0)) if every else float("nan"),
        verdict=verdict(machine.period_means, gave_up=not completed, periodic=repeated),
        queue=tuple(machine.period_means), ratios=tuple(every))


def supported(strategy: str, rate: float, seeds: Iterable[int], time_slice: float | None,
              horizon: float = 1500.0, spec: MachineSpec = MachineSpec()) -> tuple[bool, list[str]]:
    """Whether most seeds' repeated-input runs at `rate` end with a stable queue."""
    verdicts = [run(strategy, rate, seed=s, time_slice=time_slice, horizon=horizon,
                    repeated=True, spec=spec).verdict for s in seeds]
    return sum(v == "stable" for v in verdicts) * 2 > len(verdicts), verdicts


def max_rate(strategy: str, *, time_slice: float | None = None, seeds: Iterable[int] = (1, 2, 3),
             rates: Iterable[float] = CAPACITY_RATES, horizon: float = 1500.0,
             tick: Callable[[], None] | None = None,
             spec: MachineSpec = MachineSpec()) -> tuple[float, dict[float, list[str]]]:
    """Highest rate (trans./min) supported before the first unsupported one (0 if none)."""
    best, seen = 0.0, {}
    seeds = tuple(seeds)
    for rate in rates:
        ok, verdicts = supported(strategy, rate, seeds, time_slice, horizon, spec)
        seen[rate] = verdicts
        if tick:
            tick()
        if not ok:
            break
        best = rate
    return best, seen


@dataclass(frozen=True)
class Capacity:
    """Fig. 4: the maximum terminal rate each strategy sustains, per time slice for time slicing."""

    deadline: float
    one_level: dict[float, float]
    two_level: dict[float, float]


def capacity(seeds: Iterable[int] = (1, 2, 3), slices: Iterable[float] = PAPER_SLICES,
             tick: Callable[[], None] | None = None, spec: MachineSpec = MachineSpec()) -> Capacity:
    """Fig. 4's search over rates (and slice lengths for the time slicers)."""
    seeds, slices = tuple(seeds), tuple(slices)
    dl, _ = max_rate("deadline", seeds=seeds, tick=tick, spec=spec)
    one = {s: max_rate("one-level", time_slice=s, seeds=seeds, tick=tick, spec=spec)[0] for s in slices}
    two = {s: max_rate("two-level", time_slice=s, seeds=seeds, tick=tick, spec=spec)[0] for s in slices}
    return Capacity(dl, one, two)


def table2(rate: float = 48.0, slices: Iterable[float] = PAPER_SLICES, seed: int = 1,
           horizon: float = 1200.0, spec: MachineSpec = MachineSpec()) -> dict[str, dict[float, DeadlineRun]]:
    """Table 2: mean terminal response ratio by slice length over 20-minute runs."""
    return {s: {t: run(s, rate, seed=seed, time_slice=t, horizon=horizon, spec=spec) for t in slices}
            for s in ("one-level", "two-level")}


def best_slice(runs: dict[float, DeadlineRun]) -> float:
    """The slice with the lowest mean response ratio among runs with a stable queue."""
    ok = {t: r.mean_ratio_terminal for t, r in runs.items() if r.verdict != "growing"}
    pool = ok or {t: r.mean_ratio_terminal for t, r in runs.items()}
    return min(pool, key=lambda t: pool[t])


def table3(one_slice: float, two_slice: float, rate: float = 48.0, seed: int = 1,
           horizon: float = 1800.0, spec: MachineSpec = MachineSpec()) -> dict[str, DeadlineRun]:
    """Table 3 and Fig. 5: 30-minute runs of each strategy (time slicers at their best slice)."""
    return {
        "deadline": run("deadline", rate, seed=seed, horizon=horizon, spec=spec),
        "one-level": run("one-level", rate, seed=seed, time_slice=one_slice, horizon=horizon, spec=spec),
        "two-level": run("two-level", rate, seed=seed, time_slice=two_slice, horizon=horizon, spec=spec),
    }
