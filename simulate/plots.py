"""PNG figures for both reproductions (writes files: the only module here that does)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from procsift.simulate.deadline_experiments import DeadlineRun
from procsift.simulate.web_experiments import WebRow


def _pyplot():  # type: ignore[no-untyped-def]
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def response_ratio_png(runs: dict[str, DeadlineRun], path: Path) -> Path:
    """Fig. 5: cumulative distribution of response ratios per strategy."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6, 3.6), dpi=90)
    for name, run in runs.items():
        x = np.sort(np.asarray(run.ratios))
        ax.plot(x, 100.0 * np.arange(1, len(x) + 1) / len(x), label=name)
    ax.axvline(1.0, color="grey", lw=0.8, ls="--")
    ax.set_xscale("log")
    ax.set_xlabel("response ratio (turnaround / deadline)")
    ax.set_ylabel("% of transactions at or below")
    ax.legend()
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def web_pngs(rows: list[WebRow], outdir: Path) -> list[Path]:
    """Figs. 1, 2, 3 (by users) and 5, 6 (at the largest user count), one PNG each."""
    plt = _pyplot()
    outdir.mkdir(parents=True, exist_ok=True)
    policies = sorted({r.policy for r in rows}, key=["fifo", "ps", "srpt", "fcf"].index)
    made = []
    for fname, field, label in (("web_fig1_slowdown.png", "mean_slowdown", "mean slowdown"),
                                ("web_fig2_pending.png", "pending", "pending connections"),
                                ("web_fig3_response.png", "mean_response_ms", "mean response (ms)")):
        fig, ax = plt.subplots(figsize=(5.5, 3.4), dpi=90)
        for p in policies:
            pts = sorted((r.users, getattr(r, field)) for r in rows if r.policy == p)
            ax.plot([u for u, _ in pts], [v for _, v in pts], marker="o", label=p.upper())
        ax.set_xlabel("simultaneous users")
        ax.set_ylabel(label)
        if field != "pending":
            ax.set_yscale("log")
        ax.legend()
        ax.grid(alpha=0.3)
        fig.tight_layout()
        fig.savefig(outdir / fname)
        plt.close(fig)
        made.append(outdir / fname)
    top = max(r.users for r in rows)
    for fname, field, label in (("web_fig5_by_size.png", "by_size_ms", "file size"),
                                ("web_fig6_by_speed.png", "by_speed_ms", "connection speed")):
        fig, ax = plt.subplots(figsize=(6, 3.4), dpi=90)
        width = 0.8 / len(policies)
        for k, p in enumerate(policies):
            row = next(r for r in rows if r.policy == p and r.users == top)
            data = getattr(row, field)
            xs = np.arange(len(data)) + k * width
            ax.bar(xs, list(data.values()), width, label=p.upper())
            ax.set_xticks(np.arange(len(data)) + 0.4 - width / 2, list(data.keys()), fontsize=7)
        ax.set_yscale("log")
        ax.set_xlabel(f"{label} ({top} users)")
        ax.set_ylabel("mean response (ms)")
        ax.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(outdir / fname)
        plt.close(fig)
        made.append(outdir / fname)
    return made
