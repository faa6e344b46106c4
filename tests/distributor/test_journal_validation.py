"""Journal entries are checked against the journal's schema when it is read: a hand-edited or
damaged entry is one JournalError naming the process key and the field, in `restore` and `run`."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from procsift.distributor import JournalError
from procsift.distributor.journal import Journal

PROCSIFT = [sys.executable, "-m", "procsift.service.cli"]
THREAD = {"nice": 0, "affinity": [0, 1], "io": ["none", 4], "policy": 0, "slice": None}
ENTRY: dict[str, Any] = {
    "pid": 4242, "start_time": 99, "comm": "hog", "default": dict(THREAD), "threads": {"4242": dict(THREAD), "4243": dict(THREAD)},
    "applied": {"nice": 7, "io": ["idle", 0]}, "applied_tids": {"4242": ["nice", "io"]},
    "cgroup": {"orig": "/", "set": "/procsift.w50", "mount": "/sys/fs/cgroup/cpu"},
    "autogroup": {"name": "/autogroup-12", "orig": 0, "set": 19},
}


def write(path: Path, processes: Any = None, **doc: Any) -> Path:
    body = {"version": 1, "owner_pid": 1, "processes": {"4242:99": ENTRY} if processes is None else processes,
            "backed_off": [], **doc}
    path.write_text(json.dumps(body))
    return path


def entry(**changes: Any) -> dict[str, Any]:
    e = copy.deepcopy(ENTRY)
    for dotted, value in changes.items():
        *parents, last = dotted.split("__")
        d = e
        for p in parents:
            d = d[p]
        if value is ...:
            del d[last]
        else:
            d[last] = value
    return e


def test_a_good_journal_reads(tmp_path: Path) -> None:
    j = Journal(write(tmp_path / "j.json")).open()
    assert j.processes["4242:99"]["comm"] == "hog"
    j.close()


@pytest.mark.parametrize("processes, where", [
    ({"4242:99": "a string"}, '"4242:99"'),
    ({"4242:99": {}}, '"4242:99"'),
    ({"4242:99": None}, '"4242:99"'),
    ([ENTRY], "processes"),
    ({"x": ENTRY}, '"x"'),
    ({"4242:98": ENTRY}, "pid:start_time"),
    ({"4242:99": entry(pid="4242")}, "pid"),
    ({"4242:99": entry(start_time=-1)}, "start_time"),
    ({"4242:99": entry(comm=5)}, "comm"),
    ({"4242:99": entry(default__nice=99)}, "default.nice"),
    ({"4242:99": entry(default__affinity=[0, 10**9])}, "default.affinity"),
    ({"4242:99": entry(default__io=["fast", 4])}, "default.io"),
    ({"4242:99": entry(default__policy="other")}, "default.policy"),
    ({"4242:99": entry(default=...)}, "default"),
    ({"4242:99": entry(threads__4243__slice=-5)}, "threads.4243.slice"),
    ({"4242:99": entry(threads={"abc": THREAD})}, "threads"),
    ({"4242:99": entry(applied={"colour": 3})}, "applied"),
    ({"4242:99": entry(applied__nice="7")}, "applied.nice"),
    ({"4242:99": entry(applied_tids={"4242": "nice"})}, "applied_tids"),
    ({"4242:99": entry(cgroup__orig="/../../etc")}, "cgroup.orig"),
    ({"4242:99": entry(cgroup__set=3)}, "cgroup.set"),
    ({"4242:99": entry(autogroup__orig=40)}, "autogroup.orig"),
    ({"4242:99": entry(cpuset=[1])}, "cpuset"),
])
def test_a_bad_entry_is_one_error_naming_key_and_field(tmp_path: Path, processes: Any, where: str) -> None:
    path = write(tmp_path / "j.json", processes)
    with pytest.raises(JournalError) as info:
        Journal(path).open()
    msg = str(info.value)
    assert where in msg and "move it away" in msg, msg


@pytest.mark.parametrize("doc", [{"backed_off": "4242:99"}, {"backed_off": [5]}, {"version": "1"}])
def test_bad_top_level_fields(tmp_path: Path, doc: dict[str, Any]) -> None:
    with pytest.raises(JournalError):
        Journal(write(tmp_path / "j.json", **doc)).open()


@pytest.mark.parametrize("text", ["[" * 100_000, "null", "[]", "\"x\"", "{\"version\": 1}"])
def test_a_journal_that_is_not_an_object_is_one_error(tmp_path: Path, text: str) -> None:
    (tmp_path / "j.json").write_text(text)
    with pytest.raises(JournalError, match="not a procsift journal"):
        Journal(tmp_path / "j.json").open()


@pytest.mark.parametrize("bad", ["a string", {}])
@pytest.mark.parametrize("verb", ["restore", "run"])
def test_restore_and_run_on_a_bad_entry_are_one_line(tmp_path: Path, bad: Any, verb: str) -> None:
    path = write(tmp_path / "j.json", {"4242:99": bad})
    extra = ["--proc", "--dry-run", "--no-api", "--no-table", "-n", "1", "-w", "0.5"] if verb == "run" else []
    res = subprocess.run([*PROCSIFT, verb, "--journal", str(path), *extra], capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 1 and "Traceback" not in res.stderr, res.stderr
    lines = [ln for ln in res.stderr.strip().splitlines() if ln.startswith("procsift: error")]
    assert len(lines) == 1 and '"4242:99"' in lines[0], res.stderr
