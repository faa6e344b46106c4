"""`procsift trace info|head|convert`: look into trace files and convert them."""

from __future__ import annotations

import argparse
import json
from typing import Any

import pandas as pd

from procsift.collector import read_trace, write_trace
from procsift.collector.schema import (
    IDENTITY_COLUMNS, LABELS, SCHED_COLUMNS,
)
from procsift.collector.schema import printable
from procsift.service.cli._args import nonneg_int

__all__ = ["register", "trace_summary"]

EXAMPLES = """examples:
  procsift trace info web.parquet
  procsift trace info --json web.parquet
  procsift trace head -n 5 web.parquet
  procsift trace head --json web.parquet   (rows as JSON, as POST /v1/predict takes them)
  procsift trace convert web.parquet -o web.arff      (Weka)
  procsift trace convert web.csv -o web.parquet
"""


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add the `trace` verb and its sub-verbs."""
    p = sub.add_parser("trace", help="summarise, show and convert trace files", epilog=EXAMPLES,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    tsub = p.add_subparsers(dest="trace_verb", metavar="info|head|convert", required=True)
    info = tsub.add_parser("info", help="rows, processes, labels, window, schema version")
    info.add_argument("file")
    info.add_argument("--json", action="store_true", help="machine-readable output")
    info.set_defaults(func=cmd_info)
    head = tsub.add_parser("head", help="the first rows")
    head.add_argument("file")
    head.add_argument("-n", type=nonneg_int, default=10, help="rows to show (default 10)")
    head.add_argument("--json", action="store_true",
                      help="the rows as a JSON array, in the form `top --json` prints (POST /v1/predict takes it)")
    head.set_defaults(func=cmd_head)
    conv = tsub.add_parser("convert", help="convert between Parquet, CSV and ARFF (by extension)")
    conv.add_argument("file")
    conv.add_argument("-o", "--output", required=True, help="output file (.parquet, .csv, .arff)")
    conv.set_defaults(func=cmd_convert)


def trace_summary(path: str) -> dict[str, Any]:
    """What `trace info` reports about a trace file."""
    trace = read_trace(path)
    f, m = trace.frame, trace.meta
    labels = f["label"].dropna().value_counts().to_dict()
    return {
        "file": str(path),
        "schema_version": m.schema_version,
        "collector": m.collector,
        "collector_version": m.collector_version,
        "window_s": m.window_s,
        "rows": int(len(f)),
        "processes": int(f[["pid", "start_time"]].drop_duplicates().shape[0]) if len(f) else 0,
        "labels": {k: int(labels.get(k, 0)) for k in LABELS},
        "unlabelled_rows": int(f["label"].isna().sum()),
        "sources": sorted(str(s) for s in f["source"].dropna().unique()),
        "insufficient_rows": int(f["insufficient"].sum()),
        "syscalls": int(f["syscalls"].sum()),
        "t_first": float(f["t_start"].min()) if len(f) else None,
        "t_last": float((f["t_start"] + f["dur_s"]).max()) if len(f) else None,
        "host": m.host,
    }


def cmd_info(args: argparse.Namespace) -> int:
    s = trace_summary(args.file)
    if args.json:
        print(json.dumps(s, indent=2))
        return 0
    span = (s["t_last"] - s["t_first"]) if s["rows"] else 0.0
    print(f"file            {s['file']}")
    print(f"schema version  {s['schema_version']}  (collector {s['collector']} {s['collector_version']})")
    print(f"window          {s['window_s']:g} s, {span:.1f} s recorded")
    print(f"rows            {s['rows']} ({s['insufficient_rows']} too quiet to judge)")
    print(f"processes       {s['processes']}")
    print(f"syscalls        {s['syscalls']:,}")
    print("labels          " + ", ".join(f"{k} {v}" for k, v in s["labels"].items())
          + f", unlabelled {s['unlabelled_rows']}")
    print(f"sources         {printable(', '.join(s['sources'])) or '-'}")
    host = s["host"]
    print(printable(f"host            {host.get('hostname', '?')}, kernel {host.get('kernel', '?')}, "
                    f"{host.get('ncpu', '?')} CPUs"))
    return 0


def row_json(record: dict[str, Any]) -> dict[str, Any]:
    """A trace row (sys_*/cat_* columns) in the JSON form `top --json` prints: syscalls by name."""
    out = {k: v for k, v in record.items() if not k.startswith(("sys_", "cat_"))}
    counts = {k[4:]: v for k, v in record.items() if k.startswith("sys_") and v}
    out["syscall_counts"] = dict(sorted(counts.items(), key=lambda kv: -kv[1]))
    out["categories"] = {k[4:]: v for k, v in record.items() if k.startswith("cat_")}
    return out


def cmd_head(args: argparse.Namespace) -> int:
    f = read_trace(args.file).frame.head(max(args.n, 0))
    if args.json:
        records = json.loads(f.to_json(orient="records", double_precision=15))  # numpy scalars become JSON numbers
        print(json.dumps([row_json(r) for r in records]))
        return 0
    cols = ["t_start", "pid", "comm"] + [c for c in SCHED_COLUMNS if c not in ("wakes_others",)] \
        + ["syscalls", "label", "source"]
    cols = [c for c in cols if c in IDENTITY_COLUMNS + SCHED_COLUMNS or c in f.columns]
    shown = f[cols].copy()
    for c in ("comm", "label", "source"):
        shown[c] = shown[c].map(lambda v: v if v is None else printable(v))
    with pd.option_context("display.width", 200, "display.max_columns", 30):
        print(shown.to_string(index=False))
    return 0


def cmd_convert(args: argparse.Namespace) -> int:
    trace = read_trace(args.file)
    out = write_trace(args.output, trace.frame, trace.meta)
    print(f"wrote {out}: {len(trace.frame)} rows")
    return 0
