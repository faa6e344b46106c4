"""Putting values back: the restore half of the applier (on stop, `procsift restore`, recover, back-off).

A value is put back only where it still holds what procsift set; one someone else changed
since is left as they set it, and said so in the log.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from typing import Any

from procsift.distributor import _sys
from procsift.distributor._cgroup import CgroupBackend, CpusetBackend
from procsift.distributor._log import log_event
from procsift.distributor._threadstate import _SCHED_FIELDS, is_fair, read_thread, same, write_thread
from procsift.distributor.errors import AccessDenied, BackendUnavailable, ProcessGone
from procsift.distributor.journal import Journal

__all__ = ["ApplyReport"]


@dataclass
class ApplyReport:
    """What one apply / restore did, counted per process."""

    changed: int = 0
    unchanged: int = 0
    gone: int = 0
    backed_off: int = 0
    refused: int = 0
    failed: int = 0
    restored: int = 0
    writes: int = 0
    notes: list[str] = field(default_factory=list)


class _Restorer:
    """Mixin for Applier: needs journal, dry_run, cgroups, default_slice and _check."""

    journal: Journal
    dry_run: bool
    cgroups: CgroupBackend | None
    cpusets: CpusetBackend | None
    default_slice: int | None

    def _check(self, pid: int, start_time: int) -> _sys.Stat:
        raise NotImplementedError

    def _forget(self, key: str) -> None:
        self.journal.processes.pop(key, None)

    def _restore_key(self, key: str, report: ApplyReport, why: str) -> None:
        """Put one process's values back where they still hold what procsift set; then forget it."""
        entry = self.journal.processes.get(key)
        if entry is None:
            return
        pid, start = entry["pid"], entry["start_time"]
        try:
            self._check(pid, start)
            n = self._restore_cpuset(entry)  # first: leaving a cpuset resets affinity to the root's
            n += self._restore_threads(entry, force_affinity=n > 0)
            n += self._restore_placement(entry, key)
        except ProcessGone:
            report.gone += 1
            report.writes += self._restore_orphan_autogroup(entry, key)
        except (AccessDenied, OSError) as err:
            report.failed += 1
            log_event("restore-failed", logging.WARNING, pid=pid, comm=entry["comm"], why=str(err))
        else:
            if n:
                report.restored += 1
                report.writes += n
        if not self.dry_run:
            self._forget(key)
        log_event("forget", pid=pid, comm=entry["comm"], why=why)

    def _restore_cpuset(self, entry: dict[str, Any]) -> int:
        cs = entry.get("cpuset")
        if not cs:
            return 0
        backend = self.cpusets
        if backend is None:
            try:
                backend = CpusetBackend()
            except BackendUnavailable:
                log_event("restore-failed", logging.WARNING, pid=entry["pid"], comm=entry["comm"],
                          why=f"cannot move back to cpuset {cs['orig']}: no cpuset hierarchy")
                return 0
        if backend.current(entry["pid"]) != cs["set"]:
            return 0
        log_event("would-move" if self.dry_run else "move", pid=entry["pid"], comm=entry["comm"],
                  cpuset=cs["orig"], why="restore")
        if self.dry_run:
            return 0
        self._check(entry["pid"], entry["start_time"])
        backend.move(entry["pid"], cs["orig"])
        backend.remove_if_empty(cs["set"])
        return 1

    def _restore_threads(self, entry: dict[str, Any], force_affinity: bool = False) -> int:
        pid, start, n = entry["pid"], entry["start_time"], 0
        applied = entry["applied"]
        for tid in _sys.thread_ids(pid):
            try:
                now = read_thread(tid, self.default_slice)
            except ProcessGone:
                continue
            orig = entry["threads"].get(str(tid), entry["default"])
            # A thread procsift never wrote inherited procsift's values when it was created.
            mine = entry["applied_tids"].get(str(tid), list(applied))
            want: dict[str, Any] = {}
            if force_affinity and not same("affinity", now["affinity"], orig["affinity"]):
                want["affinity"] = orig["affinity"]  # the cpuset move reset it: ours to put back
            for f in mine:
                if f not in applied or f in want or (f in _SCHED_FIELDS and not is_fair(now["policy"])):
                    continue
                if same(f, now[f], applied[f]) and not same(f, now[f], orig[f]):
                    want[f] = orig[f]
                elif not same(f, now[f], applied[f]) and not same(f, now[f], orig[f]):
                    log_event("leave", pid=pid, tid=tid, comm=entry["comm"], field=f, now=now[f],
                              why="changed by someone else since procsift set it")
            if want:
                self._check(pid, start)
                for f, v in want.items():
                    log_event("would-restore" if self.dry_run else "restore", pid=pid, tid=tid,
                              comm=entry["comm"], field=f, old=now[f], new=v)
                if not self.dry_run:
                    try:
                        n += len(write_thread(tid, want, now, self.default_slice))
                    except ProcessGone:
                        continue
        return n

    def _restore_placement(self, entry: dict[str, Any], key: str) -> int:
        n = 0
        cg = entry.get("cgroup")
        backend = self.cgroups
        if cg and backend is None:  # a journal from a run with the cgroup backend
            try:
                backend = CgroupBackend()
            except BackendUnavailable:
                log_event("restore-failed", logging.WARNING, pid=entry["pid"], comm=entry["comm"],
                          why=f"cannot move back to cgroup {cg['orig']}: no cpu hierarchy")
        if cg and backend is not None:
            now = backend.current(entry["pid"])
            if now == cg["set"]:
                log_event("would-move" if self.dry_run else "move", pid=entry["pid"], comm=entry["comm"],
                          cgroup=cg["orig"], why="restore")
                if not self.dry_run:
                    self._check(entry["pid"], entry["start_time"])
                    backend.move(entry["pid"], cg["orig"])
                    backend.remove_if_empty(cg["set"])
                    n += 1
        ag = entry.get("autogroup")
        if ag:
            others = any(e.get("autogroup", {}).get("name") == ag["name"]
                         for k, e in self.journal.processes.items() if k != key)
            now_ag = _sys.read_autogroup(entry["pid"])
            if not others and now_ag and now_ag[0] == ag["name"] and now_ag[1] == ag["set"]:
                log_event("would-restore" if self.dry_run else "restore", pid=entry["pid"],
                          comm=entry["comm"], field="autogroup_nice", old=now_ag[1], new=ag["orig"])
                if not self.dry_run:
                    self._check(entry["pid"], entry["start_time"])
                    _sys.write_autogroup(entry["pid"], ag["orig"])
                    n += 1
        return n

    def _restore_orphan_autogroup(self, entry: dict[str, Any], key: str) -> int:
        """The process is gone but its session may live on (a new command in that terminal):
        put the autogroup nice back through any member still there. Autogroup ids are not reused."""
        ag = entry.get("autogroup")
        if not ag or self.dry_run or any(e.get("autogroup", {}).get("name") == ag["name"]
                                         for k, e in self.journal.processes.items() if k != key):
            return 0
        for d in os.listdir(_sys.PROC):
            if not d.isdigit():
                continue
            try:
                now = _sys.read_autogroup(int(d))
                if now and now[0] == ag["name"]:
                    if now[1] == ag["set"]:
                        log_event("restore", pid=int(d), field="autogroup_nice", old=now[1], new=ag["orig"],
                                  autogroup=ag["name"], why=f"member of the session of gone pid {entry['pid']}")
                        _sys.write_autogroup(int(d), ag["orig"])
                        return 1
                    return 0
            except (ProcessGone, AccessDenied, OSError):
                continue
        return 0
