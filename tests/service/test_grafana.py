"""The shipped Grafana dashboard asks only for series procsift's /metrics really exports."""

from __future__ import annotations

import json
import re
from pathlib import Path

from procsift.service.groupstats import Sample, export
from procsift.service.live import Metrics

DASHBOARD = Path(__file__).resolve().parents[2] / "docs" / "grafana" / "procsift-dashboard.json"
FUNCTIONS = {"sum", "rate", "histogram_quantile", "label_values", "avg", "max", "min", "increase", "irate"}
KEYWORDS = {"by", "without", "on", "ignoring", "and", "or", "unless", "bool", "offset"}


def exported() -> set[str]:
    """Every series name in a real exposition after one window's figures."""
    m = Metrics()
    export(m, {"processes": {"background": 1}}, [Sample((1, 1), "background", 10**9, 10**6, 5)],
           ("interactive", "background", "html-serving"))
    return {ln.split("{")[0].split(" ")[0] for ln in m.render().splitlines() if ln and not ln.startswith("#")}


def expressions(doc: dict) -> list[str]:
    exprs = [t["expr"] for p in doc["panels"] for t in p.get("targets", [])]
    for var in doc.get("templating", {}).get("list", []):
        q = var.get("query")
        if isinstance(q, dict):
            exprs.append(q["query"])
    return exprs


def metric_names(expr: str) -> tuple[set[str], set[str]]:
    """(metric names, function names) in a PromQL expression."""
    bare = re.sub(r"label_values\(([^,]+),\s*\w+\)", r"label_values(\1)", expr)  # (metric, label name)
    bare = re.sub(r'"[^"]*"', "", bare)
    bare = re.sub(r"\{[^}]*\}", "", bare)
    bare = re.sub(r"\[[^\]]*\]", "", bare)
    bare = re.sub(r"by \([^)]*\)|without \([^)]*\)", "", bare)
    names, funcs = set(), set()
    for m in re.finditer(r"[A-Za-z_:][A-Za-z0-9_:]*(\s*\()?", bare):
        word = m.group(0).rstrip("( ")
        if m.group(1):
            funcs.add(word)
        elif word not in KEYWORDS:
            names.add(word.split(",")[0])
    return names, funcs


def test_every_expression_names_an_exported_metric() -> None:
    doc = json.loads(DASHBOARD.read_text())
    have = exported()
    used: set[str] = set()
    for expr in expressions(doc):
        names, funcs = metric_names(expr)
        assert names, f"no metric in {expr!r}"
        assert funcs <= FUNCTIONS, f"unexpected function in {expr!r}: {funcs - FUNCTIONS}"
        assert names <= have, f"{expr!r} names {sorted(names - have)}, which /metrics does not export"
        used |= names
    # the per-label families are what the dashboard is for
    assert {"procsift_group_processes", "procsift_group_cpu_seconds_total", "procsift_group_runq_seconds_total",
            "procsift_group_runq_delay_seconds_bucket"} <= used


def test_the_checker_catches_a_wrong_name() -> None:
    names, _ = metric_names('sum by (label) (rate(procsift_group_cpu_second_total{label="x"}[5m]))')
    assert names == {"procsift_group_cpu_second_total"} and not names <= exported()
