"""The applier: the one place that changes processes. Journal first, re-check identity before every write."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

from procsift.distributor import _sys
from procsift.distributor._cgroup import PREFIX, CgroupBackend, CpusetBackend, find_cpu_hierarchy
from procsift.distributor._log import log_event
from procsift.distributor._placement import _Pending, _Placer
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


class Applier(_Restorer, _Placer):
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
        self.cpusets: CpusetBackend | None = None
        if self.backend == "cgroup":
            self.cgroups = CgroupBackend(prefix=cgroup_prefix)
            try:
                self.cpusets = CpusetBackend(prefix=cgroup_prefix)
            except BackendUnavailable:
                pass  # cpu weight/idle still work; CPUs by per-thread affinity only
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
                  cpuset=self.cpusets.describe() if self.cpusets else None,
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
            for backend in (self.cgroups, self.cpusets):
                if backend is not None:
                    backend.remove_empty_groups()
            if self.cgroups is None:
                try:  # a journal from a run with the cgroup backend, restored by `procsift restore`
                    CgroupBackend().remove_empty_groups()
                    CpusetBackend().remove_empty_groups()
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
        if not writes and pending.move is None and pending.cpuset_move is None and pending.autogroup is None:
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
        if self.cpusets is not None and "cpuset" in entry:
            now_cs = self.cpusets.current(pid)
            if now_cs != entry["cpuset"]["set"]:
                return f"cpuset is {now_cs}, procsift set {entry['cpuset']['set']}"
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
            if p.cpuset_move is not None and self.cpusets is not None:
                # First: attaching to a cpuset resets every thread's affinity to the set's CPUs.
                self._check(action.pid, action.start_time)
                log_event("would-move" if self.dry_run else "move", pid=action.pid, comm=action.comm,
                          cpuset=p.cpuset_move, rule=action.rule)
                if not self.dry_run:
                    self.cpusets.move(action.pid, p.cpuset_move)
                    n += 1
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

    def _back_off(self, key: str, entry: dict[str, Any], drift: str, report: ApplyReport) -> None:
        """Someone else changed a value procsift set: withdraw what is still ours, then leave it alone."""
        log_event("back-off", logging.WARNING, pid=entry["pid"], comm=entry["comm"], why=drift,
                  then="procsift leaves this process alone from now on")
        self._restore_key(key, ApplyReport(), why="back-off")
        self.journal.backed_off.add(key)
        report.backed_off += 1
