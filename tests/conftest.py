"""Shared fixtures. Tests marked `kernel` load real BPF programs: they need root (CI runs as root)."""

from __future__ import annotations

import os

import pytest


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # Only the lack of root skips a kernel test; as root, a BPF failure is a failure.
    if os.geteuid() == 0:
        return
    skip = pytest.mark.skip(reason="needs root to load BPF (CI runs these as root)")
    for item in items:
        if "kernel" in item.keywords:
            item.add_marker(skip)
