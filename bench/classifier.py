"""Classifier benchmark: held-out macro-F1 per window length, throughput, latency, label settling and flips.

Usage: .venv/bin/python bench/classifier.py [TRACE...] [--models tree,em,pos] [--windows 0.5,1,2,5,10] [--unseen SOURCE,...]
Defaults to the shipped datasets (datasets/data/*.parquet, recorded with 0.5 s windows).
Prints a table and writes bench/results/classifier.json.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from procsift.collector.schema import LABELS
from procsift.models import MODEL_KINDS, Smoother, cross_validate, load_traces, train_bundle
from procsift.models.evaluation import score_predictions
from procsift.models.kinds import fit_pipeline, input_columns, trainable_rows

ROOT = Path(__file__).resolve().parent.parent
# Recorded (2026-11-23 11:59-12:13) after the tree's features were chosen on the other 30.
UNSEEN = ("webfs", "uvicorn", "webfs-images", "uvicorn-images", "pigz", "bzip2", "lua", "ed", "mc", "w3m")


def f1_sweep(paths: list[Path], kinds: list[str], windows: list[float]) -> list[dict[str, Any]]:
    """Leave-one-application-out macro-F1 of each model at each window length."""
    out = []
    for w in windows:
        ts = load_traces(paths, w, every_offset=True)
        for kind in kinds:
            t0 = time.perf_counter()
            s = cross_validate(kind, ts.frame, train_frame=ts.fit_frame)
            out.append({"window_s": w, "model": kind, "macro_f1": s["macro_f1"],
                        "macro_f1_ci95": s["macro_f1_ci95"],
                        "smoothed_macro_f1": s["smoothed_macro_f1"], "accuracy": s["accuracy"],
                        "windows": s["windows"], "binary": s["binary"], "seconds": time.perf_counter() - t0,
                        "per_class_f1": {k: v["f1"] for k, v in s["per_class"].items()}})
            lo, hi = s["macro_f1_ci95"]
            print(f"  {kind:<5} {w:>5g} s  macro-F1 {s['macro_f1']:.3f} ({lo:.3f}-{hi:.3f})"
                  f"  smoothed {s['smoothed_macro_f1']:.3f}"
                  f"  ({s['windows']} windows, {time.perf_counter() - t0:.1f} s)", file=sys.stderr)
    return out


def phases(paths: list[Path], windows: list[float]) -> list[dict[str, Any]]:
    """The tree's leave-one-application-out macro-F1 with the long windows cut at every offset.

    A 5 s window made from 0.5 s recordings may start at any of ten offsets; the sweep scores
    the first. Each offset is an equally valid data set, so the spread says how much the
    sweep's single figure owes to where the held-out windows happen to start. The folds learn
    from every offset (as `procsift train` does), so only the held-out cut changes.
    """
    out = []
    cols = list(input_columns("tree"))
    for w in windows:
        ts = load_traces(paths, w, every_offset=True)
        n = ts.offsets
        if n < 2:
            continue
        cuts = [trainable_rows(c) for c in ts.cuts]
        cuts = [c[c["source"].notna()] for c in cuts]
        preds = [np.empty(len(c), dtype=object) for c in cuts]
        for src in sorted(cuts[0]["source"].unique()):  # one fit per fold serves every cut
            pipe = fit_pipeline("tree", ts.fit_frame[ts.fit_frame["source"] != src])
            for c, p in zip(cuts, preds):
                test = (c["source"] == src).to_numpy()
                p[test] = pipe.predict(c.loc[test, cols].to_numpy(dtype=np.float64))
        f1 = []
        for c, p in zip(cuts, preds):
            truth = c["label"].to_numpy(dtype=object)
            f1.append(score_predictions(truth, p, [lab for lab in LABELS if lab in set(truth)])["macro_f1"])
        out.append({"window_s": w, "macro_f1": f1, "median": float(np.median(f1)),
                    "min": float(min(f1)), "max": float(max(f1)), "at_least_0_95": int(sum(x >= 0.95 for x in f1))})
        print(f"  tree {w:>5g} s at {n} offsets: median {np.median(f1):.3f}, {min(f1):.3f}-{max(f1):.3f}",
              file=sys.stderr)
    return out


def unseen(paths: list[Path], sources: list[str], windows: list[float]) -> list[dict[str, Any]]:
    """Train the tree on every application but `sources`, score it on those (one split, not LOAO).

    Used for applications recorded after the features were chosen: the closest thing the
    data has to a test set nobody looked at while designing the model.
    """
    out = []
    for w in windows:
        ts = load_traces(paths, w, every_offset=True)
        rows = trainable_rows(ts.frame)
        rows = rows[rows["source"].notna()]
        test = rows["source"].isin(sources).to_numpy()
        missing = set(sources) - set(rows.loc[test, "source"])
        if missing:
            raise SystemExit(f"no labelled windows for: {', '.join(sorted(missing))}")
        pipe = fit_pipeline("tree", ts.fit_frame[~ts.fit_frame["source"].isin(sources)])
        pred = pipe.predict(rows.loc[test, list(input_columns("tree"))].to_numpy(dtype=np.float64))
        truth = rows.loc[test, "label"].to_numpy(dtype=object)
        s = score_predictions(truth, pred, [lab for lab in LABELS if lab in set(truth)])
        held = rows.loc[test, "source"].to_numpy(dtype=object)
        per_app = {src: float(np.mean(pred[held == src] == truth[held == src])) for src in sorted(sources)}
        out.append({"window_s": w, "macro_f1": s["macro_f1"], "accuracy": s["accuracy"], "windows": s["windows"],
                    "per_application_accuracy": per_app})
        print(f"  unseen {w:>5g} s  macro-F1 {s['macro_f1']:.3f}  accuracy {s['accuracy']:.3f}"
              f"  ({s['windows']} windows)", file=sys.stderr)
    return out


def speed(paths: list[Path], kinds: list[str], window: float, repeats: int = 5) -> list[dict[str, Any]]:
    """Batch windows/s (>= 100k rows per batch) and single-window latency, per model."""
    ts = load_traces(paths, window, every_offset=True)
    frame = ts.frame[~ts.frame["insufficient"]].reset_index(drop=True)
    reps = max(1, int(np.ceil(100_000 / len(frame))))
    big = pd.concat([frame] * reps, ignore_index=True)
    records = frame.sample(min(1000, len(frame)), random_state=0).to_dict("records")
    out = []
    for kind in kinds:
        bundle = train_bundle(kind, ts)
        batch = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            bundle.predict_frame(big, collector="bpf")
            batch.append(len(big) / (time.perf_counter() - t0))
        lat = []
        for rec in records:
            t0 = time.perf_counter()
            bundle.predict_row(rec, collector="bpf")
            lat.append(time.perf_counter() - t0)
        lat_us = np.array(lat) * 1e6
        out.append({"model": kind, "batch_rows": len(big), "batch_windows_per_s": statistics.median(batch),
                    "single_p50_us": float(np.percentile(lat_us, 50)),
                    "single_p99_us": float(np.percentile(lat_us, 99)), "single_calls": len(lat)})
    return out


def settling(paths: list[Path], window: float, k: int = 2, n: int = 3) -> dict[str, Any]:
    """Label stability of the tree on held-out applications, through the Smoother.

    Steady state: label changes per process-minute over each held-out application's own
    processes. Settling: real recorded windows of a process of one label followed by those
    of a process of another label under one key (a spliced change of behaviour); windows
    from the change until the smoothed label is the new truth. Spliced twice: from the second
    process's first windows (its start-up included: the figures kept since the first run) and
    from a random point after its third window (a running process changing what it does).
    """
    ts = load_traces(paths, window, every_offset=True)
    frame = ts.frame[ts.frame["label"].notna() & ts.frame["source"].notna()].reset_index(drop=True)
    preds = np.empty(len(frame), dtype=object)
    for src in sorted(frame["source"].unique()):
        test = (frame["source"] == src).to_numpy()
        fold = dataclasses.replace(ts, frame=frame[~test], cuts=tuple(c[c["source"] != src] for c in ts.cuts))
        bundle = train_bundle("tree", fold)
        preds[test], _ = bundle.predict_frame(frame[test], collector="bpf")
    frame["pred"] = preds
    changes, minutes, raw_changes = 0, 0.0, 0
    streams = []
    for key, g in frame.sort_values("t_start").groupby(["source", "pid", "start_time"]):
        sm = Smoother(k, n)
        prev = None
        for lab, ins in zip(g["pred"], g["insufficient"]):
            sm.update(key, lab, None, bool(ins))
            if not ins:
                raw_changes += prev is not None and lab != prev
                prev = lab
        st = sm.state(key)
        assert st is not None
        changes += st.changes
        minutes += len(g) * window / 60
        active = g[~g["insufficient"]]
        if len(active) >= 10:
            streams.append((str(g["label"].iloc[0]), active["pred"].tolist()))
    delays: list[int | None] = []
    steady: list[int | None] = []
    rng = np.random.default_rng(0)
    for _ in range(300):
        a, b = rng.choice(len(streams), 2, replace=False)
        (la, pa), (lb, pb) = streams[a], streams[b]
        if la == lb:
            continue
        # From the new process's first windows (its start-up included), and from a random
        # point after them (a running process that starts doing something else).
        for out, start in ((delays, 0), (steady, int(rng.integers(3, len(pb) - 2)))):
            sm = Smoother(k, n)
            for lab in pa[-10:]:
                sm.update("x", lab)
            out.append(next((i for i, lab in enumerate(pb[start:start + 30], 1) if sm.update("x", lab) == lb),
                            None))
    settled = [d for d in delays if d is not None]
    return {
        "settled_fraction": len(settled) / len(delays) if delays else None,
        "settled_within_2_of_settled": float(np.mean([d <= 2 for d in settled])) if settled else None,
        "window_s": window, "k": k, "n": n, "process_minutes": minutes,
        "smoothed_flips_per_process_minute": changes / minutes if minutes else float("nan"),
        "raw_flips_per_process_minute": raw_changes / minutes if minutes else float("nan"),
        "splices": len(delays), "settled": len(settled),
        "settle_windows_median": float(np.median(settled)) if settled else None,
        "settle_within_2_windows": float(np.mean([d is not None and d <= 2 for d in delays])) if delays else None,
        "settle_within_2_windows_steady": float(np.mean([d is not None and d <= 2 for d in steady])) if steady else None,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("traces", nargs="*", type=Path)
    ap.add_argument("--models", default=",".join(MODEL_KINDS))
    ap.add_argument("--windows", default="0.5,1,2,5,10")
    ap.add_argument("--speed-window", type=float, default=1.0)
    ap.add_argument("--skip-sweep", action="store_true", help="also skips the window-offset spread")
    ap.add_argument("--unseen", default=",".join(UNSEEN), metavar="SOURCE,...",
                    help="applications to hold out together for the unseen-applications test ('' to skip)")
    ap.add_argument("-o", "--output", type=Path, default=ROOT / "bench" / "results" / "classifier.json")
    args = ap.parse_args()
    paths = args.traces or sorted((ROOT / "datasets" / "data").glob("*.parquet"))
    kinds = args.models.split(",")
    windows = [float(w) for w in args.windows.split(",")]
    result: dict[str, Any] = {"host": platform.node(), "cpus": os.cpu_count(), "traces": [p.name for p in paths],
                              "started": time.time()}
    print("speed ...", file=sys.stderr)
    result["speed"] = speed(paths, kinds, args.speed_window)
    print("settling ...", file=sys.stderr)
    result["settling"] = [settling(paths, w, k, n) for w in (1.0, 2.0, 5.0) for k, n in ((2, 3), (3, 5))]
    if not args.skip_sweep:
        print("window-length sweep ...", file=sys.stderr)
        result["sweep"] = f1_sweep(paths, kinds, windows)
        if "tree" in kinds:
            print("window offsets (tree) ...", file=sys.stderr)
            result["phases"] = phases(paths, windows)
    elif args.output.exists():  # keep the last sweep's figures beside fresh speed/settling ones
        previous = json.loads(args.output.read_text())
        for key in ("sweep", "phases"):
            if key in previous:
                result[key] = previous[key]
        result["sweep_started"] = previous.get("started")
    if args.unseen:
        print("unseen applications ...", file=sys.stderr)
        result["unseen"] = {"sources": args.unseen.split(","), "by_window": unseen(paths, args.unseen.split(","), windows)}
    args.output.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=args.output.parent, suffix=".tmp")
    with os.fdopen(fd, "w") as fh:
        json.dump(result, fh, indent=2)
    os.replace(tmp, args.output)

    print(f"{'model':<6} {'batch windows/s':>16} {'single p50 us':>14} {'single p99 us':>14}")
    for s in result["speed"]:
        print(f"{s['model']:<6} {s['batch_windows_per_s']:>16,.0f} {s['single_p50_us']:>14.1f} {s['single_p99_us']:>14.1f}")
    for st in result["settling"]:
        print(f"settling @ {st['window_s']:g} s (k={st['k']} of n={st['n']}): flips/process-minute smoothed "
              f"{st['smoothed_flips_per_process_minute']:.3f} (raw {st['raw_flips_per_process_minute']:.3f}); "
              f"settled in {st['settled_fraction']:.0%} of {st['splices']} spliced changes, "
              f"{st['settled_within_2_of_settled']:.0%} of those within 2 windows "
              f"(all within 2: {st['settle_within_2_windows']:.0%}; "
              f"from a running process: {st['settle_within_2_windows_steady']:.0%})")
    if "sweep" in result:
        print(f"{'model':<6} " + " ".join(f"{w:>7g}s" for w in windows) + "   (leave-one-application-out macro-F1)")
        for kind in kinds:
            row = {r["window_s"]: r["macro_f1"] for r in result["sweep"] if r["model"] == kind}  # noqa: E501
            print(f"{kind:<6} " + " ".join(f"{row.get(w, float('nan')):>8.3f}" for w in windows))
        print("95% interval over resampled applications:")
        for kind in kinds:
            ci = {r["window_s"]: r.get("macro_f1_ci95") for r in result["sweep"] if r["model"] == kind}
            print(f"{kind:<6} " + " ".join(f"{ci[w][0]:.2f}-{ci[w][1]:.2f}".rjust(9) if ci.get(w) else " " * 9
                                          for w in windows))
    for ph in result.get("phases", []):
        print(f"tree @ {ph['window_s']:g} s, windows cut at each of {len(ph['macro_f1'])} offsets: median "
              f"{ph['median']:.3f}, range {ph['min']:.3f}-{ph['max']:.3f}, >= 0.95 at {ph['at_least_0_95']}")
    if "unseen" in result:
        print(f"tree trained without {', '.join(result['unseen']['sources'])}, scored on them:")
        print("       " + " ".join(f"{r['window_s']:>7g}s" for r in result["unseen"]["by_window"]))
        print("macro-F1 " + " ".join(f"{r['macro_f1']:>7.3f}" for r in result["unseen"]["by_window"]))
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
