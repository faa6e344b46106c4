"""The applier: the one place that changes processes. Journal first, re-check identity before every write."""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from procsift.distributor import _sys
from procsift.distributor._cgroup import PREFIX, CgroupBackend, find_cpu_hierarchy
from procsift.distributor._log import log_event
from procsift.distributor._restore import ApplyReport, _Restorer
from procsift.distributor._threadstate import _SCHED_FIELDS, FIELDS, is_fair, read_thread, same, write_thread
from procsift.distributor.errors import AccessDenied, BackendUnavailable, ProcessGone
from procsift.distributor.journal import Journal
from procsift.distributor.views import Action, Plan

__all__ = ["Applier", "ApplyReport", "resolve_backend"]


def resolve_backend(backend: str) -> str:
    """"auto" → "cgroup" where a cpu hierarchy is writable, else "autogroup" where it is on, else "none"."""
    if backend != "auto":
        return backend
    if find_cpu_hierarchy() is not None:
        return "cgroup"
    try:
        if Path("/proc/sys/kernel/sched_autogroup_enabled").read_text().strip() == "1":
            return "autogroup"
    except OSError:
        pass
    return "none"


@dataclass
class _Pending:
    """Phase-1 result for one process: the per-thread writes and placement moves to make."""

    action: Action
    entry: dict[str, Any]
    writes: list[tuple[int, dict[str, Any], dict[str, Any]]]
    move: str | None = None
    autogroup: int | None = None
    autogroup_name: str | None = None


def _key(pid: int, start_time: int) -> str:
    return f"{pid}:{start_time}"


def _desired(action: Action, slice_ok: bool) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if action.nice is not None:
        out["nice"] = action.nice
    if action.cpus is not None:
        out["affinity"] = list(action.cpus)
    if action.io_class is not None:
        out["io"] = [action.io_class, action.io_level or 0]
    if action.sched_policy is not None:
        out["policy"] = _sys.POLICY_NUM[action.sched_policy]
    if action.slice_us is not None and slice_ok:
        out["slice"] = action.slice_us * 1000
    return out


