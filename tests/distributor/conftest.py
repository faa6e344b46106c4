"""Fixtures for the distributor tests: policies from text, and real child processes to place."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

CHILD = textwrap.dedent("""
    import sys, threading, time
    stop = threading.Event()
    def spawn(n):
        for _ in range(n):
            threading.Thread(target=stop.wait, daemon=True).start()
    spawn(int(sys.argv[1]))
    print("ready", threading.active_count(), flush=True)
    for line in sys.stdin:
        cmd = line.split()
        if cmd[0] == "spawn":
            spawn(int(cmd[1]))
            print("ready", threading.active_count(), flush=True)
""")


class Child:
    """A process this test started: N sleeping threads; more on request."""

    def __init__(self, threads: int = 3, new_session: bool = False) -> None:
        self.proc = subprocess.Popen([sys.executable, "-c", CHILD, str(threads)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True, start_new_session=new_session)
        assert self.proc.stdout is not None
        assert self.proc.stdout.readline().startswith("ready")
        self.pid = self.proc.pid

    def spawn(self, n: int) -> None:
        """Start n more threads (they appear after procsift first placed the process)."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(f"spawn {n}\n")
        self.proc.stdin.flush()
        assert self.proc.stdout.readline().startswith("ready")

    def tids(self) -> list[int]:
        return sorted(int(t) for t in os.listdir(f"/proc/{self.pid}/task"))

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


@pytest.fixture
def child() -> Iterator[Child]:
    c = Child()
    yield c
    c.kill()


@pytest.fixture
def make_child() -> Iterator[type]:
    made: list[Child] = []

    def make(threads: int = 3, new_session: bool = False) -> Child:
        made.append(Child(threads, new_session))
        return made[-1]
    yield make  # type: ignore[misc]
    for c in made:
        c.kill()


@pytest.fixture
def journal(tmp_path: Path) -> Path:
    return tmp_path / "state" / "journal.json"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if os.geteuid() == 0:
        return
    skip = pytest.mark.skip(reason="needs root")
    for item in items:
        if "kernel" in item.keywords:
            item.add_marker(skip)
