"""The daemon: collect -> predict -> smooth -> plan -> apply, once per window, in one loop.

This is the only module in the service that loops and sleeps. Signals become flags the
loop consumes between windows: SIGHUP reloads policy and model (validated first; the old
ones stay on error), SIGTERM/SIGINT restore every changed value and end with status 0.
Each window it also writes a small state file that `procsift explain PID` reads.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import sys
import tempfile
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import numpy as np

from procsift.collector import Window
from procsift.collector.traceio import windows_to_columns
from procsift.collector.errors import ProcessGone, ProcsiftError
from procsift.collector.proc import ProcReader, read_stat
from procsift.collector.schema import printable
from procsift.collector.samples import ProcInfo
from procsift.collector.session import Collector
from procsift.distributor import (
    Applier, Plan, PlannerState, Policy, ProcessView, SystemView, autogroup_of, load_policy, plan, system_view,
)
from procsift.models import Bundle, Smoother, load_bundle
from procsift.service.groupstats import GroupHistory, Sample, export
from procsift.service.live import Command, LiveLink

__all__ = ["DaemonConfig", "Daemon", "state_file", "read_state", "demand_gate", "demotion_gate",
           "evidence_gate", "window_demand"]

log = logging.getLogger("procsift.daemon")
STATE_FILE = "daemon-state.json"
KEEP_WINDOWS = 5  # windows of history kept per process for `explain`


def state_file(state_dir: str | os.PathLike[str]) -> Path:
    """Where the running daemon publishes its per-process explanations."""
    return Path(state_dir) / STATE_FILE


def read_state(state_dir: str | os.PathLike[str]) -> dict[str, Any]:
    """The running daemon's published state; ProcsiftError when no daemon is running."""
    path = state_file(state_dir)
    try:
        state = json.loads(path.read_text())
    except FileNotFoundError as err:
        raise ProcsiftError(f"no running procsift daemon (no {path}); start one with 'procsift run'") from err
    except (OSError, ValueError) as err:
        raise ProcsiftError(f"{path}: unreadable daemon state ({err})") from err
    pid = int(state.get("daemon_pid", 0))
    if not pid or not Path(f"/proc/{pid}").exists():
        raise ProcsiftError(f"the procsift daemon that wrote {path} (PID {pid}) is not running")
    return state


@dataclass
class DaemonConfig:
    """What `procsift run` was asked to do."""

    policy_path: str | None = None
    model_path: str | None = None
    window_s: float | None = None  # None: the model bundle's own window length
    dry_run: bool = False
    journal_path: str = "/var/lib/procsift/journal.json"
    state_dir: str = "/var/lib/procsift"
    backend: str = "auto"
    table: bool = True
    count: int | None = None  # stop after this many windows (tests, benchmarks)
    force_proc: bool = False
    pids: list[int] | None = None  # manage only these processes and their descendants
    api: bool = False              # serve the REST API and dashboard from this process
    host: str = "127.0.0.1"
    port: int = 8765
    token_file: str | None = None  # None: <state_dir>/api-token


@dataclass
class _Tracked:
    """What the daemon knows about one live process."""

    view: ProcessView
    windows: list[dict[str, Any]] = field(default_factory=list)
    window_label: str = ""
    window_proba: dict[str, float] = field(default_factory=dict)
    demand: float | None = None   # share of its time off the run queue spent on CPU or in D state
    gate: str | None = None       # why its label is not acted on, if it is not
    served_as: str | None = None  # a label other than background it has held in this run
    prev_label: str | None = None  # the smoothed label after the previous window
    bg_streak: int = 0            # consecutive sufficient windows labelled background


BACKGROUND_MIN_DEMAND = 0.25
"""A process labelled background is idled only if it ran (or waited on the disk) at least this
share of its windows before procsift placed it. Idling a light process gains the machine
nothing and, if the label is wrong, starves it; and once idled its windows look more like
background (long run-queue waits), so a wrong label would confirm itself."""


