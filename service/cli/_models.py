"""Model verbs: train, evaluate, predict and explain (from trace files)."""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from procsift.collector import read_trace
from procsift.collector.errors import ProcsiftError
from procsift.collector.schema import printable
from procsift.models import (
    MODEL_KINDS, Bundle, Smoother, check_bundle_target, cross_validate, load_bundle, load_traces,
    save_bundle, train_bundle,
)
from procsift.models.training import idle_recording
from procsift.models.report import format_scores, write_report

__all__ = ["register"]


class UsageError(ProcsiftError):
    """The command line asks for something this verb cannot do."""


def _bar(total: int, desc: str) -> Any:
    from tqdm import tqdm
    return tqdm(total=total, desc=desc, unit="step", file=sys.stderr, leave=False,
                disable=not sys.stderr.isatty())


def _load(path: str | None) -> Bundle:
    """Load a bundle, showing a version warning as one plain line."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        bundle = load_bundle(path)
    for w in caught:
        print(f"procsift: warning: {printable(w.message)}", file=sys.stderr)
    return bundle


def _check_folder(path: str) -> None:
    """Make (or find) an output folder and make sure this user can write in it."""
    folder = Path(path)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        probe = folder / f".procsift-probe-{os.getpid()}"
        probe.touch()
        probe.unlink()
    except OSError as err:
        raise UsageError(f"{folder}: cannot write a report there ({err.strerror})") from err


def _split_bundle(paths: list[str]) -> tuple[str | None, list[str]]:
    """`[BUNDLE_DIR] TRACE...`: the first argument is a bundle when it is a folder."""
    if paths and Path(paths[0]).is_dir():
        return paths[0], paths[1:]
    return None, paths


def _cmd_train(args: argparse.Namespace) -> int:
    check_bundle_target(Path(args.output))  # before minutes of training, not after
    bar = _bar(len(args.traces) + 3, f"train {args.model}")
    step = lambda msg: (bar.set_postfix_str(msg), bar.update(1))  # noqa: E731
    traces = load_traces(args.traces, args.window, progress=step, every_offset=True)
    bundle = train_bundle(args.model, traces, progress=step, random_state=args.random_state)
    if not args.no_evaluate and traces.frame["source"].nunique() >= 2:
        bar.total += traces.frame["source"].nunique()
        scores = cross_validate(args.model, traces.frame, args.random_state,
                                progress=lambda i, n, src: step(f"held out {src}") if i < n else None,
                                train_frame=traces.fit_frame)
        bundle.metadata["scores"] = scores
    bar.close()
    out = save_bundle(bundle, args.output)
    tr = bundle.metadata["training"]
    print(f"trained {args.model} on {tr['active_windows']} active windows of {traces.window_s:g} s "
          f"from {len(args.traces)} trace(s); saved {out}")
    if bundle.metadata.get("scores"):
        print(f"leave-one-application-out macro-F1 {bundle.metadata['scores']['macro_f1']:.3f}")
    return 0


def _cmd_evaluate(args: argparse.Namespace) -> int:
    bundle_dir, traces = _split_bundle(args.paths)
    if not traces:
        raise UsageError("evaluate: give at least one TRACE")
    if args.report:
        _check_folder(args.report)  # before the cross-validation, not after
    bundle = _load(bundle_dir)
    ts = load_traces(traces, bundle.window_s, every_offset=True)
    trained_on = bundle.metadata.get("training", {}).get("sha256")
    same = "are" if trained_on == ts.sha256 else "are not"
    rs = int(bundle.metadata.get("training", {}).get("random_state", 0))
    bar = _bar(ts.frame["source"].nunique(), f"evaluate {bundle.kind}")
    scores = cross_validate(bundle.kind, ts.frame, rs,
                            progress=lambda i, n, src: (bar.set_postfix_str(src), bar.update(1)) if i < n else None,
                            train_frame=ts.fit_frame)
    bar.close()
    print(f"these traces {same} the bundle's training data (sha256 {ts.sha256[:12]})", file=sys.stderr)
    if scores.get("untrainable"):
        print(f"procsift: warning: {len(scores['untrainable'])} application(s) could not be held out (the rest "
              f"hold too few labels to train on): {', '.join(scores['untrainable'])}; they count as misses",
              file=sys.stderr)
    if args.report:
        cmd = "procsift evaluate " + " ".join(shlex.quote(a) for a in args.paths) + f" --report {args.report}"
        path = write_report(args.report, bundle, scores, [Path(t).name for t in traces], cmd)
        print(f"wrote {path}", file=sys.stderr)
    if args.json:
        print(json.dumps(scores, indent=2, sort_keys=True))
    else:
        print(f"{bundle.kind} at {bundle.window_s:g} s windows, leave-one-application-out "
              f"over {len(scores['folds'])} applications")
        print(format_scores(scores))
    return 0


def _process_labels(bundle: Bundle, frame: pd.DataFrame, collector: str) -> list[dict[str, Any]]:
    """Per-process smoothed labels over a trace, in time order."""
    labels, proba = bundle.predict_frame(frame, collector)
    sm = Smoother()
    order = np.argsort(frame["t_start"].to_numpy(), kind="stable")
    pid, st = frame["pid"].to_numpy(), frame["start_time"].to_numpy()
    insufficient = frame["insufficient"].to_numpy(dtype=bool)
    for i in order:
        sm.update((int(pid[i]), int(st[i])), str(labels[i]), proba[i], bool(insufficient[i]))
    comm = frame.groupby(["pid", "start_time"])["comm"].last()
    out = []
    for key in sm.keys():
        state = sm.state(key)
        assert state is not None
        p = sm.proba(key)
        out.append({"pid": key[0], "start_time": key[1], "comm": str(comm.get(key, "")),
                    "label": state.label, "windows": state.windows, "changes": state.changes,
                    "proba": None if p is None else {lab: round(float(v), 4) for lab, v in zip(bundle.labels, p)}})
    return out


def _cmd_predict(args: argparse.Namespace) -> int:
    bundle_dir, traces = _split_bundle(args.paths)
    if not traces:
        raise UsageError("predict: give at least one TRACE")
    bundle = _load(bundle_dir)
    results = []
    idle = []
    for t in traces:
        ts = load_traces([t], bundle.window_s, allow_empty=True)
        if ts.frame.empty:  # a valid recording in which nothing was active: nothing to label
            meta = read_trace(t).meta
            idle.append(f"{idle_recording(Path(t).name, meta)}: nothing to label")
            continue
        for row in _process_labels(bundle, ts.frame, ts.collectors[0]):
            results.append({"trace": Path(t).name, **row})
    if args.json:
        print(json.dumps(results, indent=2))
        return 0
    for note in idle:
        print(note)
    if not results:
        return 0
    print(f"{'PID':>7} {'COMM':<16} {'LABEL':<13} {'P':>5} {'WINDOWS':>7}  TRACE")
    for r in sorted(results, key=lambda r: (r["trace"], str(r["label"]), r["pid"])):
        p = r["proba"][r["label"]] if r["proba"] and r["label"] else float("nan")
        print(f"{r['pid']:>7} {printable(r['comm'])[:16]:<16} {str(r['label'] or '-'):<13} {p:>5.2f} {r['windows']:>7}  {r['trace']}")
    return 0


def _cmd_explain(args: argparse.Namespace) -> int:
    paths = list(args.paths)
    if len(paths) == 1 and paths[0].isdigit() and args.pid is None:
        from procsift.service.cli._run import explain_daemon  # noqa: PLC0415
        return explain_daemon(int(paths[0]), as_json=bool(getattr(args, "json", False)))
    if len(paths) > 2:
        raise UsageError("explain takes [BUNDLE_DIR] TRACE --pid N")
    bundle_dir, traces = _split_bundle(paths)
    if len(traces) != 1:
        raise UsageError("explain takes exactly one TRACE")
    if args.pid is None:
        raise UsageError("explain TRACE needs --pid N")
    bundle = _load(bundle_dir)
    ts = load_traces(traces, bundle.window_s)
    rows = ts.frame[ts.frame["pid"] == args.pid]
    if rows.empty:
        raise UsageError(f"pid {args.pid} is not in {traces[0]}")
    latest = rows["start_time"].max()  # a reused PID: explain the newest process
    rows = rows[rows["start_time"] == latest].sort_values("t_start", kind="stable")
    labels, proba = bundle.predict_frame(rows, ts.collectors[0])
    sm = Smoother()
    for lab, p, ins in zip(labels, proba, rows["insufficient"]):
        sm.update(latest, str(lab), p, bool(ins))
    state = sm.state(latest)
    assert state is not None
    active = np.flatnonzero(~rows["insufficient"].to_numpy(dtype=bool))
    last = rows.iloc[int(active[-1])] if len(active) else rows.iloc[-1]
    exp = bundle.explain_row(last)
    behind: list[dict[str, Any]] = [{"t_start": float(r.t_start), "label": str(lab), "insufficient": bool(r.insufficient),
               "proba": {b: round(float(v), 3) for b, v in zip(bundle.labels, p)}}
              for r, lab, p in zip(rows.tail(sm.n).itertuples(), labels[-sm.n:], proba[-sm.n:])]
    if args.json:
        print(json.dumps({"pid": args.pid, "start_time": int(latest), "comm": str(rows["comm"].iloc[-1]),
                          "label": state.label, "changes": state.changes, "windows": behind,
                          "last_window": exp.as_dict()}, indent=2))
        return 0
    print(f"pid {args.pid} ({printable(rows['comm'].iloc[-1])}): {state.label} — {bundle.kind} model, "
          f"{len(rows)} windows of {bundle.window_s:g} s, label changed {state.changes} time(s); "
          f"a label changes when it wins {sm.k} of the last {sm.n} active windows")
    print("windows behind the label:")
    for w in behind:
        probs = " ".join(f"{k}={v:.2f}" for k, v in w["proba"].items())
        flag = "  (insufficient: keeps the label)" if w["insufficient"] else ""
        print(f"  t={w['t_start']:.1f}  {w['label']:<13} {probs}{flag}")
    print(f"last active window (t={float(last['t_start']):.1f}) → {exp.label}:")
    for s in exp.steps:
        print(f"  {s}")
    return 0


_EXAMPLES_TRAIN = """examples:
  procsift train --model tree datasets/data/*.parquet -o mybundle
  procsift train --model em -w 5 datasets/data/*.parquet -o em5"""


def register(sub: Any) -> None:
    """Add train, evaluate, predict and explain to the procsift command."""
    fmt = argparse.RawDescriptionHelpFormatter
    p = sub.add_parser("train", help="train a model on labelled traces and save a bundle",
                       epilog=_EXAMPLES_TRAIN, formatter_class=fmt)
    p.add_argument("--model", choices=MODEL_KINDS, default="tree", help="model kind (default: tree)")
    p.add_argument("traces", nargs="+", metavar="TRACE", help="trace files (.parquet, .csv, .arff)")
    p.add_argument("-o", "--output", required=True, metavar="BUNDLE_DIR", help="bundle folder to write")
    p.add_argument("-w", "--window", type=float, metavar="SECONDS",
                   help="re-aggregate to windows of this length (default: the traces' longest)")
    p.add_argument("--no-evaluate", action="store_true", help="skip the leave-one-application-out scores")
    p.add_argument("--random-state", type=int, default=0, help=argparse.SUPPRESS)
    p.set_defaults(func=_cmd_train)

    p = sub.add_parser("evaluate", help="leave-one-application-out scores of a model on traces",
                       epilog="examples:\n  procsift evaluate datasets/data/*.parquet\n"
                              "  procsift evaluate mybundle datasets/data/*.parquet --report out/",
                       formatter_class=fmt)
    p.add_argument("paths", nargs="+", metavar="[BUNDLE_DIR] TRACE", help="bundle folder (default bundle if "
                   "omitted), then trace files")
    p.add_argument("--report", metavar="DIR", help="write report.md and figures here")
    p.add_argument("--json", action="store_true", help="print the scores as JSON")
    p.set_defaults(func=_cmd_evaluate)

    p = sub.add_parser("predict", help="per-process labels with probabilities for traces",
                       epilog="examples:\n  procsift predict trace.parquet\n  procsift predict mybundle trace.parquet --json",
                       formatter_class=fmt)
    p.add_argument("paths", nargs="+", metavar="[BUNDLE_DIR] TRACE")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=_cmd_predict)

    p = sub.add_parser("explain", help="why a process got its label (decision path, cluster, thresholds)",
                       epilog="examples:\n  procsift explain trace.parquet --pid 1234\n"
                              "  procsift explain mybundle trace.parquet --pid 1234 --json\n"
                              "  procsift explain PID   (asks the running daemon)",
                       formatter_class=fmt)
    p.add_argument("paths", nargs="+", metavar="[BUNDLE_DIR] TRACE | PID")
    p.add_argument("--pid", type=int, help="process to explain")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=_cmd_explain)
