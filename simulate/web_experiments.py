"""The FCF paper's experiments: Figs. 1-6 as rows of numbers over 300-1000 users."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np

from procsift.simulate.web import BLOCK, ServerSpec, WebResult, simulate
from procsift.simulate.web_load import SPEED_LABELS

PAPER_USERS = (300, 400, 500, 600, 700, 800, 900, 1000)
# Fig. 5's file-size classes (upper bounds in KB; the last is "over 128 KB").
SIZE_EDGES_KB = (1, 2, 4, 8, 16, 32, 64, 128)
SIZE_LABELS = ("<=1K", "1-2K", "2-4K", "4-8K", "8-16K", "16-32K", "32-64K", "64-128K", ">128K")


@dataclass(frozen=True)
class WebRow:
    """One (policy, users) point: the paper's Figs. 1-3 and 5-6 figures (times in ms)."""

    policy: str
    users: int
    requests: int
    mean_slowdown: float
    max_slowdown: float
    mean_response_ms: float
    pending: float
    losses_pct: float
    by_size_ms: dict[str, float]
    by_speed_ms: dict[str, float]
    disk_utilisation: float
    net_utilisation: float


def summarise(r: WebResult) -> WebRow:
    """Reduce one run to the paper's figures."""
    sd = r.slowdown
    kb = r.size / 1024.0
    cls = np.searchsorted(np.asarray(SIZE_EDGES_KB, dtype=float), kb, side="left")
    by_size = {lab: float(r.server_time[cls == i].mean() * 1000) for i, lab in enumerate(SIZE_LABELS)
               if np.any(cls == i)}
    by_speed = {lab: float(r.server_time[r.speed == i].mean() * 1000)
                for i, lab in enumerate(SPEED_LABELS) if np.any(r.speed == i)}
    return WebRow(r.policy, r.users, r.requests, float(sd.mean()), float(sd.max()),
                  float(r.server_time.mean() * 1000), r.pending_mean,
                  100.0 * r.losses / max(r.requests, 1), by_size, by_speed,
                  r.utilisation.get("disk", float("nan")), r.utilisation.get("net", float("nan")))


def size_mix(r: WebResult) -> dict[str, tuple[float, float]]:
    """Fig. 4: per size class, (% of requests, % of bytes)."""
    kb = r.size / 1024.0
    cls = np.searchsorted(np.asarray(SIZE_EDGES_KB, dtype=float), kb, side="left")
    total = float(r.size.sum())
    return {lab: (100.0 * float(np.mean(cls == i)), 100.0 * float(r.size[cls == i].sum()) / total)
            for i, lab in enumerate(SIZE_LABELS)}


def sweep(policies: Iterable[str], users: Iterable[int], requests: int, seed: int = 1,
          progress: Callable[[int], None] | None = None,
          server: ServerSpec = ServerSpec(),
          closed: bool = False) -> tuple[list[WebRow], WebResult | None]:
    """Every (policy, users) run; also returns the last run for the size-mix figure."""
    rows, last = [], None
    for n in users:
        for p in policies:
            last = simulate(p, n, requests, seed=seed, progress=progress, server=server,
                            closed=closed)
            rows.append(summarise(last))
    return rows, last


@dataclass(frozen=True)
class CalibrationRow:
    """FIFO beside FCF for one set of server costs and one load (times in ms)."""

    disk_ms: float
    nic_mb_s: float
    users: int
    fifo_ms: float
    fcf_ms: float
    ratio: float
    fcf_slowdown: float
    over_128k_fifo_ms: float
    over_128k_fcf_ms: float
    slower_classes_fcf: tuple[str, ...]
    disk_utilisation: float
    net_utilisation: float
    service_ms: float        # mean own service time on an idle server (the same for both)
    fifo_wait_ms: float      # mean time in the server beyond it
    fcf_wait_ms: float


def service_time(r: WebResult, spec: ServerSpec) -> np.ndarray:
    """Each request's own service time on an idle server: CPU, then disk and interface per block."""
    blocks = np.ceil(r.size / BLOCK)
    return (spec.cpu_base + r.size / 1024.0 * spec.cpu_per_kb + blocks * spec.disk_block_base
            + r.size / spec.disk_rate + r.size / spec.nic_rate)


def calibration_sweep(disk_ms: Iterable[float], nic_mb_s: Iterable[float], users: Iterable[int],
                      requests: int, seed: int = 1) -> list[CalibrationRow]:
    """FIFO and FCF over a grid of disk positioning times (ms per block) and interface rates (MB/s).

    The paper gives no service costs; this is the sweep behind ServerSpec's defaults.
    """
    rows = []
    users = tuple(users)
    nic_mb_s = tuple(nic_mb_s)
    for d in disk_ms:
        for nic in nic_mb_s:
            spec = ServerSpec(disk_block_base=d / 1000.0, nic_rate=nic * 1e6)
            for n in users:
                fifo = simulate("fifo", n, requests, seed=seed, server=spec)
                fcf = simulate("fcf", n, requests, seed=seed, server=spec)
                a, b = summarise(fifo), summarise(fcf)
                slower = tuple(k for k, v in b.by_size_ms.items() if v > a.by_size_ms.get(k, float("inf")))
                own = service_time(fcf, spec)
                rows.append(CalibrationRow(
                    d, nic, n, a.mean_response_ms, b.mean_response_ms,
                    a.mean_response_ms / b.mean_response_ms, b.mean_slowdown,
                    a.by_size_ms.get(">128K", float("nan")), b.by_size_ms.get(">128K", float("nan")),
                    slower, b.disk_utilisation, b.net_utilisation, float(own.mean() * 1000),
                    float((fifo.server_time - service_time(fifo, spec)).mean() * 1000),
                    float((fcf.server_time - own).mean() * 1000)))
    return rows