def demand_gate(label: str | None, demand: float | None) -> str | None:
    """Why a label must not be acted on (None: act on it); pure."""
    if label == "background" and (demand is None or demand < BACKGROUND_MIN_DEMAND):
        shown = "unknown" if demand is None else f"{100 * demand:.0f}%"
        return (f"labelled background, but its CPU/disk demand ({shown} of a window) is under "
                f"{100 * BACKGROUND_MIN_DEMAND:.0f}%: not worth idling, left alone")
    return None


def window_demand(w: Window) -> float:
    """How much of a window the process wanted the CPU or the disk, whatever others wanted: its
    run and D-state time over the time it was not waiting on the run queue. A CPU hog is 1.0
    on an idle machine and on one with thirty runnable tasks alike (on a share of the whole
    window, contention alone made it look light, and a hog went unidled on a busy machine)."""
    own = w.dur_s * 1e9 - w.runq_ns
    if own <= 0:
        return 1.0 if w.runq_ns > 0 else 0.0
    return min(1.0, (w.run_ns + w.block_ns) / own)


DEMOTE_STREAK = 4
"""A process procsift has seen doing interactive or html-serving work is idled only after its
windows say background this many times in a row. A wrong demotion starves a latency-bound
process (a busy nginx worker at saturation looks CPU-bound for a window or two); a late one
costs little. New processes that were never anything but background are not delayed."""


def demotion_gate(label: str | None, was: str | None, bg_streak: int) -> str | None:
    """Why a background label must not be acted on yet, for a process once labelled otherwise; pure."""
    if label == "background" and was is not None and bg_streak < DEMOTE_STREAK:
        return (f"was {was}; labelled background in {bg_streak} window(s) in a row, "
                f"{DEMOTE_STREAK} needed before idling it: left alone for now")
    return None


EVIDENCE_WINDOWS = 2
"""A label is acted on only once the process has shown this many windows of real activity.
The smoother reports a label from the first one (the API and `predict` need it), but one
window is too little to change a process for: a `make` or `timeout` woken once at exit, or a
program starting up, would otherwise be placed by a single, often idle-looking window."""


def evidence_gate(label: str | None, active_windows: int) -> str | None:
    """Why a label must not be acted on yet: too few active windows behind it; pure."""
    if label is not None and active_windows < EVIDENCE_WINDOWS:
        return (f"labelled {label} from {active_windows} active window(s), "
                f"{EVIDENCE_WINDOWS} needed before acting on it: left alone for now")
    return None


def _window_summary(w: Window, label: str, proba: dict[str, float]) -> dict[str, Any]:
    return {"t_start": round(w.t_start, 3), "dur_s": round(w.dur_s, 3), "label": label,
            "proba": proba, "insufficient": w.insufficient, "run_ms": round(w.run_ns / 1e6, 2),
            "runq_ms": round(w.runq_ns / 1e6, 2), "max_wait_ms": round(w.max_wait_ns / 1e6, 2),
            "syscalls": w.syscalls_total, "top_syscalls": w.top_syscalls(3),
            "run_wait_transitions": w.run_wait_transitions}


