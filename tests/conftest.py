"""Shared fixtures. Tests marked `kernel` load real BPF programs: they need root (CI runs as root)."""

from __future__ import annotations

import collections
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ARTIFACTS = ROOT / "test-artifacts"

# A shell without job control starts background commands with SIGINT ignored, and an ignored
# signal stays ignored across exec: run that way (`make test &` in a script), every procsift
# the tests start would ignore the Ctrl-C they send it, and Python would not install its own
# handler. Catching it here makes the children start with the default, as from a terminal.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture(scope="session")
def fuzz_tally() -> Iterator[collections.Counter[str]]:
    """Inputs the property-based fuzzers tried, per fuzzer (and outcome); written at the end of the
    session to test-artifacts/fuzz-counts.json."""
    tally: collections.Counter[str] = collections.Counter()
    yield tally
    if tally:
        ARTIFACTS.mkdir(exist_ok=True)
        (ARTIFACTS / "fuzz-counts.json").write_text(json.dumps(dict(sorted(tally.items())), indent=1))


@pytest.fixture
def open_tmp() -> Iterator[Path]:
    """A folder every user can reach (pytest's own tmp folders are root-only), for tests that
    run procsift as another user (nobody) against files in it."""
    path = Path(tempfile.mkdtemp(prefix="procsift-test-"))
    os.chmod(path, 0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # Only the lack of root skips a kernel test; as root, a BPF failure is a failure.
    if os.geteuid() == 0:
        return
    skip = pytest.mark.skip(reason="needs root to load BPF (CI runs these as root)")
    for item in items:
        if "kernel" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def built_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel as a packager builds it: `python -m build` (sdist, then the wheel from it)."""
    out = tmp_path_factory.mktemp("dist")
    done = subprocess.run([sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out), str(ROOT)],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (whl,) = out.glob("procsift-*.whl")
    return whl
