"""The FCF paper's workload: SURGE-like users, a 10,000-file set, Table I connections, Pareto RTTs."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from procsift.simulate.errors import SimulationError

# Table I: bandwidth (bit/s), frequency (%), and whether it is in RTT classes X/Y (>= 128 kbit/s)
# or Z/W (slower). The frequencies sum to 99.7%; they are normalised.
BANDWIDTHS = (14_000, 28_000, 33_000, 56_000, 128_000, 1_000_000, 4_000_000, 10_000_000)
BANDWIDTH_PCT = (1.80, 16.40, 18.40, 33.60, 6.00, 13.30, 3.50, 6.70)
SPEED_LABELS = ("14K", "28K", "33K", "56K", "128K", "1M", "4M", "10M")
# Minimum RTT classes (s) and their shares: X 25%, Y 35% (fast links), Z 15%, W 25% (slow).
RTT_MIN = {"X": 0.020, "Y": 0.060, "Z": 0.110, "W": 0.250}
RTT_ALPHA = 1.4
RTT_CAP = 8.0


@dataclass(frozen=True)
class WorkloadSpec:
    """SURGE-like parameters (Barford & Crovella 1998), file sizes fitted to the FCF paper's Fig. 4."""

    files: int = 10_000
    zipf: float = 1.0
    size_mu: float = 7.85       # lognormal body of file sizes, ln bytes
    size_sigma: float = 1.79
    tail_start: int = 133_000   # Pareto tail above this many bytes (SURGE's k = 133 KB)
    tail_alpha: float = 1.4      # fitted to Fig. 4 (SURGE: 1.1 for files)
    max_size: int = 20_000_000
    embedded_alpha: float = 2.43    # objects per page: Pareto(k = 1)
    active_shape: float = 1.46      # think time between objects of one page: Weibull
    active_scale: float = 0.382
    inactive_alpha: float = 1.5     # think time between pages: Pareto(k = 1 s)
    inactive_max: float = 3600.0

    def check(self) -> None:
        """Raise SimulationError for impossible parameters."""
        if self.files < 1 or self.size_sigma <= 0 or self.zipf < 0 or self.tail_alpha <= 0:
            raise SimulationError(f"bad workload parameters: {self}")


def file_sizes(spec: WorkloadSpec, rng: np.random.Generator) -> np.ndarray:
    """Sizes (bytes) of the files by popularity rank, so that requests follow the size mix.

    SURGE matches file sizes to popularity so that the sizes of *requests* (not just of files)
    follow the measured distribution. Here the files are laid along [0, 1] in random order,
    each over a span equal to its request probability, and a file's size is the target
    quantile at its span's midpoint: requests then follow the hybrid distribution (lognormal
    body, Pareto tail above `tail_start`) with popularity independent of size.
    """
    from statistics import NormalDist

    p = np.diff(popularity(spec), prepend=0.0)
    order = rng.permutation(spec.files)
    mid = np.empty(spec.files)
    mid[order] = np.cumsum(p[order]) - p[order] / 2
    body = NormalDist(spec.size_mu, spec.size_sigma)
    u0 = body.cdf(float(np.log(spec.tail_start)))
    sizes = np.empty(spec.files)
    low = mid < u0
    sizes[low] = np.exp([body.inv_cdf(float(u)) for u in mid[low]])
    sizes[~low] = spec.tail_start * ((1 - mid[~low]) / (1 - u0)) ** (-1.0 / spec.tail_alpha)
    return np.clip(sizes, 64, spec.max_size).astype(np.int64)


def popularity(spec: WorkloadSpec) -> np.ndarray:
    """Cumulative request probability by file index (Zipf over ranks; index = rank)."""
    weights = 1.0 / np.arange(1, spec.files + 1) ** spec.zipf
    return np.cumsum(weights) / weights.sum()


@dataclass(frozen=True)
class Users:
    """Each user's connection and pre-drawn request sequence (identical under every policy)."""

    speed: np.ndarray      # index into BANDWIDTHS, shape (users,)
    rtt_min: np.ndarray    # seconds, shape (users,)
    files: np.ndarray      # file index of each user's i-th request, shape (users, per_user)
    think: np.ndarray      # seconds to wait before issuing it, shape (users, per_user)
    rtt: np.ndarray        # that request's RTT draw (capped), shape (users, per_user)
    lost: np.ndarray       # whether the draw passed the cap (a time-out), shape (users, per_user)


def users(count: int, per_user: int, spec: WorkloadSpec, rng: np.random.Generator) -> Users:
    """Draw `count` users with `per_user` requests each."""
    if count < 1 or per_user < 1:
        raise SimulationError(f"need at least one user and one request each, got {count}, {per_user}")
    pct = np.asarray(BANDWIDTH_PCT) / sum(BANDWIDTH_PCT)
    speed = rng.choice(len(BANDWIDTHS), size=count, p=pct)
    fast = np.asarray(BANDWIDTHS)[speed] >= 128_000
    near = rng.uniform(0, 1, count)
    rtt_min = np.where(fast, np.where(near < 25 / 60, RTT_MIN["X"], RTT_MIN["Y"]),
                       np.where(near < 15 / 40, RTT_MIN["Z"], RTT_MIN["W"]))
    shape = (count, per_user)
    files = np.searchsorted(popularity(spec), rng.uniform(0, 1, shape)).astype(np.int64)
    files = np.minimum(files, spec.files - 1)
    think = _think_times(shape, spec, rng)
    ratio = rng.uniform(0, 1, shape) ** (-1.0 / RTT_ALPHA)
    lost = ratio > RTT_CAP
    rtt = rtt_min[:, None] * np.minimum(ratio, RTT_CAP)
    return Users(speed, rtt_min, files, think, rtt, lost)


def _think_times(shape: tuple[int, int], spec: WorkloadSpec, rng: np.random.Generator) -> np.ndarray:
    """SURGE ON/OFF: objects of a page follow short active OFF times; pages long inactive ones."""
    count, per_user = shape
    objects = np.floor(rng.uniform(0, 1, shape) ** (-1.0 / spec.embedded_alpha)).astype(np.int64)
    page_start = np.zeros(shape, dtype=bool)
    for u in range(count):
        starts = np.cumsum(objects[u]) - objects[u]
        page_start[u, starts[starts < per_user]] = True
    active = spec.active_scale * rng.weibull(spec.active_shape, shape)
    inactive = np.minimum(rng.uniform(0, 1, shape) ** (-1.0 / spec.inactive_alpha), spec.inactive_max)
    return np.where(page_start, inactive, active)
