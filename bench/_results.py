"""What every benchmark writes: host facts and an atomically written bench/results/<name>.json."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"


def host_facts() -> dict[str, Any]:
    """Machine, kernel, CPUs, time, autogroup and Python: the context of a run."""
    return {"host": os.uname().nodename, "kernel": os.uname().release, "ncpu": os.cpu_count(),
            "when": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
            "autogroup": Path("/proc/sys/kernel/sched_autogroup_enabled").read_text().strip(),
            "python": sys.version.split()[0]}


def write_json(name: str, result: dict[str, Any]) -> Path:
    """Atomically write bench/results/<name>.json (temporary file + rename)."""
    RESULTS.mkdir(exist_ok=True)
    tmp = RESULTS / f".{name}.json.tmp"
    tmp.write_text(json.dumps(result, indent=2))
    out = RESULTS / f"{name}.json"
    os.replace(tmp, out)
    return out
