"""Whole-process placement for the applier: cpu and cpuset cgroups, and the autogroup nice.

Part of the applier (only it calls this): phase 1 journals the original and notes the move;
phase 2 makes it after re-checking the process's identity.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from typing import Any

from procsift.distributor import _sys
from procsift.distributor._cgroup import CgroupBackend, CpusetBackend
from procsift.distributor._log import log_event
from procsift.distributor._restore import ApplyReport
from procsift.distributor.errors import AccessDenied, ProcessGone
from procsift.distributor.journal import Journal
from procsift.distributor.views import Action

__all__: list[str] = []


@dataclass
class _Pending:
    """Phase-1 result for one process: the per-thread writes and placement moves to make."""

    action: Action
    entry: dict[str, Any]
    writes: list[tuple[int, dict[str, Any], dict[str, Any]]]
    move: str | None = None
    cpuset_move: str | None = None
    autogroup: int | None = None
    autogroup_name: str | None = None


class _Placer:
    """Mixin for Applier: needs journal, dry_run, backend, cgroups, cpusets, _plan_ag, _ag_members, _check."""

    journal: Journal
    dry_run: bool
    backend: str
    cgroups: CgroupBackend | None
    cpusets: CpusetBackend | None
    _plan_ag: dict[int, int | None]
    _ag_members: dict[str, list[int]] | None

    def _check(self, pid: int, start_time: int) -> _sys.Stat:
        raise NotImplementedError

    def _prepare_placement(self, action: Action, entry: dict[str, Any], pending: _Pending,
                           report: ApplyReport) -> None:
        """cgroup / autogroup: journal the original, note the move to make in phase 2."""
        if self.cgroups is not None and (action.cpu_weight is not None or action.cpu_idle):
            now = self.cgroups.current(action.pid)
            target = self.cgroups.group_path(action.cpu_weight, action.cpu_idle) if not self.dry_run \
                else f"/{self.cgroups.prefix}.(w{action.cpu_weight}{'-idle' if action.cpu_idle else ''})"
            if "cgroup" not in entry:
                if now != "/" and not self.cgroups.is_ours(now):
                    report.notes.append(f"{action.pid}: in cgroup {now}, not moved")
                    return  # someone else's group (a service, a container): not ours to move it out of
                entry["cgroup"] = {"orig": now, "set": target, "mount": str(self.cgroups.mount)}
            if now != target:
                entry["cgroup"]["set"] = target
                pending.move = target
        elif "cgroup" in entry and self.cgroups is not None:
            if self.cgroups.current(action.pid) == entry["cgroup"]["set"]:
                pending.move = entry["cgroup"]["orig"]
            del entry["cgroup"]
        self._prepare_cpuset(action, entry, pending, report)
        in_cgroup = "cgroup" in entry and pending.move != entry["cgroup"]["orig"]
        if self.backend == "autogroup" or (self.backend == "cgroup" and not in_cgroup):
            # Under the cgroup backend a process left in the root cpu cgroup is still weighed
            # by its autogroup, so an agreed autogroup nice is what makes its nice count.
            ag = _sys.read_autogroup(action.pid)
            if ag and action.autogroup_nice is not None and self._autogroup_agrees(ag[0], action):
                name, nice = ag
                if "autogroup" not in entry:
                    shared = next((e["autogroup"]["orig"] for e in self.journal.processes.values()
                                   if e.get("autogroup", {}).get("name") == name), nice)
                    entry["autogroup"] = {"name": name, "orig": shared, "set": action.autogroup_nice}
                entry["autogroup"]["set"] = action.autogroup_nice
                if nice != action.autogroup_nice:
                    pending.autogroup = action.autogroup_nice
            elif "autogroup" in entry:  # no longer agreed (a boost ended, a member changed label)
                mine = entry.pop("autogroup")
                shared = any(e.get("autogroup", {}).get("name") == mine["name"]
                             for e in self.journal.processes.values() if e is not entry)
                if not shared and ag and ag[0] == mine["name"] and ag[1] == mine["set"]:
                    pending.autogroup = mine["orig"]
                    pending.autogroup_name = mine["name"]

    def _prepare_cpuset(self, action: Action, entry: dict[str, Any], pending: _Pending,
                        report: ApplyReport) -> None:
        if self.cpusets is None:
            return
        if action.cpus is not None:
            now = self.cpusets.current(action.pid)
            target = self.cpusets.group_path(action.cpus) if not self.dry_run \
                else f"/{self.cpusets.prefix}.cpus-{'_'.join(map(str, action.cpus))}"
            if "cpuset" not in entry:
                if not self.cpusets.movable(now):
                    report.notes.append(f"{action.pid}: in cpuset {now}, not moved")
                    return
                entry["cpuset"] = {"orig": now, "set": target, "mount": str(self.cpusets.mount)}
            if now != target:
                entry["cpuset"]["set"] = target
                pending.cpuset_move = target
        elif "cpuset" in entry:
            if self.cpusets.current(action.pid) == entry["cpuset"]["set"]:
                pending.cpuset_move = entry["cpuset"]["orig"]
            del entry["cpuset"]

    def _autogroup_agrees(self, name: str, action: Action) -> bool:
        """Autogroup nice weighs a whole session: only when every member is planned to that same nice.

        The planner checks this over the processes it saw; this re-checks against every
        process now in /proc, so a process the planner never saw is never re-weighted.
        """
        if self._ag_members is None:
            self._ag_members = {}
            for d in os.listdir(_sys.PROC):
                if d.isdigit():
                    try:
                        got = _sys.read_autogroup(int(d))
                    except (ProcessGone, AccessDenied):
                        continue
                    if got:
                        self._ag_members.setdefault(got[0], []).append(int(d))
        members = self._ag_members.get(name, [])
        ok = bool(members) and all(self._plan_ag.get(pid) == action.autogroup_nice for pid in members)
        if not ok:
            log_event("autogroup-skip", logging.DEBUG, pid=action.pid, autogroup=name,
                      why="other members of the autogroup are not planned to the same nice")
        return ok

    def _execute_placement(self, p: _Pending) -> int:
        n, action, entry = 0, p.action, p.entry
        move = p.move
        if move is not None and self.cgroups is not None:
            self._check(action.pid, action.start_time)
            log_event("would-move" if self.dry_run else "move", pid=action.pid, comm=action.comm,
                      cgroup=move, rule=action.rule)
            if not self.dry_run:
                self.cgroups.move(action.pid, move)
                n += 1
        ag = p.autogroup
        if ag is not None:
            self._check(action.pid, action.start_time)
            log_event("would-set" if self.dry_run else "set", pid=action.pid, comm=action.comm,
                      field="autogroup_nice", new=ag, rule=action.rule,
                      autogroup=p.autogroup_name or entry["autogroup"]["name"])
            if not self.dry_run:
                _sys.write_autogroup(action.pid, ag)
                n += 1
        return n
