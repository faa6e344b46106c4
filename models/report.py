"""Evaluation reports: report.md plus PNGs (confusion matrix, the fitted tree, feature importances)."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from procsift.models.bundle import Bundle

__all__ = ["write_report", "format_scores"]


def _atomic(path: Path, write: Callable[[str], None]) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        write(tmp)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def format_scores(scores: dict[str, Any]) -> str:
    """Per-class table, macro-F1 and confusion matrix as fixed-width text (fits 80 columns)."""
    labels = scores["labels"]
    lines = [f"{'label':<14} {'precision':>9} {'recall':>7} {'f1':>6} {'windows':>8}"]
    for lab in labels:
        c = scores["per_class"][lab]
        lines.append(f"{lab:<14} {c['precision']:>9.3f} {c['recall']:>7.3f} {c['f1']:>6.3f} {c['support']:>8}")
    lines.append(f"macro-F1 {scores['macro_f1']:.3f}   accuracy {scores['accuracy']:.3f}   "
                 f"smoothed macro-F1 {scores.get('smoothed_macro_f1', float('nan')):.3f}")
    if "macro_f1_ci95" in scores:
        lo, hi = scores["macro_f1_ci95"]
        lines.append(f"macro-F1 95% interval over resampled applications: {lo:.3f}-{hi:.3f}")
    lines.append("confusion (rows = truth, columns = predicted): " + " | ".join(labels))
    for lab, row in zip(labels, scores["confusion"]):
        lines.append(f"  {lab:<14} " + " ".join(f"{v:>7}" for v in row))
    return "\n".join(lines)


def _plot_confusion(scores: dict[str, Any], out: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    cm = np.array(scores["confusion"], dtype=float)
    norm = cm / np.maximum(cm.sum(axis=1, keepdims=True), 1)
    fig, ax = plt.subplots(figsize=(5, 4.2))
    ax.imshow(norm, cmap="Blues", vmin=0, vmax=1)
    labels = scores["labels"]
    ax.set_xticks(range(len(labels)), labels, rotation=20)
    ax.set_yticks(range(len(labels)), labels)
    for i in range(len(labels)):
        for j in range(len(labels)):
            ax.text(j, i, f"{int(cm[i, j])}\n{norm[i, j]:.2f}", ha="center", va="center",
                    color="white" if norm[i, j] > 0.5 else "black", fontsize=8)
    ax.set_xlabel("predicted")
    ax.set_ylabel("truth")
    ax.set_title(f"{scores['kind']}: leave-one-application-out, macro-F1 {scores['macro_f1']:.3f}")
    fig.tight_layout()
    fig.savefig(out, format="png", dpi=110)
    plt.close(fig)


def _plot_tree(bundle: Bundle, out: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from sklearn.tree import plot_tree
    tree = bundle.pipeline.named_steps["tree"]
    names = list(bundle.pipeline.named_steps["features"].get_feature_names_out())
    fig, ax = plt.subplots(figsize=(16, 8))
    plot_tree(tree, max_depth=3, feature_names=names, class_names=[str(c) for c in tree.classes_],
              filled=True, impurity=False, proportion=True, fontsize=7, ax=ax)
    ax.set_title(f"fitted tree, top 4 levels of {tree.get_depth()} ({tree.get_n_leaves()} leaves)")
    fig.tight_layout()
    fig.savefig(out, format="png", dpi=100)
    plt.close(fig)


def _importances(bundle: Bundle) -> list[tuple[str, float]]:
    tree = bundle.pipeline.named_steps["tree"]
    names = bundle.pipeline.named_steps["features"].get_feature_names_out()
    order = np.argsort(-tree.feature_importances_)
    return [(str(names[i]), float(tree.feature_importances_[i])) for i in order if tree.feature_importances_[i] > 0]


def _plot_importances(items: list[tuple[str, float]], out: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    items = items[:15][::-1]
    fig, ax = plt.subplots(figsize=(7, 5))
    ax.barh([n for n, _ in items], [v for _, v in items], color="tab:blue")
    ax.set_xlabel("importance (entropy decrease, share)")
    ax.set_title("feature importances of the fitted tree")
    fig.tight_layout()
    fig.savefig(out, format="png", dpi=100)
    plt.close(fig)


def write_report(folder: str | os.PathLike[str], bundle: Bundle, scores: dict[str, Any],
                 traces: list[str], command: str) -> Path:
    """Write report.md and its figures into `folder` (created if needed); returns report.md's path."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    figures = ["confusion_matrix.png"]
    _atomic(folder / "confusion_matrix.png", lambda t: _plot_confusion(scores, t))
    importances: list[tuple[str, float]] = []
    if bundle.kind == "tree":
        _atomic(folder / "tree.png", lambda t: _plot_tree(bundle, t))
        importances = _importances(bundle)
        _atomic(folder / "feature_importances.png", lambda t: _plot_importances(importances, t))
        figures += ["tree.png", "feature_importances.png"]
    md = [f"# procsift evaluation: `{bundle.kind}` at {bundle.window_s:g} s windows", "",
          f"Reproduce with: `{command}`", "",
          "Grouped cross-validation: each fold holds out one whole application (`source`), trains on the "
          "rest and labels the held-out windows. Only active (not insufficient), labelled windows count.", ""]
    if scores.get("binary"):
        md += ["`pos` only tells html-serving from the rest, so it is scored on that binary split "
               "(interactive and background windows both count as `background`).", ""]
    md += ["```", format_scores(scores), "```", "", "## Held-out applications", "",
           "| source | label | windows | accuracy |", "|---|---|---:|---:|"]
    md += [f"| {f['source']} | {f['label']} | {f['windows']} | {f['accuracy']:.3f} |" for f in scores["folds"]]
    md += ["", "## Traces", ""] + [f"- `{t}`" for t in traces]
    md += ["", f"Training data sha256 (bundle): `{bundle.metadata.get('training', {}).get('sha256', '?')}`", ""]
    if importances:
        md += ["## Feature importances (bundle's tree, trained on all data)", "",
               "| feature | importance |", "|---|---:|"] + [f"| {n} | {v:.3f} |" for n, v in importances[:15]]
        md.append("")
    md += ["## Figures", ""] + [f"![{f}]({f})" for f in figures] + [""]
    text = "\n".join(md)

    def write_md(tmp: str) -> None:
        Path(tmp).write_text(text, encoding="utf-8")
    _atomic(folder / "report.md", write_md)
    return folder / "report.md"
