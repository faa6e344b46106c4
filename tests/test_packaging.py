"""Packaging: every package folder is listed, and the wheel carries the BPF source and data files."""

from __future__ import annotations

import tomllib
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CONFIG = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]


def _package_folders() -> dict[str, Path]:
    """Import name -> folder, for every folder with an __init__.py under a mapped package."""
    found = {}
    for name, folder in CONFIG["package-dir"].items():
        base = ROOT / folder
        for init in base.rglob("__init__.py"):
            rel = init.parent.relative_to(base)
            dotted = ".".join([name, *rel.parts]) if rel.parts else name
            found[dotted] = init.parent
    return found


def test_every_package_folder_is_listed() -> None:
    listed = set(CONFIG["packages"])
    for name, folder in _package_folders().items():
        assert name in listed, f"{folder} holds a package that pyproject.toml does not list: {name}"
    for name in listed:
        assert name in CONFIG["package-dir"] or name.rsplit(".", 1)[0] in CONFIG["package-dir"], name


def test_top_level_folders_are_mapped() -> None:
    for folder in ("collector", "models", "distributor", "service", "datasets"):
        assert CONFIG["package-dir"][f"procsift.{folder}"] == folder


@pytest.fixture(scope="module")
def wheel(built_wheel: Path) -> zipfile.ZipFile:
    return zipfile.ZipFile(built_wheel)


def test_wheel_carries_code_bpf_source_and_data(wheel: zipfile.ZipFile) -> None:
    names = set(wheel.namelist())
    for dotted, folder in _package_folders().items():
        assert f"{dotted.replace('.', '/')}/__init__.py" in names, dotted
    assert "procsift/collector/collector.bpf.c" in names
    # every file matching a package-data pattern is in the wheel
    for pkg, patterns in CONFIG.get("package-data", {}).items():
        folder = ROOT / CONFIG["package-dir"][pkg]
        for pattern in patterns:
            for f in folder.glob(pattern):
                if f.is_file():
                    rel = f.relative_to(folder).as_posix()
                    assert f"{pkg.replace('.', '/')}/{rel}" in names, f"{f} missing from the wheel"
    assert any(n.endswith("entry_points.txt") for n in names)
    entry = next(n for n in names if n.endswith("entry_points.txt"))
    assert "procsift = procsift.service.cli:main" in wheel.read(entry).decode()
    for data in ("procsift/distributor/default-policy.toml", "procsift/distributor/procsift.service",
                 "procsift/models/default/model.joblib", "procsift/service/api/static/index.html"):
        assert data in names, f"{data} missing from the wheel"
