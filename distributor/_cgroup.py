"""The cgroup backend: CPU weight / cpu.idle groups <cpu hierarchy>/procsift.<settings> (v1 here, v2 where delegated).

A task outside the root cpu cgroup is not autogrouped (kernel/sched/autogroup.h,
task_wants_autogroup), so a small weight or cpu.idle here weighs a background process
against every session's autogroup: the way to make background work really yield.
The groups sit directly under the hierarchy's root, side by side with the autogroups: a
weight or cpu.idle only counts against siblings, so a group nested under a normal-weight
"procsift" parent would still take a full share at the top (measured: p99 barely moved).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from procsift.distributor._sys import _os_call
from procsift.distributor.errors import BackendUnavailable

__all__ = ["CgroupBackend", "find_cpu_hierarchy"]

CGROUP_ROOT = Path("/sys/fs/cgroup")
PREFIX = "procsift"


def _writable_dir(p: Path) -> bool:
    return p.is_dir() and os.access(p, os.W_OK)


def find_cpu_hierarchy(root: Path = CGROUP_ROOT) -> tuple[Path, int] | None:
    """(mount point, version) of a writable cpu controller hierarchy; v2 only if cpu can be enabled."""
    v1 = root / "cpu"
    if (v1 / "cpu.shares").exists() and _writable_dir(v1):
        return v1, 1
    for v2 in (root, root / "unified"):
        enabled = v2 / "cgroup.subtree_control"  # children of this root get a cpu controller
        if enabled.exists() and "cpu" in enabled.read_text().split() and _writable_dir(v2):
            return v2, 2
    return None


def _set(path: Path, value: str) -> None:
    if path.read_text().strip() != value:
        path.write_text(value)


@dataclass(frozen=True)
class _Group:
    weight: int | None
    idle: bool | None

    @property
    def name(self) -> str:
        return f"w{self.weight or 100}" + ("-idle" if self.idle else "")


class CgroupBackend:
    """Creates procsift's cpu groups and moves whole processes (all threads, and later ones) in and out."""

    def __init__(self, root: Path = CGROUP_ROOT, prefix: str = PREFIX) -> None:
        self.prefix = prefix
        found = find_cpu_hierarchy(root)
        if found is None:
            raise BackendUnavailable(f"no writable cpu cgroup hierarchy under {root} "
                                     "(v1 cpu controller, or v2 with cpu available)")
        self.mount, self.version = found

    def describe(self) -> str:
        """e.g. "cgroup v1 at /sys/fs/cgroup/cpu"."""
        return f"cgroup v{self.version} at {self.mount}"

    def current(self, pid: int) -> str:
        """The process's path in the cpu hierarchy ("/" for the root)."""
        def read() -> str:
            with open(f"/proc/{pid}/cgroup") as f:
                return f.read()
        for line in _os_call(pid, "cgroup", read).splitlines():
            _, controllers, path = line.split(":", 2)
            if self.version == 1 and "cpu" in controllers.split(","):
                return path
            if self.version == 2 and controllers == "":
                return path
        return "/"

    def is_ours(self, path: str) -> bool:
        """Whether a cgroup path is one of procsift's groups."""
        return path.startswith(f"/{self.prefix}.")

    def group_path(self, weight: int | None, idle: bool | None) -> str:
        """Make (or update) the group for these settings; returns its path in the hierarchy."""
        g = _Group(weight, idle)
        d = self.mount / f"{self.prefix}.{g.name}"
        d.mkdir(exist_ok=True)
        idle_file = d / "cpu.idle"
        if idle_file.exists():
            _set(idle_file, "1" if idle else "0")
        if not idle:  # an idle group refuses weight changes (EINVAL); its weight is the minimum anyway
            if self.version == 1:
                _set(d / "cpu.shares", str(max(2, round((weight or 100) * 1024 / 100))))  # 1024 = default
            else:
                _set(d / "cpu.weight", str(weight or 100))
        return f"/{self.prefix}.{g.name}"

    def move(self, pid: int, path: str) -> None:
        """Move every thread of `pid` into the group at `path` (cgroup.procs moves the thread group)."""
        target = self.mount / path.lstrip("/")
        if not target.is_dir():
            target = self.mount  # the original group is gone: the root is the nearest honest place

        def write() -> None:
            with open(target / "cgroup.procs", "w") as f:
                f.write(str(pid))
        _os_call(pid, f"move to cgroup {path}", write)

    def remove_empty_groups(self) -> None:
        """rmdir procsift's groups that hold no task any more (the kernel refuses non-empty ones)."""
        for d in self.mount.glob(f"{self.prefix}.*"):
            if d.is_dir():
                try:
                    d.rmdir()
                except OSError:
                    pass  # still has tasks (another procsift generation, or a racing fork)
