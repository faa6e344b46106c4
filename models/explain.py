"""Why a model gave one window its label: the tree's decision path, EM's cluster likelihoods, POS's thresholds."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from sklearn.pipeline import Pipeline

__all__ = ["Explanation", "explain_pipeline"]


@dataclass(frozen=True)
class Explanation:
    """One window's label, its probabilities and the steps that led there."""

    label: str
    proba: dict[str, float]
    steps: list[str]
    details: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        """Plain data for JSON output."""
        return {"label": self.label, "proba": self.proba, "steps": self.steps, "details": self.details}


def _tree_steps(pipe: Pipeline, raw: np.ndarray) -> tuple[list[str], dict[str, Any]]:
    feats = pipe.named_steps["features"]
    tree = pipe.named_steps["tree"]
    x = feats.transform(raw)
    names = feats.get_feature_names_out()
    t = tree.tree_
    steps: list[str] = []
    path = []
    for node in tree.decision_path(x).indices:
        if t.children_left[node] == t.children_right[node]:  # a leaf
            counts = t.value[node][0]
            share = counts / counts.sum() if counts.sum() else counts
            steps.append(f"leaf {node}: " + ", ".join(f"{c} {s:.2f}" for c, s in zip(tree.classes_, share)))
            continue
        f, thr = int(t.feature[node]), float(t.threshold[node])
        v = float(x[0, f])
        side = "<=" if v <= thr else ">"
        steps.append(f"node {node}: {names[f]} = {v:.4g} {side} {thr:.4g}")
        path.append({"node": int(node), "feature": str(names[f]), "value": v, "threshold": thr, "le": v <= thr})
    return steps, {"path": path}


def _em_steps(pipe: Pipeline, raw: np.ndarray) -> tuple[list[str], dict[str, Any]]:
    em = pipe.named_steps["em"]
    x = pipe[:-1].transform(raw)
    ll = em.cluster_log_likelihoods(x)[0]
    resp = em.mixture_.predict_proba(x)[0]
    order = np.argsort(-ll)
    steps = [f"cluster {int(j)} ({em.cluster_labels_[j]}): log-likelihood {ll[j]:.2f}, "
             f"responsibility {resp[j]:.3f}" for j in order[:5]]
    steps.insert(0, f"in cluster {int(order[0])} of {len(ll)} (BIC chose {len(ll)} components)")
    details = {"cluster": int(order[0]), "log_likelihoods": {str(int(j)): float(ll[j]) for j in order},
               "cluster_labels": [str(c) for c in em.cluster_labels_]}
    return steps, details


def _pos_steps(pipe: Pipeline, raw: np.ndarray) -> tuple[list[str], dict[str, Any]]:
    pos = pipe.named_steps["pos"]
    slp, rw = pos.thresholds(raw)
    wait, trans, wakes = float(raw[0, 4]), float(raw[0, 5]), float(raw[0, 6])
    per_wake = trans / wakes if wakes else float("inf")
    steps = [
        f"longest wait {wait / 1e6:.1f} ms {'>' if wait > slp[0] else '<='} SLP {slp[0] / 1e6:.1f} ms",
        f"run/wait cycles per wake-up {per_wake:.2f} {'<=' if per_wake <= rw[0] else '>'} RW {rw[0]:.2f}",
    ]
    return steps, {"slp_ns": float(slp[0]), "rw": float(rw[0]), "wait_ns": wait, "rw_per_wake": per_wake}


def explain_pipeline(kind: str, pipe: Pipeline, raw: np.ndarray) -> Explanation:
    """Explain one window.

    Parameters
    ----------
    raw : ndarray of shape (1, n_input_columns)
    """
    proba = pipe.predict_proba(raw)[0]
    steps, details = {"tree": _tree_steps, "em": _em_steps, "pos": _pos_steps}[kind](pipe, raw)
    label = str(pipe.classes_[int(np.argmax(proba))])
    return Explanation(label, {str(c): float(p) for c, p in zip(pipe.classes_, proba)}, steps, details)
