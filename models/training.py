"""Loading labelled traces into one frame, and training a bundle on them."""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from procsift.collector.traceio import TraceMeta, read_trace
from procsift.models.aggregate import reaggregate, reaggregate_cuts
from procsift.models.bundle import Bundle, build_metadata, file_sha256
from procsift.models.errors import TrainingDataError
from procsift.models.kinds import fit_fallback, fit_pipeline, trainable_rows

__all__ = ["TraceSet", "load_traces", "train_bundle", "idle_recording"]

Progress = Callable[[str], None]


@dataclass(frozen=True)
class TraceSet:
    """Traces loaded and brought to one window length, with what identifies them."""

    frame: pd.DataFrame
    window_s: float
    collectors: tuple[str, ...]
    files: list[dict[str, Any]] = field(default_factory=list)
    cuts: tuple[pd.DataFrame, ...] = ()
    """When loaded with `every_offset`: cut k is every trace's long windows started k short
    windows later (`reaggregate_cuts`); cut 0 is `frame` when `phase` was 0."""

    @cached_property
    def fit_frame(self) -> pd.DataFrame:
        """What a model learns from: every cut stacked when loaded so, else `frame`."""
        return pd.concat(self.cuts, ignore_index=True) if self.cuts else self.frame

    @property
    def offsets(self) -> int:
        """How many cuts of the recordings `fit_frame` holds (1: just `frame`)."""
        return max(len(self.cuts), 1)

    @property
    def sha256(self) -> str:
        """One hash over every file's sha256 (in the order given): the training data's identity."""
        return hashlib.sha256("".join(f["sha256"] for f in self.files).encode()).hexdigest()


def idle_recording(name: str, meta: TraceMeta) -> str:
    """What a valid trace without a single row is: a recording in which no process was active."""
    length = f"{meta.duration_s:g} s " if meta.duration_s else ""
    return (f"{name} is a valid {length}recording ({meta.collector} collector, {meta.window_s:g} s windows) "
            "in which no process was active")


def load_traces(paths: Sequence[str | os.PathLike[str]], window_s: float | None = None,
                progress: Progress | None = None, phase: int = 0, every_offset: bool = False,
                allow_empty: bool = False) -> TraceSet:
    """Read traces and re-aggregate them to `window_s` (None: the longest window among them).

    `phase`: skip each trace's first `phase` windows, so the long windows start there (see
    `reaggregate`). `every_offset`: also cut the long windows at every possible offset, as
    `cuts` (what training then learns from, `fit_frame`; see `reaggregate_cuts`).
    `allow_empty`: a set of recordings in which nothing was active is an empty TraceSet, not
    a TrainingDataError (for `predict`, which then has nothing to label).
    """
    if not paths:
        raise TrainingDataError("no trace files given")
    loaded = []
    for p in paths:
        if progress:
            progress(f"reading {Path(p).name}")
        trace = read_trace(p)
        loaded.append((Path(p), trace))
    target = window_s if window_s is not None else max(t.meta.window_s for _, t in loaded)
    frames, files, per_trace = [], [], []
    for p, trace in loaded:
        cuts = reaggregate_cuts(trace.frame, trace.meta.window_s, target) if every_offset else []
        per_trace.append(cuts)
        frame = cuts[phase] if phase < len(cuts) else reaggregate(trace.frame, trace.meta.window_s, target, phase)
        frames.append(frame)
        files.append({"name": p.name, "sha256": file_sha256(p), "windows": int(len(trace.frame)),
                      "window_s": trace.meta.window_s, "collector": trace.meta.collector})
    frame = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    if frame.empty:
        if allow_empty:
            return TraceSet(frame, float(target), tuple(sorted({t.meta.collector for _, t in loaded})), files)
        raise TrainingDataError("the traces hold no windows: " + "; ".join(
            idle_recording(p.name, t.meta) for p, t in loaded))
    cuts = tuple(pd.concat([c[k] for c in per_trace if k < len(c)], ignore_index=True)
                 for k in range(max(map(len, per_trace))))
    return TraceSet(frame, float(target), tuple(sorted({t.meta.collector for _, t in loaded})), files, cuts)


def _summary(frame: pd.DataFrame) -> dict[str, Any]:
    rows = trainable_rows(frame, need_labels=False)
    labelled = rows[rows["label"].notna()]
    return {
        "windows": int(len(frame)), "active_windows": int(len(rows)),
        "labelled_windows": {str(k): int(v) for k, v in labelled["label"].value_counts().sort_index().items()},
        "sources": sorted(str(s) for s in labelled["source"].dropna().unique()),
    }


def train_bundle(kind: str, traces: TraceSet, progress: Progress | None = None,
                 random_state: int = 0) -> Bundle:
    """Fit a model of `kind` (plus the /proc fallback tree) on a TraceSet; metadata has no scores yet.

    The models learn from `traces.fit_frame` (every offset of the long windows, when loaded so).
    """
    frame = traces.fit_frame
    if "proc" in traces.collectors or (frame["syscalls"].to_numpy() == 0).all():
        raise TrainingDataError("the traces have no syscall counts (the /proc collector); "
                                "train on traces recorded with BPF")
    if kind != "em" and frame["label"].notna().sum() == 0:
        raise TrainingDataError(f"the traces carry no labels; '{kind}' learns from labelled windows "
                                "(only 'em' runs unlabelled)")
    started = time.time()
    if progress:
        progress(f"fitting {kind}")
    pipe = fit_pipeline(kind, frame, random_state)
    if progress:
        progress("fitting the /proc fallback tree")
    fallback = fit_fallback(frame, random_state) if frame["label"].notna().any() else None
    training = {**_summary(traces.frame), "offsets": traces.offsets, "fit_windows": int(len(frame)),
                "files": traces.files, "sha256": traces.sha256,
                "fit_seconds": round(time.time() - started, 3), "random_state": random_state}
    if kind == "em":
        em = pipe.named_steps["em"]
        training["bic"] = {str(k): v for k, v in em.bic_.items()}
        training["components"] = int(em.mixture_.n_components)
    if kind == "pos":
        training["slp_ns"] = float(pipe.named_steps["pos"].slp_)
        training["rw"] = float(pipe.named_steps["pos"].rw_)
    meta = build_metadata(kind, pipe, fallback, traces.window_s, training)
    return Bundle(kind, pipe, fallback, meta)


def labels_array(frame: pd.DataFrame) -> np.ndarray:
    """The label column as an object array (None where unlabelled)."""
    return frame["label"].to_numpy(dtype=object)
