"""`make install`: the wheel in its own venv outside the repo, the command on PATH, the policy in
/etc (a changed one kept), a unit systemd accepts, and `make uninstall` taking it all away.

Everything is installed under a temporary ROOT (the script's paths all hang off it), so the
machine's /opt, /etc and /usr/local are never touched; the default layout is checked apart."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "scripts" / "install.sh"
VERSION = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
# What a fresh login shell has: nothing of the repo, its venv or pyenv.
CLEAN_ENV = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8",
             "HOME": "/root" if os.geteuid() == 0 else os.environ.get("HOME", "/tmp")}

pytestmark = pytest.mark.slow


def script(*args: str, root: Path | None = None, **env: str) -> subprocess.CompletedProcess[str]:
    full = {**os.environ, **env}
    full.pop("ROOT", None)
    if root is not None:
        full["ROOT"] = str(root)
    return subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True, timeout=900, env=full)


def installed(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The installed command, run from outside the repo with a clean environment."""
    return subprocess.run([str(root / "usr/local/bin/procsift"), *args], capture_output=True, text=True,
                          timeout=120, cwd=root, env=CLEAN_ENV)


def unit_lines(path: Path, key: str) -> list[str]:
    return [ln.split("=", 1)[1] for ln in path.read_text().splitlines() if ln.startswith(key + "=")]


def test_default_layout_is_the_system_one() -> None:
    paths = dict(ln.split("=", 1) for ln in script("paths").stdout.split())
    assert paths == {"OPT_DIR": "/opt/procsift", "BIN_DIR": "/usr/local/bin", "ETC_DIR": "/etc/procsift",
                     "UNIT_DIR": "/etc/systemd/system", "DOC_DIR": "/usr/local/share/doc/procsift"}
    unit = script("unit").stdout
    assert "ExecStart=/opt/procsift/bin/procsift run --no-table --policy /etc/procsift/policy.toml\n" in unit
    assert "/usr/bin/env" not in unit
    assert "Documentation=file:///usr/local/share/doc/procsift/README.md\n" in unit


@pytest.fixture(scope="module")
def root(built_wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("root")
    done = script("install", str(built_wheel), root=root)
    assert done.returncode == 0, done.stdout + done.stderr
    return root


def test_installed_command_runs_from_its_own_venv(root: Path) -> None:
    link = root / "usr/local/bin/procsift"
    assert link.is_symlink() and Path(os.readlink(link)) == root / "opt/procsift/bin/procsift"
    done = installed(root, "--version")
    assert done.returncode == 0 and done.stdout.strip() == f"procsift {VERSION}", done.stderr
    where = subprocess.run([str(root / "opt/procsift/bin/python"), "-c",
                            "import procsift.service as s; print(s.__file__)"],
                           capture_output=True, text=True, cwd=root, env=CLEAN_ENV, timeout=300)
    assert where.stdout.startswith(str(root / "opt/procsift/lib/")), where.stdout + where.stderr


def test_installed_policy_checks(root: Path) -> None:
    policy = root / "etc/procsift/policy.toml"
    done = installed(root, "check-policy", str(policy))
    assert done.returncode == 0 and f"{policy}: ok" in done.stdout, done.stderr


def test_installed_top_prints_a_window(root: Path) -> None:
    done = installed(root, "top", "--once", "--json", "-d", "0.5")
    assert done.returncode == 0, done.stderr
    rows = json.loads(done.stdout)
    assert rows and all({"pid", "comm", "run_ns", "syscall_counts"} <= set(r) for r in rows)
    if os.geteuid() == 0:  # the venv reaches Debian's bcc through its .pth: BPF, syscalls counted
        assert "/proc collector" not in done.stderr, done.stderr
        assert any(r["syscall_counts"] for r in rows)


def test_installed_unit_is_valid_and_points_at_the_install(root: Path) -> None:
    unit = root / "etc/systemd/system/procsift.service"
    (start,) = unit_lines(unit, "ExecStart")
    exe, *args = start.split()
    assert exe == str(root / "opt/procsift/bin/procsift") and os.access(exe, os.X_OK)
    assert args[args.index("--policy") + 1] == str(root / "etc/procsift/policy.toml")
    (doc,) = unit_lines(unit, "Documentation")
    assert Path(doc.removeprefix("file://")).is_file()
    if shutil.which("systemd-analyze") is None:
        pytest.skip("systemd-analyze is not installed")
    done = subprocess.run(["systemd-analyze", "verify", str(unit)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr


def test_reinstall_keeps_a_changed_policy_and_uninstall_removes_the_rest(root: Path, built_wheel: Path) -> None:
    policy = root / "etc/procsift/policy.toml"
    shipped = policy.read_text()
    policy.write_text(shipped + "\n# mine\n")
    done = script("install", str(built_wheel), root=root)
    assert done.returncode == 0, done.stderr
    assert "kept your changed" in done.stdout
    assert policy.read_text().endswith("# mine\n") and (root / "etc/procsift/policy.toml.new").read_text() == shipped
    assert installed(root, "--version").returncode == 0
    done = script("uninstall", root=root)
    assert done.returncode == 0, done.stderr
    assert "kept" in done.stdout and policy.exists()
    for gone in ("opt/procsift", "usr/local/bin/procsift", "etc/systemd/system/procsift.service",
                 "usr/local/share/doc/procsift", "etc/procsift/policy.toml.new"):
        assert not (root / gone).exists() and not (root / gone).is_symlink(), gone
    # an unchanged policy goes with the rest
    policy.unlink()
    assert script("install", str(built_wheel), root=root).returncode == 0
    assert script("uninstall", root=root).returncode == 0
    assert not (root / "etc/procsift").exists() and not (root / "opt/procsift").exists()