def _groups(result: Plan, procs: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per label: how many processes, the profile(s) applied and the CPUs they may use."""
    count: dict[str, int] = {}
    for p in procs.values():
        count[p["label"] or "unlabelled"] = count.get(p["label"] or "unlabelled", 0) + 1
    profiles: dict[str, set[str]] = {}
    cpus: dict[str, set[int]] = {}
    for a in result.actions:
        profiles.setdefault(a.label or "unlabelled", set()).add(a.profile)
        cpus.setdefault(a.label or "unlabelled", set()).update(a.cpus or ())
    return {k: {"processes": count.get(k, 0), "profiles": sorted(profiles.get(k, ())),
                "cpus": sorted(cpus.get(k, ()))} for k in {*count, *profiles}}


def _alive(pid: int, start_time: int) -> bool:
    st = read_stat(pid)
    return st is not None and st.start_time == start_time


class Daemon:
    """One procsift service instance (see module docstring)."""

    def __init__(self, cfg: DaemonConfig, out: TextIO = sys.stdout) -> None:
        self.cfg = cfg
        self.out = out
        self.policy: Policy = load_policy(cfg.policy_path)
        self.bundle: Bundle = load_bundle(cfg.model_path)
        if cfg.window_s is None:
            # Count-like features (transitions, longest wait) depend on the window: by
            # default run at the window the model was trained on.
            cfg.window_s = float(self.bundle.window_s)
        elif abs(cfg.window_s - self.bundle.window_s) > 1e-9:
            print(f"procsift: warning: {cfg.window_s:g} s windows, but the model was trained on "
                  f"{self.bundle.window_s:g} s windows; labels may be less accurate", file=sys.stderr)
        self.smoother = Smoother()
        self.state = PlannerState()
        self.procs: dict[tuple[int, int], _Tracked] = {}
        self.last_plan: Plan | None = None
        self.windows = 0
        self.changes = 0
        self.loop_ms: list[float] = []
        self._stop = False
        self._reload = False
        self._reader = ProcReader()
        self._idled: set[tuple[int, int]] = set()
        self._follow: set[int] = set(cfg.pids or ())
        self.live = LiveLink()
        self.paused = False
        self.label_changes: deque[dict[str, Any]] = deque(maxlen=50)
        self.history = GroupHistory(span_s=600.0)  # the dashboard's last 10 minutes

    # -- signals become flags; the loop acts on them between windows --------------------
    def _on_signal(self, signum: int, _frame: object) -> None:
        if signum == signal.SIGHUP:
            self._reload = True
        else:
            self._stop = True

    @property
    def backend(self) -> str:
        """The placement backend: --backend when given, else the policy's own `backend` (it was
        ignored before: a policy's backend = "none" still got the cgroup backend)."""
        return self.cfg.backend if self.cfg.backend != "auto" else self.policy.backend

    @property
    def _columns(self) -> list[str]:
        """The trace columns the model (and its /proc fallback) reads."""
        return self.bundle.row_columns

    def reload(self) -> str | None:
        """Re-read policy and model; keep the running ones if either is invalid (returns why)."""
        self._reload = False
        why: str | None
        try:
            policy = load_policy(self.cfg.policy_path)
            bundle = load_bundle(self.cfg.model_path)
        except ProcsiftError as err:
            why = str(err)
        except Exception as err:  # noqa: BLE001 - the reload boundary: nothing a loader raises may end the daemon
            kind = type(err).__qualname__ if type(err).__module__ == "builtins" else \
                f"{type(err).__module__}.{type(err).__qualname__}"
            why = f"{kind} while loading policy or model: {err}"
        else:
            why = None
        if why is not None:
            log.warning("event=reload-refused why=%r then='kept the running policy and model'", why)
            print(f"procsift: reload refused, keeping the running policy and model: {printable(why)}",
                  file=sys.stderr)
            return why
        # Both are whole and valid: only now do they replace the running ones (together).
        self.policy, self.bundle = policy, bundle
        log.info("event=reloaded policy=%s model=%s", self.cfg.policy_path or "default",
                 self.cfg.model_path or "default")
        return None

    def command(self, name: str, applier: Applier) -> dict[str, Any]:
        """Carry out one control command from the API (between windows, in the loop)."""
        if name == "pause" or name == "restore":
            report = applier.restore_all()
            self.paused = True
            self._idled = set()
            self.live.metrics.add("procsift_restores_total", report.restored)
            log.info("event=%s restored=%d writes=%d", name, report.restored, report.writes)
            return {"ok": True, "paused": True, "restored": report.restored, "writes": report.writes,
                    "note": "labels are still computed; nothing is changed until resume"}
        if name == "resume":
            self.paused = False
            log.info("event=resume")
            return {"ok": True, "paused": False}
        if name == "reload":
            why = self.reload()
            return {"ok": why is None, "error": why, "policy": self.policy.kind, "model": self.bundle.kind}
        raise ValueError(f"unknown command {name!r}")

    def serve_commands(self, applier: Applier) -> None:
        """Carry out every command the API queued since the last call (the loop calls it each window)."""
        for cmd in self.live.take_commands():
            self._answer(cmd, applier)

    def _answer(self, cmd: Command, applier: Applier) -> None:
        if not cmd.future.set_running_or_notify_cancel():
            return  # the API gave up waiting
        try:
            cmd.future.set_result(self.command(cmd.name, applier))
        except Exception as err:  # noqa: BLE001 - handed to the waiting API thread, not lost
            cmd.future.set_exception(err)

    def run(self) -> int:
        """Run until stopped (or `count` windows); restore everything; return the exit status."""
        applier = Applier(self.cfg.journal_path, backend=self.backend, dry_run=self.cfg.dry_run)
        recovered = applier.recover()
        if recovered.restored:
            print(f"procsift: restored {recovered.restored} process(es) left changed by a previous run",
                  file=sys.stderr)
        old = {s: signal.signal(s, self._on_signal) for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)}
        collector = Collector(window_s=self.cfg.window_s, force_proc=self.cfg.force_proc, pids=self.cfg.pids)
        server = self._start_api() if self.cfg.api else None
        m = self.live.metrics
        try:
            for rows in collector.windows(count=self.cfg.count, stop=lambda: self._stop):
                t0 = time.perf_counter()
                self.tick(rows, collector.kind, applier)
                self.serve_commands(applier)
                took = time.perf_counter() - t0
                self.loop_ms.append(took * 1e3)
                self.loop_ms = self.loop_ms[-100:]
                m.add("procsift_loop_seconds_total", took)
                m.set("procsift_loop_seconds_last", took)
                m.add("procsift_rows_collected_total", len(rows))
                m.set("procsift_collector_drops_total", collector.dropped)
                if self._reload:
                    self.reload()
                if self._stop:
                    break
        finally:
            if server is not None:
                server.stop()
            collector.close()
            report = applier.restore_all()
            applier.close()
            for s, h in old.items():
                signal.signal(s, h)
            try:
                state_file(self.cfg.state_dir).unlink()
            except FileNotFoundError:
                pass
            print(f"procsift: stopped; restored {report.restored} process(es), {report.writes} value(s)",
                  file=sys.stderr)
        return 0

    def _start_api(self):  # type: ignore[no-untyped-def]
        from procsift.service.api.server import start_in_thread  # noqa: PLC0415  (FastAPI only when asked)

        token = self.cfg.token_file or str(Path(self.cfg.state_dir) / "api-token")
        return start_in_thread(self.cfg.host, self.cfg.port, bundle=lambda: self.bundle, live=self.live,
                               token_file=token)

    def tick(self, rows: list[Window], kind: str, applier: Applier) -> Plan:
        """One window: label the rows, smooth, plan, apply, publish."""
        me = os.getpid()
        # Never ourselves; never kernel threads (kthreadd, PID 2, and its children).
        rows = [w for w in rows if w.pid != me and w.pid != 2 and w.ppid != 2]
        if rows:
            frame = windows_to_columns(rows, self._columns)
            labels, proba = self.bundle.predict_frame(frame, collector=kind)
        else:
            labels, proba = np.array([], dtype=object), np.zeros((0, len(self.bundle.labels)))
        names = list(self.bundle.labels)
        for i, w in enumerate(rows):
            key = (w.pid, w.start_time)
            if w.exited:
                self.procs.pop(key, None)
                self.smoother.forget(key)
                continue
            p = {n: round(float(v), 3) for n, v in zip(names, proba[i])}
            label = self.smoother.update(key, str(labels[i]), proba[i], w.insufficient)
            mean = self.smoother.proba(key)
            prob = float(mean[names.index(label)]) if label in names and mean is not None else 0.0
            try:
                ag = autogroup_of(w.pid)
            except ProcessGone:
                continue
            t = self.procs.get(key)
            demand: float | None
            if key not in self._idled and w.dur_s > 0:
                # Measured only while not idled by procsift: its own placement inflates waits.
                share = window_demand(w)
                prev = t.demand if t is not None else None
                demand = share if prev is None else 0.5 * prev + 0.5 * share
            else:
                demand = t.demand if t is not None else None
            served_as = t.served_as if t is not None else None
            if label not in (None, "background"):
                served_as = label
            streak = t.bg_streak if t is not None else 0
            if not w.insufficient:
                streak = streak + 1 if str(labels[i]) == "background" else 0
            st = self.smoother.state(key)
            gate = (evidence_gate(label, len(st.history) if st is not None else 0)
                    or demand_gate(label, demand) or demotion_gate(label, served_as, streak))
            view = ProcessView.from_window(w, None if gate else label, prob,
                                           autogroup=ag[0] if ag else None)
            if t is None:
                t = self.procs[key] = _Tracked(view=view)
            elif label != t.prev_label and t.prev_label is not None:
                self.label_changes.append({"t": round(w.t_start + w.dur_s, 3), "pid": w.pid, "comm": w.comm,
                                           "from": t.prev_label, "to": label, "probability": round(prob, 3)})
            t.prev_label = label
            t.view, t.demand, t.gate, t.served_as, t.bg_streak = view, demand, gate, served_as, streak
            t.window_label, t.window_proba = str(labels[i]), p
            t.windows = (t.windows + [_window_summary(w, str(labels[i]), p)])[-KEEP_WINDOWS:]
        for key in [k for k in self.procs if not _alive(*k)]:
            self.procs.pop(key)
            self.smoother.forget(key)
        views = [t.view for t in self.procs.values()] + self._unseen_views()
        sysv = system_view()
        result = plan(self.policy, views, sysv, self.state)
        self.state = result.state
        m = self.live.metrics
        m.add("procsift_windows_collected_total")
        m.add("procsift_predictions_total", len(rows))
        writes = 0
        if self.paused:
            self._idled = set()
        else:
            self._idled = {(a.pid, a.start_time) for a in result.actions if a.label == "background"}
            report = applier.apply(result)
            self.changes += report.writes
            writes = report.writes
            m.add("procsift_changes_applied_total", report.writes)
            m.add("procsift_backoffs_total", report.backed_off)
        self.last_plan = result
        self.windows += 1
        self._record(rows, sysv, writes)
        self._publish(result)
        if self.cfg.table:
            self._show(result, kind)
        return result

    def _record(self, rows: list[Window], sysv: SystemView, writes: int) -> None:
        """The window's per-group figures: into the dashboard's history and the Prometheus series."""
        samples = [Sample(key=(w.pid, w.start_time), label=self.procs[(w.pid, w.start_time)].prev_label,
                          run_ns=w.run_ns, runq_ns=w.runq_ns, switches_in=w.switches_in)
                   for w in rows if (w.pid, w.start_time) in self.procs]
        tracked = {k: (t.view.comm, t.prev_label) for k, t in self.procs.items()}
        point = self.history.record(time.time(), float(self.cfg.window_s or 1.0), samples, tracked, writes,
                                    None if sysv.psi_cpu is None else sysv.psi_cpu.some_avg10,
                                    None if sysv.psi_io is None else sysv.psi_io.some_avg10)
        export(self.live.metrics, point, samples, self.bundle.labels)

    def _unseen_views(self) -> list[ProcessView]:
        """Unlabelled views of the live processes not seen active yet: the planner needs the
        whole tree so that exceptions reach descendants and autogroup sessions agree."""
        seen = {pid for pid, _ in self.procs}
        me = os.getpid()
        out = []
        for name in os.listdir("/proc"):
            if not name.isdigit():
                continue
            pid = int(name)
            if pid in seen or pid == me or pid == 2:
                continue
            info = self._reader.info(pid, io=False)
            if info is None or info.ppid == 2:  # gone, or a kernel thread
                continue
            if self.cfg.pids is not None and pid not in self._followed(info):
                continue
            out.append(ProcessView(pid=pid, start_time=info.start_time, comm=info.comm, label=None,
                                   probability=0.0, exe=info.exe, uid=info.uid, ppid=info.ppid,
                                   cgroup=info.cgroup, nthreads=info.nthreads))
        return out

    def _followed(self, info: ProcInfo) -> set[int]:
        """With -p, the followed set (grown as their descendants appear)."""
        if info.ppid in self._follow:
            self._follow.add(info.pid)
        return self._follow

    def _publish(self, result: Plan) -> None:
        actions = {a.pid: a for a in result.actions}
        skipped = dict(result.skipped)
        procs = {}
        for (pid, start), t in self.procs.items():
            a = actions.get(pid)
            why = skipped.get(pid)
            # PID 1 and policy exceptions explain more than a gate on the label does
            rule = a.rule if a else t.gate if t.gate and why in (None, "no label yet") else why or "not planned"
            procs[str(pid)] = {
                "pid": pid, "start_time": start, "comm": t.view.comm,
                "label": t.prev_label,
                "demand": None if t.demand is None else round(t.demand, 3),
                "probability": round(t.view.probability, 3), "last_window_label": t.window_label,
                "last_window_proba": t.window_proba, "windows": t.windows,
                "rule": rule,
                "action": None if a is None else {
                    k: v for k, v in a.__dict__.items()
                    if k not in ("pid", "start_time", "comm", "label", "rule") and v is not None},
            }
        state = {"daemon_pid": os.getpid(), "t": time.time(), "window_s": self.cfg.window_s,
                 "dry_run": self.cfg.dry_run, "policy": self.policy.kind, "windows": self.windows,
                 "processes": procs}
        self.live.metrics.set("procsift_processes", len(procs))
        self.live.metrics.set("procsift_paused", float(self.paused))
        self.live.publish({**state, "paused": self.paused, "model": self.bundle.kind,
                           "groups": _groups(result, procs), "plan": [dict(a.__dict__) for a in result.actions],
                           "skipped": [{"pid": p, "why": why} for p, why in result.skipped],
                           "label_changes": list(self.label_changes),
                           "history": self.history.snapshot(float(self.cfg.window_s or 1.0))})
        path = state_file(self.cfg.state_dir)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".state.", dir=path.parent)
        with os.fdopen(fd, "w") as fh:
            json.dump(state, fh)
        os.replace(tmp, path)

    def _show(self, result: Plan, kind: str) -> None:
        groups: dict[str, int] = {}
        for t in self.procs.values():
            groups[t.view.label or "unlabelled"] = groups.get(t.view.label or "unlabelled", 0) + 1
        head = (f"procsift run - {time.strftime('%H:%M:%S')}  {kind} collector  policy {self.policy.kind}"
                f"{'  DRY RUN' if self.cfg.dry_run else ''}  window {self.windows}  "
                + "  ".join(f"{k} {v}" for k, v in sorted(groups.items())))
        lines = [head, f"{'PID':>7} {'COMM':<15} {'LABEL':<13} {'P':>5} {'PROFILE':<12} RULE"]
        acts = sorted(result.actions, key=lambda a: (a.label or "", a.pid))
        for a in acts[:40]:
            tracked = self.procs.get((a.pid, a.start_time))
            prob = tracked.view.probability if tracked else 0.0
            lines.append(f"{a.pid:>7} {printable(a.comm)[:15]:<15} {a.label or '-':<13} {prob:5.2f} {a.profile[:12]:<12} "
                         f"{a.rule[:60]}")
        if len(acts) > 40:
            lines.append(f"... and {len(acts) - 40} more")
        text = "\n".join(lines)
        if self.out.isatty():
            self.out.write("\x1b[H\x1b[2J" + text + "\n")
        else:
            self.out.write(text + "\n\n")
        self.out.flush()


def run_daemon(cfg: DaemonConfig, out: TextIO = sys.stdout,
               on_ready: Callable[[Daemon], None] | None = None) -> int:
    """Build and run a daemon (the `procsift run` entry point)."""
    daemon = Daemon(cfg, out)
    if on_ready:
        on_ready(daemon)
    return daemon.run()
