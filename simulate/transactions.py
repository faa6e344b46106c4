"""The deadline paper's load generator: transaction categories, profiles and the repeated input stream."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from procsift.simulate.errors import SimulationError


@dataclass(frozen=True)
class Category:
    """One class of transactions (the paper's "category"): rates in per minute, times in seconds."""

    name: str
    rate_per_min: float
    cpu_mean: float
    cpu_sd: float
    ws_mean: float
    deadline: float


@dataclass(frozen=True)
class Transaction:
    """One transaction's a-priori profile: arrival, CPU demand and working-set changes.

    `ws[i]` is the working-set size (pages) from accumulated CPU time `change_at[i-1]` on
    (`change_at` has one entry fewer than `ws`); the last event is termination at `cpu`.
    """

    ident: int
    category: str
    arrival: float
    cpu: float
    deadline: float
    ws: tuple[int, ...]
    change_at: tuple[float, ...]


def background(rate_per_min: float = 3.0) -> Category:
    """The paper's background category: 16 s CPU, 50 pages, deadline 180 s (40% of 2 CPUs)."""
    return Category("background", rate_per_min, 16.0, 8.0, 50.0, 180.0)


def terminal(rate_per_min: float) -> Category:
    """The paper's terminal category: 0.8 s CPU, 20 pages, deadline 4 s."""
    return Category("terminal", rate_per_min, 0.8, 0.4, 20.0, 4.0)


def paper_categories(terminal_rate: float) -> tuple[Category, ...]:
    """Background plus terminal transactions at `terminal_rate` per minute."""
    return (background(), terminal(terminal_rate))


def generate(
    categories: tuple[Category, ...],
    window: float,
    seed: int,
    *,
    change_mean: float = 2.0,
    ws_cap: int = 90,
) -> list[Transaction]:
    """Transactions arriving uniformly over [0, window): rate x window of each category.

    CPU demand is |Normal(mean, sd)|; a transaction's mean working set is Poisson(category
    mean) and its instantaneous working set is Poisson(own mean), redrawn after exponential
    amounts of CPU time (mean `change_mean` s). Sizes are kept within [1, ws_cap] pages.
    """
    if window <= 0:
        raise SimulationError(f"window must be positive, got {window}")
    out: list[tuple[float, str, float, float, tuple[int, ...], tuple[float, ...]]] = []
    for k, cat in enumerate(categories):
        rng = np.random.default_rng([seed, k])
        if cat.rate_per_min < 0 or cat.cpu_mean <= 0 or cat.deadline <= 0 or cat.ws_mean < 0:
            raise SimulationError(f"category {cat.name!r} has a negative or zero parameter")
        count = int(round(cat.rate_per_min * window / 60.0))
        arrivals = rng.uniform(0.0, window, count)
        cpus = np.abs(rng.normal(cat.cpu_mean, cat.cpu_sd, count))
        owns = np.maximum(1, rng.poisson(cat.ws_mean, count))
        for arrival, cpu, own in zip(arrivals, cpus, owns):
            cpu = float(cpu) or cat.cpu_mean
            change_at: list[float] = []
            t = float(rng.exponential(change_mean))
            while t < cpu:
                change_at.append(t)
                t += float(rng.exponential(change_mean))
            sizes = np.clip(rng.poisson(own, len(change_at) + 1), 1, ws_cap)
            out.append((float(arrival), cat.name, cpu, cat.deadline,
                        tuple(int(s) for s in sizes), tuple(change_at)))
    out.sort(key=lambda row: row[0])
    return [Transaction(i, row[1], row[0], *row[2:]) for i, row in enumerate(out)]


def repeat(stream: list[Transaction], period: float, horizon: float) -> list[Transaction]:
    """The paper's capacity input: `stream` (covering one period) duplicated every `period` s."""
    out: list[Transaction] = []
    copies = int(np.ceil(horizon / period))
    for k in range(copies):
        for tr in stream:
            out.append(Transaction(len(out), tr.category, tr.arrival + k * period, tr.cpu,
                                   tr.deadline, tr.ws, tr.change_at))
    return out
