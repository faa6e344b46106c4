"""The shipped datasets: real recordings, labelled, at least five applications per label."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from procsift.collector.schema import LABELS
from procsift.collector.traceio import read_trace
from procsift.datasets.recipes import RECIPES
from procsift.datasets.recipes._run import contenders

DATA = Path(__file__).resolve().parents[2] / "datasets" / "data"


def test_every_recipe_has_a_shipped_trace_of_its_label_and_source() -> None:
    files = {p.stem for p in DATA.glob("*.parquet")}
    assert files >= {r.name for r in RECIPES}
    for r in RECIPES:
        trace = read_trace(DATA / f"{r.name}.parquet")
        assert trace.meta.collector == "bpf" and trace.meta.window_s == pytest.approx(0.5)
        labels = set(trace.frame["label"].dropna())
        assert labels == {r.label}, r.name
        assert set(trace.frame["source"]) == {r.source}


def test_at_least_five_applications_per_label() -> None:
    for label in LABELS:
        assert len({r.source for r in RECIPES if r.label == label}) >= 5, label


def test_shipped_data_stays_small() -> None:
    assert sum(p.stat().st_size for p in DATA.glob("*.parquet")) < 8 << 20


def test_make_datasets_installs_every_recipe_package() -> None:
    makefile = (DATA.parents[1] / "Makefile").read_text()
    decl = makefile.split("DATASET_APT :=", 1)[1].split("\n\n", 1)[0]
    declared = set(decl.replace("\\\n", " ").split("\n", 1)[0].split())
    wanted = {pkg for r in RECIPES for pkg in r.apt}
    assert wanted <= declared, sorted(wanted - declared)


def test_contenders_burn_cpu_and_are_all_ended() -> None:
    with contenders(30, n=2) as owned:
        assert len(owned) == 2
        # Seed 0 opens with 7 s at an 80 % duty cycle (seed 1 with 2.8 s idle): it reaches 0.5 s of
        # CPU within about 0.7 s on an idle machine, later on a busy one; wait for it, not for a time.
        deadline = time.monotonic() + 25
        while _cpu_s(owned[0].pid) <= 0.5 and time.monotonic() < deadline:
            time.sleep(0.1)
        cpu = _cpu_s(owned[0].pid)
        assert all(c.proc.poll() is None for c in owned)
    assert cpu > 0.5
    assert all(c.proc.poll() is not None for c in owned)


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