class Applier(_Restorer):
    """Applies plans to live processes, journalling originals first; restores them on demand.

    backend: "auto" | "cgroup" | "autogroup" | "none" — how a profile's cpu_weight / cpu_idle
    and the planner's autogroup_nice are made real under autogroup. protect: extra pids never
    touched (PID 1, this process and its parent always are).
    """

    def __init__(self, journal_path: str | Path, backend: str = "auto", dry_run: bool = False,
                 protect: tuple[int, ...] = (), cgroup_prefix: str = PREFIX) -> None:
        self.dry_run = dry_run
        self.journal = Journal(journal_path)
        self.backend = resolve_backend(backend)
        self.cgroups: CgroupBackend | None = None
        if self.backend == "cgroup":
            self.cgroups = CgroupBackend(prefix=cgroup_prefix)
        elif self.backend not in ("autogroup", "none"):
            raise BackendUnavailable(f"unknown backend {backend!r}; allowed: auto, cgroup, autogroup, none")
        self.default_slice = _sys.probe_slice()
        self.protected = {1, os.getpid(), os.getppid(), *protect}
        self._opened = False
        self._ag_members: dict[str, list[int]] | None = None
        self._plan_ag: dict[int, int | None] = {}
        self._given_up: set[str] = set()
        self._warned_none = False
        log_event("applier-start", backend=self.cgroups.describe() if self.cgroups else self.backend,
                  slice="supported" if self.default_slice else "unsupported", dry_run=dry_run,
                  journal=str(journal_path))

    # -- public -------------------------------------------------------------------------

    def recover(self) -> ApplyReport:
        """Restore everything a previous (crashed or killed) run left in the journal."""
        self._open(recovering=True)
        report = ApplyReport()
        if self.journal.processes:
            log_event("recover", processes=len(self.journal.processes))
        for key in list(self.journal.processes):
            self._restore_key(key, report, why="recover")
        self.journal.backed_off = {k for k in self.journal.backed_off if self._alive_key(k)}
        self._save()
        return report

    def apply(self, plan: Plan) -> ApplyReport:
        """Make live processes match the plan; restore processes the plan no longer mentions."""
        self._open()
        if self.backend == "none" and not self._warned_none:
            self._warned_none = True
            log_event("backend-none", logging.WARNING, why="cpu_weight, cpu_idle and autogroup nice are "
                      "ignored; under autogroup a background nice alone barely helps other sessions")
        report = ApplyReport()
        self._ag_members = None
        self._plan_ag = {a.pid: a.autogroup_nice for a in plan.actions}
        pending: list[_Pending] = []
        wanted = set()
        for action in plan.actions:
            key = _key(action.pid, action.start_time)
            wanted.add(key)
            try:
                writes = self._prepare(action, key, report)
            except ProcessGone:
                report.gone += 1
                self._forget(key)
                continue
            except AccessDenied as err:
                report.failed += 1
                self._given_up.add(key)  # said once; not retried every window
                log_event("denied", logging.WARNING, pid=action.pid, comm=action.comm, why=str(err),
                          then="not retried until procsift restarts")
                continue
            if writes is not None:
                pending.append(writes)
        for key in list(self.journal.processes):
            if key not in wanted:
                self._restore_key(key, report, why="no longer planned")
        self.journal.backed_off = {k for k in self.journal.backed_off if k in wanted or self._alive_key(k)}
        self._save()  # originals and intended values are on disk before the first write
        for p in pending:
            self._execute(p, report)
        self._save()
        return report

    def restore_all(self) -> ApplyReport:
        """Put back every value procsift changed (on stop and by `procsift restore`)."""
        self._open()
        report = ApplyReport()
        for key in list(self.journal.processes):
            self._restore_key(key, report, why="restore")
        self._save()
        if not self.dry_run:
            try:
                (self.cgroups or CgroupBackend()).remove_empty_groups()
            except BackendUnavailable:
                pass
        return report

    def close(self) -> None:
        """Release the journal lock (does not restore: call restore_all first on a clean stop)."""
        self.journal.close()
        self._opened = False

    # -- internals ----------------------------------------------------------------------

    def _open(self, recovering: bool = False) -> None:
        if self._opened:
            return
        self.journal.open()
        self._opened = True
        if not recovering and self.journal.processes:
            # A journal left by a crashed run: put those values back before doing anything new.
            self.recover()

    def _save(self) -> None:
        if not self.dry_run:
            self.journal.save()

    def _alive_key(self, key: str) -> bool:
        pid, start = map(int, key.split(":"))
        try:
            return _sys.read_stat(pid).start_time == start
        except ProcessGone:
            return False

    def _check(self, pid: int, start_time: int) -> _sys.Stat:
        """Identity re-check before a write: same pid + start_time, or ProcessGone."""
        st = _sys.read_stat(pid)
        if st.start_time != start_time:
            raise ProcessGone(pid, st.comm)
        return st

    def _refuse(self, pid: int, st: _sys.Stat) -> str | None:
        if pid in self.protected:
            return "protected (PID 1, procsift or its parent)"
        if st.flags & _sys.PF_KTHREAD or st.ppid == 2 or pid == 2:
            return "kernel thread"
        return None

    def _prepare(self, action: Action, key: str, report: ApplyReport) -> _Pending | None:
        """Phase 1: check, detect someone else's change, journal originals and intended values."""
        if key in self.journal.backed_off:
            report.backed_off += 1
            return None
        if key in self._given_up:
            report.failed += 1
            return None
        st = self._check(action.pid, action.start_time)
        why = self._refuse(action.pid, st)
        if why:
            report.refused += 1
            log_event("refuse", logging.WARNING, pid=action.pid, comm=st.comm, why=why)
            return None
        entry = self.journal.processes.get(key)
        tids = _sys.thread_ids(action.pid)
        cur = {}
        for tid in tids:
            try:
                cur[tid] = read_thread(tid, self.default_slice)
            except ProcessGone:
                continue  # a thread that just exited
        if entry is not None:
            drift = self._drift(action.pid, entry, cur)
            if drift:
                self._back_off(key, entry, drift, report)
                return None
            self._note_new_threads(entry, cur)
        else:
            if not cur:
                raise ProcessGone(action.pid, st.comm)
            main = cur.get(action.pid) or next(iter(cur.values()))
            entry = {"pid": action.pid, "start_time": action.start_time, "comm": st.comm,
                     "default": main, "threads": {str(t): v for t, v in cur.items()},
                     "applied": {}, "applied_tids": {}}
        desired = _desired(action, self.default_slice is not None)
        applied: dict[str, Any] = entry["applied"]
        writes = []
        for tid, now in cur.items():
            orig = entry["threads"].get(str(tid), entry["default"])
            want: dict[str, Any] = {}
            for f in FIELDS:
                if f in _SCHED_FIELDS and not is_fair(now["policy"]):
                    continue  # never re-prioritise realtime / deadline threads
                target = desired[f] if f in desired else orig[f] if f in applied else None
                if (f in desired or f in applied) and not same(f, now[f], target):
                    want[f] = target
            if want:
                writes.append((tid, want, now))
        for f in list(applied):
            if f not in desired:
                del applied[f]  # restored to the original by the writes above
        applied.update(desired)
        entry["applied_tids"] = {str(t): [f for f in desired if f not in _SCHED_FIELDS or is_fair(v["policy"])]
                                 for t, v in cur.items()}
        pending = _Pending(action, entry, writes)
        self._prepare_placement(action, entry, pending, report)
        if writes or entry.get("cgroup") or entry.get("autogroup") or applied:
            if not self.dry_run:
                self.journal.processes[key] = entry
        if not writes and pending.move is None and pending.autogroup is None:
            report.unchanged += 1
        return pending

    @staticmethod
    def _note_new_threads(entry: dict[str, Any], cur: dict[int, dict[str, Any]]) -> None:
        """Journal originals for threads born since: a value equal to procsift's was inherited
        (its original is the process's), anything else the program chose itself (keep it)."""
        threads, applied, default = entry["threads"], entry["applied"], entry["default"]
        for tid, now in cur.items():
            if str(tid) not in threads:
                threads[str(tid)] = {f: default[f] if f in applied and same(f, now[f], applied[f]) else now[f]
                                     for f in FIELDS}
        for tid_s in [t for t in threads if int(t) not in cur]:
            del threads[tid_s]  # exited: nothing to restore, and its number may be reused

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

    def _drift(self, pid: int, entry: dict[str, Any], cur: dict[int, dict[str, Any]]) -> str:
        """Which value someone else changed since procsift set it ("" if none)."""
        for tid_s, fields in entry.get("applied_tids", {}).items():
            now = cur.get(int(tid_s))
            if now is None:
                continue
            for f in fields:
                if f in entry["applied"] and not same(f, now[f], entry["applied"][f]):
                    return f"thread {tid_s} {f} is {now[f]}, procsift set {entry['applied'][f]}"
        if self.cgroups is not None and "cgroup" in entry:
            now_cg = self.cgroups.current(pid)
            if now_cg != entry["cgroup"]["set"]:
                return f"cgroup is {now_cg}, procsift set {entry['cgroup']['set']}"
        ag = entry.get("autogroup")
        if ag:
            now_ag = _sys.read_autogroup(pid)
            if now_ag and now_ag[0] == ag["name"] and now_ag[1] != ag["set"]:
                return f"autogroup nice is {now_ag[1]}, procsift set {ag['set']}"
        return ""

    def _execute(self, p: _Pending, report: ApplyReport) -> None:
        """Phase 2: the writes, each after re-checking pid + start_time and that the thread still exists."""
        n, action = 0, p.action
        try:
            for tid, want, now in p.writes:
                self._check(action.pid, action.start_time)
                if not _sys.thread_alive(action.pid, tid):
                    continue
                for f, v in want.items():
                    log_event("would-set" if self.dry_run else "set", pid=action.pid, tid=tid,
                              comm=action.comm, field=f, old=now[f], new=v, profile=action.profile,
                              rule=action.rule)
                if not self.dry_run:
                    try:
                        n += len(write_thread(tid, want, now, self.default_slice))
                    except ProcessGone:
                        continue  # that thread exited between the check and the write
            n += self._execute_placement(p)
        except ProcessGone:
            report.gone += 1
            self._forget(_key(action.pid, action.start_time))
            log_event("gone", pid=action.pid, comm=action.comm)
            return
        except (AccessDenied, OSError) as err:  # e.g. EINVAL: affinity outside the process's cpuset
            # Half-applied and the journal says otherwise: withdraw, and do not retry this run
            # (the next window would otherwise mistake the unwritten values for someone's change).
            report.failed += 1
            key = _key(action.pid, action.start_time)
            log_event("failed", logging.WARNING, pid=action.pid, comm=action.comm, why=str(err),
                      then="withdrawn; not retried until procsift restarts")
            self._restore_key(key, ApplyReport(), why="failed")
            self._given_up.add(key)
            return
        report.writes += n
        if n:
            report.changed += 1

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

    def _back_off(self, key: str, entry: dict[str, Any], drift: str, report: ApplyReport) -> None:
        """Someone else changed a value procsift set: withdraw what is still ours, then leave it alone."""
        log_event("back-off", logging.WARNING, pid=entry["pid"], comm=entry["comm"], why=drift,
                  then="procsift leaves this process alone from now on")
        self._restore_key(key, ApplyReport(), why="back-off")
        self.journal.backed_off.add(key)
        report.backed_off += 1
