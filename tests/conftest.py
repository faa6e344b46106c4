"""Shared fixtures. Tests marked `kernel` load real BPF programs: they need root (CI runs as root)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


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
