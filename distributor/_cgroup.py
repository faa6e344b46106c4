"""The cgroup backend: procsift's own groups, side by side with the autogroups at the hierarchy's root.

cpu: groups <cpu hierarchy>/procsift.w<weight>[-idle] with a CPU weight or cpu.idle. A task
outside the root cpu cgroup is not autogrouped (kernel/sched/autogroup.h, task_wants_autogroup),
so a small weight or cpu.idle weighs a background process against every session's autogroup:
the way to make background work really yield. The groups sit directly under the root: a weight
or cpu.idle only counts against siblings, so a group nested under a normal-weight "procsift"
parent still took a full share at the top (measured: p99 barely moved).

cpuset: groups <cpuset hierarchy>/procsift.cpus-<list> confining a whole process, its later
threads and its children to CPUs. Attaching a task to a v1 cpuset resets its affinity to the
set's CPUs (and moving it back resets it to the root's), so the applier moves first and
writes per-thread affinity after.

v1 as mounted on this VM; v2 where the controller is enabled in the root's subtree_control.
Only processes in the root group (or in one of procsift's) are moved: a service's or a
container's group is not procsift's to take it out of.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from procsift.distributor._sys import _os_call
from procsift.distributor.errors import BackendUnavailable
from procsift.distributor.policy import format_cpulist

__all__ = ["CgroupBackend", "CpusetBackend", "find_hierarchy", "find_cpu_hierarchy", "PREFIX"]

CGROUP_ROOT = Path("/sys/fs/cgroup")
PREFIX = "procsift"
_V1_PROBE = {"cpu": "cpu.shares", "cpuset": "cpuset.cpus"}
_OURS = re.compile(r"^/[A-Za-z0-9_-]+\.(w\d+(-idle)?|cpus-\d+(_\d+)*)$")


def _writable_dir(p: Path) -> bool:
    return p.is_dir() and os.access(p, os.W_OK)


def find_hierarchy(controller: str, root: Path = CGROUP_ROOT) -> tuple[Path, int] | None:
    """(mount point, version) of a writable hierarchy with `controller` ("cpu" or "cpuset")."""
    v1 = root / controller
    if (v1 / _V1_PROBE[controller]).exists() and _writable_dir(v1):
        return v1, 1
    for v2 in (root, root / "unified"):
        enabled = v2 / "cgroup.subtree_control"  # children of this root get the controller
        if enabled.exists() and controller in enabled.read_text().split() and _writable_dir(v2):
            return v2, 2
    return None


def find_cpu_hierarchy(root: Path = CGROUP_ROOT) -> tuple[Path, int] | None:
    """(mount point, version) of a writable cpu controller hierarchy."""
    return find_hierarchy("cpu", root)


def _set(path: Path, value: str) -> None:
    if path.read_text().strip() != value:
        path.write_text(value)


class _Groups:
    """What the cpu and cpuset backends share: finding, reading, moving, cleaning up."""

    controller = ""

    def __init__(self, root: Path = CGROUP_ROOT, prefix: str = PREFIX) -> None:
        self.prefix = prefix
        found = find_hierarchy(self.controller, root)
        if found is None:
            raise BackendUnavailable(f"no writable {self.controller} cgroup hierarchy under {root} "
                                     f"(v1 {self.controller} controller, or v2 with {self.controller} enabled)")
        self.mount, self.version = found

    def describe(self) -> str:
        """e.g. "cgroup v1 at /sys/fs/cgroup/cpu"."""
        return f"cgroup v{self.version} at {self.mount}"

    def current(self, pid: int) -> str:
        """The process's path in this hierarchy ("/" for the root)."""
        def read() -> str:
            with open(f"/proc/{pid}/cgroup") as f:
                return f.read()
        for line in _os_call(pid, "cgroup", read).splitlines():
            _, controllers, path = line.split(":", 2)
            if self.version == 1 and self.controller in controllers.split(","):
                return path
            if self.version == 2 and controllers == "":
                return path
        return "/"

    def is_ours(self, path: str) -> bool:
        """Whether a cgroup path is one of procsift's groups."""
        return path.startswith(f"/{self.prefix}.")

    def movable(self, path: str) -> bool:
        """Whether procsift may move a process that sits at `path` (the root, or its own groups)."""
        return path == "/" or self.is_ours(path)

    def move(self, pid: int, path: str) -> None:
        """Move every thread of `pid` into the group at `path` (cgroup.procs moves the thread group)."""
        target = self.mount / path.lstrip("/")
        if not target.is_dir():
            target = self.mount  # the original group is gone: the root is the nearest honest place

        def write() -> None:
            with open(target / "cgroup.procs", "w") as f:
                f.write(str(pid))
        _os_call(pid, f"move to cgroup {path}", write)

    def remove_if_empty(self, path: str) -> None:
        """rmdir one of procsift's groups once its last task has left (whatever prefix made it)."""
        if _OURS.match(path):  # only a name procsift makes, even from a hand-edited journal
            try:
                (self.mount / path.lstrip("/")).rmdir()
            except OSError:
                pass  # other processes still in it, or already gone

    def remove_empty_groups(self) -> None:
        """rmdir procsift's groups that hold no task any more (the kernel refuses non-empty ones)."""
        for d in self.mount.glob(f"{self.prefix}.*"):
            if d.is_dir():
                try:
                    d.rmdir()
                except OSError:
                    pass  # still has tasks (another procsift generation, or a racing fork)


class CgroupBackend(_Groups):
    """procsift's cpu groups: CPU weight and cpu.idle for whole processes (all threads, later ones too)."""

    controller = "cpu"

    def group_path(self, weight: int | None, idle: bool | None) -> str:
        """Make (or update) the group for these settings; returns its path in the hierarchy."""
        name = f"{self.prefix}.w{weight or 100}" + ("-idle" if idle else "")
        d = self.mount / name
        d.mkdir(exist_ok=True)
        idle_file = d / "cpu.idle"
        if idle_file.exists():
            _set(idle_file, "1" if idle else "0")
        if not idle:  # an idle group refuses weight changes (EINVAL); its weight is the minimum anyway
            if self.version == 1:
                _set(d / "cpu.shares", str(max(2, round((weight or 100) * 1024 / 100))))  # 1024 = default
            else:
                _set(d / "cpu.weight", str(weight or 100))
        return f"/{name}"


class CpusetBackend(_Groups):
    """procsift's cpuset groups: whole processes, their later threads and children confined to CPUs."""

    controller = "cpuset"

    def group_path(self, cpus: tuple[int, ...]) -> str:
        """Make the group for this CPU set (memory nodes as the root's); returns its path."""
        name = f"{self.prefix}.cpus-{'_'.join(map(str, cpus))}"
        d = self.mount / name
        d.mkdir(exist_ok=True)
        listed = ",".join(map(str, cpus))
        if self.version == 1:
            # A v1 cpuset takes no task until both cpus and mems are set (ENOSPC otherwise).
            if not (d / "cpuset.mems").read_text().strip():
                (d / "cpuset.mems").write_text((self.mount / "cpuset.mems").read_text().strip())
            if (d / "cpuset.cpus").read_text().strip() != format_cpulist(cpus):
                (d / "cpuset.cpus").write_text(listed)
        else:
            if (d / "cpuset.cpus").read_text().strip() != format_cpulist(cpus):
                (d / "cpuset.cpus").write_text(listed)
        return f"/{name}"
