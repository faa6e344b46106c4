"""Property-based fuzzing of the policy loader and the journal loader. A policy is either refused
with one PolicyError or planned without error; a journal is either refused with one JournalError
or recovered (dry run) without error. Time-bounded (max_examples); counts in fuzz_tally."""

from __future__ import annotations

import collections
import copy
import json
import re
import tomllib
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from procsift.collector.errors import ProcsiftError
from procsift.distributor import (
    Applier, JournalError, PolicyError, PlannerState, ProcessView, Psi, SystemView, load_policy, parse_policy, plan,
)
from procsift.distributor.journal import Journal

from .test_journal_validation import ENTRY
from .test_policy import policy_text

FUZZ = settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))
ONLINE = (0, 1)
SPECIAL = [0, 1, -1, 19, 20, -21, 99, 2**31, 2**63 - 1, -(2**63), 0.5, float("nan"), float("inf"), "", "all", "0",
           "0-1", "0-999", "1-0", "0-99999999", "5,3,1", "0-3,6", "interactive", "background", "html-serving",
           "cluster-3", "fast", "slow", "nope", "idle", "batch", "realtime", "best-effort", "other", "fifo", "auto",
           "cgroup", "none", "autogroup", "fair-share", "partition", "html-first", "deadline", True, False, [], {},
           [1, {}], ["fast"], "a" * 5000, "*", "sshd*", "\x00"]
SCALAR = st.one_of(st.sampled_from(SPECIAL), st.integers(-(2**64), 2**64), st.floats(), st.text(max_size=10),
                   st.booleans())
VALUE = st.recursive(SCALAR, lambda kids: st.lists(kids, max_size=3) | st.dictionaries(
    st.text(min_size=1, max_size=6), kids, max_size=3), max_leaves=6)
PATHS = [("policy", "kind"), ("policy", "backend"), ("policy", "min_probability"), ("policy", "extra"),
         ("profiles", "fast", "nice"), ("profiles", "fast", "cpus"), ("profiles", "fast", "slice_us"),
         ("profiles", "slow", "io_class"), ("profiles", "slow", "io_level"), ("profiles", "slow", "sched_policy"),
         ("profiles", "slow", "cpu_weight"), ("profiles", "slow", "cpu_idle"), ("profiles", "fast"),
         ("profiles", "new"), ("profiles",), ("labels", "interactive"), ("labels", "html-serving"),
         ("labels", "cluster-1"), ("labels", "weird"), ("labels",), ("exceptions",), ("partition", "reserved_cpus"),
         ("partition", "reserved_groups"), ("html-first", "group"), ("html-first", "cpu_on"),
         ("html-first", "cpu_boost"), ("deadline", "ceiling"), ("deadline", "target_ms"),
         ("deadline", "target_ms", "interactive"), ("deadline", "nice_by_urgency"), ("deadline", "slice_us_by_urgency"),
         ("fair-share", "x"), ("policy",)]
KIND_TABLES = {
    "fair-share": "",
    "partition": "[partition]\nreserved_groups = ['html-serving']\nreserved_cpus = 1\n",
    "html-first": "[html-first]\ncpu_boost = 'fast'\nio_boost = 'fast'\n",
    "deadline": "[deadline]\nceiling = 4\nnice_by_urgency = [0, -5, -10]\n[deadline.target_ms]\ninteractive = 10\n",
}


def toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return "nan" if v != v else ("inf" if v > 0 else "-inf") if v in (float("inf"), float("-inf")) else repr(v)
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, list):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    return "{ " + ", ".join(f"{toml_key(k)} = {toml_value(x)}" for k, x in v.items()) + " }"


def toml_key(k: str) -> str:
    return k if re.fullmatch(r"[A-Za-z0-9_-]+", k) else json.dumps(k)


def to_toml(doc: dict[str, Any]) -> str:
    """A minimal TOML writer: scalars first, then one [table] per dict, [[array]] per list of dicts."""
    lines = [f"{toml_key(k)} = {toml_value(v)}" for k, v in doc.items() if not isinstance(v, dict)
             and not (isinstance(v, list) and v and all(isinstance(x, dict) for x in v))]
    for k, v in doc.items():
        if isinstance(v, dict):
            lines.append(f"[{toml_key(k)}]")
            lines += [f"{toml_key(a)} = {toml_value(b)}" for a, b in v.items()]
        elif isinstance(v, list) and v and all(isinstance(x, dict) for x in v):
            for x in v:
                lines.append(f"[[{toml_key(k)}]]")
                lines += [f"{toml_key(a)} = {toml_value(b)}" for a, b in x.items()]
    return "\n".join(lines) + "\n"


VIEWS = [ProcessView(pid=100 + i, start_time=5, comm=f"p{i}", label=label, probability=0.9, autogroup=f"/ag-{i % 2}")
         for i, label in enumerate(["interactive", "background", "html-serving", "cluster-1", None])]


def check_policy(text: str, tally: collections.Counter[str], name: str) -> None:
    try:
        policy = parse_policy(text, "p.toml", online=ONLINE)
    except PolicyError:
        tally[f"{name}: refused with a PolicyError"] += 1
        return
    tally[f"{name}: accepted"] += 1
    busy = Psi(some_avg10=50.0, some_avg60=40.0, some_avg300=30.0, some_total_us=10**6, full_avg10=20.0)
    system = SystemView(online_cpus=ONLINE, psi_cpu=busy, psi_io=busy)
    state = PlannerState()
    for _ in range(3):  # the planner may trust all it was given
        state = plan(policy, VIEWS, system, state).state


@FUZZ
@given(kind=st.sampled_from(sorted(KIND_TABLES)),
       edits=st.lists(st.tuples(st.sampled_from(PATHS), st.one_of(st.just(...), VALUE)), min_size=1, max_size=3),
       exceptions=st.lists(st.dictionaries(st.sampled_from(["comm", "exe", "cgroup", "uid", "pid"]), SCALAR,
                                           max_size=2), max_size=2))
def test_hostile_policy_values(fuzz_tally: collections.Counter[str], kind: str,
                               edits: list[tuple[tuple[str, ...], Any]], exceptions: list[dict[str, Any]]) -> None:
    doc = tomllib.loads(policy_text(kind, KIND_TABLES[kind]))
    if exceptions:
        doc["exceptions"] = exceptions
    for path, value in edits:
        d: Any = doc
        for key in path[:-1]:
            if not isinstance(d, dict):
                break
            d = d.setdefault(key, {})
        if isinstance(d, dict):
            if value is ...:
                d.pop(path[-1], None)
            else:
                d[path[-1]] = value
    fuzz_tally["policy values"] += 1
    check_policy(to_toml(doc), fuzz_tally, "policy values")


@FUZZ
@given(kind=st.sampled_from(sorted(KIND_TABLES)), mutations=st.lists(
    st.tuples(st.sampled_from(["insert", "delete", "dup", "swap"]), st.integers(0, 10**5),
              st.text(alphabet=st.sampled_from(list("[]{}=\"',.-#\n 0123456789abcxyz_\\\t")), max_size=6)),
    min_size=1, max_size=4))
def test_damaged_policy_text(fuzz_tally: collections.Counter[str], kind: str,
                             mutations: list[tuple[str, int, str]]) -> None:
    text = policy_text(kind, KIND_TABLES[kind])
    for op, where, blob in mutations:
        i = where % (len(text) + 1)
        if op == "insert":
            text = text[:i] + blob + text[i:]
        elif op == "delete":
            text = text[:i] + text[i + len(blob) + 1:]
        elif op == "dup":
            lines = text.splitlines(keepends=True)
            j = where % max(len(lines), 1)
            text = "".join(lines[:j + 1] + lines[j:j + 1] + lines[j + 1:])
        else:
            lines = text.splitlines(keepends=True)
            j, k = where % max(len(lines), 1), (where // 7) % max(len(lines), 1)
            lines[j], lines[k] = lines[k], lines[j]
            text = "".join(lines)
    fuzz_tally["policy text"] += 1
    check_policy(text, fuzz_tally, "policy text")


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.binary(max_size=300))
def test_policy_files_of_any_bytes(tmp_path_factory: pytest.TempPathFactory,
                                   fuzz_tally: collections.Counter[str], data: bytes) -> None:
    path = tmp_path_factory.getbasetemp() / "fuzz-policy.toml"
    path.write_bytes(data)
    fuzz_tally["policy bytes"] += 1
    try:
        load_policy(path, online=ONLINE)
        fuzz_tally["policy bytes: accepted"] += 1
    except PolicyError:
        fuzz_tally["policy bytes: refused with a PolicyError"] += 1


# -- the journal ------------------------------------------------------------------------------

def _paths(v: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(v, dict):
        for k, x in v.items():
            out += _paths(x, (*prefix, k))
    elif isinstance(v, list):
        for i, x in enumerate(v):
            out += _paths(x, (*prefix, i))
    return out


GOOD_JOURNAL = {"version": 1, "owner_pid": 1, "processes": {"4242:99": ENTRY, "1:1": {**copy.deepcopy(ENTRY),
                                                                                         "pid": 1, "start_time": 1}},
                "backed_off": ["5:6"]}
JOURNAL_PATHS = [p for p in _paths(GOOD_JOURNAL) if p]


@pytest.fixture(scope="module")
def journal_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fuzz-journal")


@FUZZ
@given(edits=st.lists(st.tuples(st.sampled_from(JOURNAL_PATHS), st.one_of(st.just(...), VALUE)), min_size=1,
                      max_size=3))
def test_hostile_journal_entries(journal_dir: Path, fuzz_tally: collections.Counter[str],
                                 edits: list[tuple[tuple[Any, ...], Any]]) -> None:
    doc = copy.deepcopy(GOOD_JOURNAL)
    for path, value in edits:
        d: Any = doc
        try:
            for key in path[:-1]:
                d = d[key]
            if value is ...:
                del d[path[-1]]
            else:
                d[path[-1]] = value
        except (KeyError, IndexError, TypeError):
            continue
    path = journal_dir / "j.json"
    path.write_text(json.dumps(doc))
    fuzz_tally["journal entries"] += 1
    check_journal(path, fuzz_tally, "journal entries")


@settings(max_examples=80, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.one_of(st.binary(max_size=200), st.builds(lambda v: json.dumps(v).encode(), VALUE)))
def test_journal_files_of_any_bytes(journal_dir: Path, fuzz_tally: collections.Counter[str], data: bytes) -> None:
    path = journal_dir / "b.json"
    path.write_bytes(data)
    fuzz_tally["journal bytes"] += 1
    check_journal(path, fuzz_tally, "journal bytes")


def check_journal(path: Path, tally: collections.Counter[str], name: str) -> None:
    try:
        Journal(path).open().close()
    except JournalError as err:
        assert "in use by another procsift" not in str(err)  # a refused journal released its lock
        tally[f"{name}: refused with a JournalError"] += 1
        return
    tally[f"{name}: accepted"] += 1
    applier = Applier(path, backend="none", dry_run=True)  # what `procsift restore` then does, changing nothing
    try:
        applier.recover()
        applier.restore_all()
    except ProcsiftError as err:
        assert not isinstance(err, JournalError), err
    finally:
        applier.close()
