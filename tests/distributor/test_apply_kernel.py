"""The applier on real processes this test started, read back from /proc and ioprio_get (root only)."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from procsift.distributor import Action, Applier, Plan
from procsift.distributor import _sys
from procsift.distributor._cgroup import find_cpu_hierarchy

from . import readback as rb
from .conftest import Child

pytestmark = pytest.mark.kernel

TWO_CPUS = len(os.sched_getaffinity(0)) >= 2
SLICE = _sys.probe_slice() is not None
ALL_CPUS = ",".join(map(str, sorted(os.sched_getaffinity(0))))


def start_time(pid: int) -> int:
    return int(rb.stat_fields(pid, pid)[22])


def action(pid: int, **fields: object) -> Action:
    base: dict[str, object] = dict(pid=pid, start_time=start_time(pid), comm="child", label="background",
                                   profile="test", rule="test rule")
    base.update(fields)
    return Action(**base)  # type: ignore[arg-type]


BG = dict(nice=7, io_class="idle", io_level=0, sched_policy="batch")


def assert_placed(child: Child) -> None:
    for tid in child.tids():
        assert rb.nice(child.pid, tid) == 7, tid
        assert rb.policy(child.pid, tid) == os.SCHED_BATCH, tid
        assert rb.ioprio(tid) == (3, 0), tid
        if TWO_CPUS:
            assert rb.affinity(child.pid, tid) == "0", tid
        if SLICE:
            assert rb.slice_ns(tid) == 2_000_000, tid


def test_every_thread_including_later_ones_is_placed_and_all_restored(child: Child, journal: Path) -> None:
    before = rb.snapshot(child.pid)
    a = Applier(journal, backend="none")
    act = action(child.pid, cpus=(0,) if TWO_CPUS else None, slice_us=2000, **BG)
    report = a.apply(Plan((act,)))
    assert report.changed == 1 and report.gone == 0
    assert len(child.tids()) == 4
    assert_placed(child)
    saved = json.loads(journal.read_text())["processes"]
    assert list(saved) == [f"{child.pid}:{act.start_time}"]
    child.spawn(4)  # threads that appear after the process was classified and placed
    assert len(child.tids()) == 8
    report = a.apply(Plan((act,)))
    assert report.backed_off == 0
    assert_placed(child)
    a.restore_all()
    after = rb.snapshot(child.pid)
    for tid in before:
        assert after[tid] == before[tid]
    main = before[child.pid]
    for tid in set(after) - set(before):  # the later threads get the process's originals
        assert after[tid][:4] == main[:4]
    assert json.loads(journal.read_text())["processes"] == {}
    a.close()


def test_a_process_exiting_mid_apply_is_counted_and_skipped(make_child, journal: Path) -> None:
    doomed, other = make_child(threads=6), make_child()

    class KillOnFirstWrite(logging.Handler):
        fired = False

        def emit(self, record: logging.LogRecord) -> None:
            if not self.fired and f"event=set pid={doomed.pid} " in record.getMessage():
                self.fired = True
                doomed.proc.kill()
                doomed.proc.wait()  # reaped: its /proc entry is gone before the next write

    handler = KillOnFirstWrite()
    logger = logging.getLogger("procsift.distributor")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        a = Applier(journal, backend="none")
        report = a.apply(Plan((action(doomed.pid, **BG), action(other.pid, **BG))))
    finally:
        logger.removeHandler(handler)
    assert handler.fired
    assert report.gone == 1 and report.changed == 1
    assert all(rb.nice(other.pid, t) == 7 for t in other.tids())
    assert list(json.loads(journal.read_text())["processes"]) == [f"{other.pid}:{start_time(other.pid)}"]
    a.restore_all()
    assert all(rb.nice(other.pid, t) == 0 for t in other.tids())


def test_a_reused_pid_is_not_touched(child: Child, journal: Path) -> None:
    a = Applier(journal, backend="none")
    stale = action(child.pid, **BG)
    stale = Action(**{**stale.__dict__, "start_time": stale.start_time - 1})
    report = a.apply(Plan((stale,)))
    assert report.gone == 1 and report.changed == 0
    assert all(rb.nice(child.pid, t) == 0 for t in child.tids())


APPLIER = textwrap.dedent("""
    import sys, time
    from procsift.distributor import Action, Applier, Plan
    pid, start, journal, backend = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
    extra = dict(cpus=(0,), cpu_idle=True) if backend == "cgroup" else {}
    a = Applier(journal, backend=backend, cgroup_prefix=sys.argv[5])
    a.apply(Plan((Action(pid=pid, start_time=start, comm="child", label="background", profile="bg",
                         rule="test", nice=7, io_class="idle", io_level=0, sched_policy="batch",
                         **extra),)))
    print("applied", flush=True)
    time.sleep(60)
""")


def kill9_applier(child: Child, journal: Path, backend: str = "none") -> None:
    proc = subprocess.Popen([sys.executable, "-c", APPLIER, str(child.pid), str(start_time(child.pid)),
                             str(journal), backend, f"procsift-test-{os.getpid()}"],
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "applied"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert_bg = [(rb.nice(child.pid, t), rb.ioprio(t)) for t in child.tids()]
    assert set(assert_bg) == {(7, (3, 0))}  # the killed run's changes are still there


@pytest.mark.parametrize("backend", ["none", "cgroup"])
def test_kill_9_then_procsift_restore_puts_originals_back(backend: str, child: Child, journal: Path) -> None:
    if backend == "cgroup" and (find_cpu_hierarchy() is None or not TWO_CPUS):
        pytest.skip("needs a cpu cgroup hierarchy and 2 CPUs")
    before = rb.snapshot(child.pid)
    kill9_applier(child, journal, backend)
    if backend == "cgroup":
        assert rb.cpu_cgroup(child.pid) != "/" and rb.cpu_cgroup(child.pid, "cpuset") != "/"
    cli = "import sys; from procsift.service.cli import main; sys.exit(main())"
    out = subprocess.run([sys.executable, "-c", cli, "restore", "--journal", str(journal)],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("restored 1 process(es)")
    assert rb.snapshot(child.pid) == before
    assert rb.cpu_cgroup(child.pid) == "/" and rb.cpu_cgroup(child.pid, "cpuset") == "/"


def test_kill_9_then_next_start_recovers(child: Child, journal: Path) -> None:
    kill9_applier(child, journal)
    a = Applier(journal, backend="none")
    a.apply(Plan(()))  # the first apply of a new run restores what the crashed run left
    for t in child.tids():
        assert (rb.nice(child.pid, t), rb.ioprio(t)) == (0, (0, 0))
    a.close()


def test_a_user_renice_makes_procsift_back_off_for_good(child: Child, journal: Path,
                                                        caplog: pytest.LogCaptureFixture) -> None:
    a = Applier(journal, backend="none")
    act = action(child.pid, **BG)
    a.apply(Plan((act,)))
    os.setpriority(os.PRIO_PROCESS, child.pid, 3)  # what `renice -n 3 -p PID` does
    with caplog.at_level(logging.INFO, logger="procsift.distributor"):
        report = a.apply(Plan((act,)))
    assert report.backed_off == 1 and report.changed == 0
    assert rb.nice(child.pid, child.pid) == 3  # the user's value stands
    assert any("event=back-off" in r.getMessage() and f"pid={child.pid}" in r.getMessage()
               for r in caplog.records)
    snap = rb.snapshot(child.pid)
    report = a.apply(Plan((act,)))  # and from then on it is left alone
    assert report.backed_off == 1 and report.writes == 0 and rb.snapshot(child.pid) == snap
    a.restore_all()
    assert rb.nice(child.pid, child.pid) == 3


def test_kernel_threads_pid_1_and_procsift_itself_are_never_touched(journal: Path) -> None:
    kthread = next(int(p) for p in sorted(os.listdir("/proc"), key=lambda s: int(s) if s.isdigit() else 0)
                   if p.isdigit() and int(p) > 2 and _sys.is_kernel_thread(int(p)))
    victims = [1, 2, kthread, os.getpid(), os.getppid()]
    before = {p: rb.snapshot(p) for p in victims}
    a = Applier(journal, backend="none")
    report = a.apply(Plan(tuple(action(p, nice=19, io_class="idle", sched_policy="idle",
                                       cpus=(0,) if TWO_CPUS else None) for p in victims)))
    assert report.refused == len(victims) and report.changed == 0
    assert {p: rb.snapshot(p) for p in victims} == before
    assert json.loads(journal.read_text())["processes"] == {}


def test_dry_run_changes_nothing(child: Child, journal: Path) -> None:
    before = rb.snapshot(child.pid)
    a = Applier(journal, backend="none", dry_run=True)
    a.apply(Plan((action(child.pid, **BG),)))
    assert rb.snapshot(child.pid) == before and not journal.exists()


def test_a_boost_that_ends_goes_back_to_the_original(child: Child, journal: Path) -> None:
    a = Applier(journal, backend="none")
    a.apply(Plan((action(child.pid, nice=-5, io_class="best-effort", io_level=0),)))
    assert {rb.nice(child.pid, t) for t in child.tids()} == {-5}
    a.apply(Plan((action(child.pid, io_class="best-effort", io_level=0),)))  # contention over
    assert {rb.nice(child.pid, t) for t in child.tids()} == {0}
    assert {rb.ioprio(t) for t in child.tids()} == {(2, 0)}
    a.apply(Plan(()))  # no longer planned at all
    assert {rb.ioprio(t) for t in child.tids()} == {(0, 0)}


@pytest.mark.skipif(find_cpu_hierarchy() is None, reason="no writable cpu cgroup hierarchy")
def test_cgroup_backend_moves_whole_process_and_back(child: Child, journal: Path) -> None:
    parent = f"procsift-test-{os.getpid()}"
    a = Applier(journal, backend="cgroup", cgroup_prefix=parent)
    assert a.cgroups is not None
    a.apply(Plan((action(child.pid, cpu_idle=True, cpu_weight=1, **BG),)))
    group = a.cgroups.mount / f"{parent}.w1-idle"
    assert rb.cpu_cgroup(child.pid) == f"/{parent}.w1-idle"
    assert (group / "cpu.idle").read_text().strip() == "1"
    child.spawn(2)  # later threads are in the group too: cgroup membership is inherited
    assert sorted(map(int, (group / "tasks").read_text().split())) == child.tids()
    a.restore_all()
    assert rb.cpu_cgroup(child.pid) == "/"
    assert not group.exists()


def test_autogroup_nice_only_for_a_session_that_is_all_background(make_child, journal: Path) -> None:
    alone = make_child(new_session=True)  # its own session, hence its own autogroup
    mine = make_child()                   # shares the test's session with processes not planned
    a = Applier(journal, backend="autogroup")
    mine_before = rb.autogroup(mine.pid)
    a.apply(Plan((action(alone.pid, autogroup_nice=12, **BG), action(mine.pid, autogroup_nice=12, **BG))))
    assert rb.autogroup(alone.pid)[1] == 12
    assert rb.autogroup(mine.pid) == mine_before
    a.restore_all()
    assert rb.autogroup(alone.pid)[1] == 0


@pytest.mark.skipif(not SLICE, reason="kernel without a custom EEVDF slice (6.12+)")
def test_a_slice_equal_to_the_default_is_not_taken_for_someone_elses_change(child: Child,
                                                                           journal: Path) -> None:
    default = _sys.probe_slice()
    assert default is not None
    a = Applier(journal, backend="none")
    act = action(child.pid, slice_us=default // 1000, nice=4)
    a.apply(Plan((act,)))
    report = a.apply(Plan((act,)))
    assert report.backed_off == 0 and {rb.nice(child.pid, t) for t in child.tids()} == {4}
    a.restore_all()
    assert {rb.nice(child.pid, t) for t in child.tids()} == {0}
    assert {rb.slice_ns(t) for t in child.tids()} == {default}


def cpu_ticks(pid: int) -> int:
    f = rb.stat_fields(pid, pid)
    return int(f[14]) + int(f[15])


def fg_share(fg: subprocess.Popen[bytes], bg: subprocess.Popen[bytes], seconds: float = 1.0) -> float:
    """The share of one CPU the foreground hog got while both compete for it."""
    import time
    f0, b0 = cpu_ticks(fg.pid), cpu_ticks(bg.pid)
    time.sleep(seconds)
    f, b = cpu_ticks(fg.pid) - f0, cpu_ticks(bg.pid) - b0
    return f / max(1, f + b)


@pytest.mark.parametrize("backend", ["cgroup", "autogroup"])
def test_background_really_yields_across_sessions(backend: str, journal: Path) -> None:
    """Two hogs on one CPU, each in its own session (autogroup): the placed one must give way."""
    if backend == "cgroup" and find_cpu_hierarchy() is None:
        pytest.skip("no writable cpu cgroup hierarchy")
    if backend == "autogroup" and Path("/proc/sys/kernel/sched_autogroup_enabled").read_text().strip() != "1":
        pytest.skip("autogroup is off")
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"], start_new_session=True)
            for _ in range(2)]
    try:
        for h in hogs:
            os.sched_setaffinity(h.pid, {min(os.sched_getaffinity(0))})
        fg, bg = hogs
        before = fg_share(fg, bg, 0.5)
        a = Applier(journal, backend=backend, cgroup_prefix=f"procsift-test-{os.getpid()}")
        a.apply(Plan((action(bg.pid, nice=19, cpu_idle=True, cpu_weight=1, autogroup_nice=19),)))
        during = fg_share(fg, bg)
        a.restore_all()
        assert 0.3 < before < 0.7  # an even split to begin with
        assert during > 0.85, f"fg share {during:.2f} with bg placed by {backend} (before {before:.2f})"
    finally:
        for h in hogs:
            h.kill()
            h.wait()


def test_autogroup_nice_goes_back_when_no_longer_planned(make_child, journal: Path) -> None:
    alone = make_child(new_session=True)
    a = Applier(journal, backend="autogroup")
    a.apply(Plan((action(alone.pid, nice=-4, autogroup_nice=-4),)))
    assert rb.autogroup(alone.pid)[1] == -4
    a.apply(Plan((action(alone.pid, nice=-4),)))  # e.g. contention over: the planner no longer asks
    assert rb.autogroup(alone.pid)[1] == 0
    assert {rb.nice(alone.pid, t) for t in alone.tids()} == {-4}
    a.restore_all()
    assert {rb.nice(alone.pid, t) for t in alone.tids()} == {0}


def test_a_write_the_kernel_refuses_is_withdrawn_not_half_applied(child: Child, journal: Path) -> None:
    offline = max(os.sched_getaffinity(0)) + 1000  # no such CPU: sched_setaffinity says EINVAL
    a = Applier(journal, backend="none")
    report = a.apply(Plan((action(child.pid, nice=6, cpus=(offline,)),)))
    assert report.failed == 1
    assert {rb.nice(child.pid, t) for t in child.tids()} == {0}
    assert json.loads(journal.read_text())["processes"] == {}
    assert a.apply(Plan((action(child.pid, nice=6, cpus=(offline,)),))).failed == 1


def test_a_thread_the_program_started_with_its_own_nice_gets_that_nice_back(child: Child, journal: Path) -> None:
    a = Applier(journal, backend="none")
    act = action(child.pid, nice=7)
    a.apply(Plan((act,)))
    old = set(child.tids())
    child.spawn(1)
    (new,) = set(child.tids()) - old
    os.setpriority(os.PRIO_PROCESS, new, 2)  # the program sets its new worker's nice itself
    a.apply(Plan((act,)))
    assert rb.nice(child.pid, new) == 7
    a.restore_all()
    assert rb.nice(child.pid, new) == 2 and {rb.nice(child.pid, t) for t in old} == {0}


LEADER = textwrap.dedent("""
    import subprocess, sys, time
    sleeper = [sys.executable, "-c", "import time; time.sleep(60)"]
    print(subprocess.Popen(sleeper).pid, flush=True)
    sys.stdin.readline()
    print(subprocess.Popen(sleeper).pid, flush=True)
    time.sleep(60)
""")


def test_autogroup_nice_is_restored_through_the_session_when_the_process_is_gone(journal: Path) -> None:
    """Every placed member exits, but a later command lives on in that session (autogroup)."""
    leader = subprocess.Popen([sys.executable, "-c", LEADER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True, start_new_session=True)
    assert leader.stdin is not None and leader.stdout is not None
    member = int(leader.stdout.readline())
    later = None
    try:
        a = Applier(journal, backend="autogroup")
        a.apply(Plan((action(leader.pid, autogroup_nice=15), action(member, autogroup_nice=15))))
        assert rb.autogroup(leader.pid)[1] == 15
        leader.stdin.write("go\n")
        leader.stdin.flush()
        later = int(leader.stdout.readline())
        os.kill(member, signal.SIGKILL)
        leader.kill()
        leader.wait()
        assert rb.autogroup(later)[1] == 15
        a.restore_all()
        assert rb.autogroup(later)[1] == 0
    finally:
        for pid in (member, later):
            if pid:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        if leader.poll() is None:
            leader.kill()
            leader.wait()


def test_bundled_default_policy_end_to_end(make_child, journal: Path) -> None:
    """plan() with the bundled policy, then apply: what a user would see for each group."""
    from procsift.distributor import ProcessView, autogroup_of, load_policy, plan, system_view
    bg, ui = make_child(new_session=True), make_child(new_session=True)
    views = [ProcessView(pid=c.pid, start_time=start_time(c.pid), comm="python", label=label, probability=0.9,
                         ppid=os.getpid(), autogroup=autogroup_of(c.pid))
             for c, label in ((bg, "background"), (ui, "interactive"))]
    p = plan(load_policy(), views, system_view())
    a = Applier(journal, backend="auto", cgroup_prefix=f"procsift-test-{os.getpid()}")
    a.apply(p)
    for t in bg.tids():
        assert (rb.nice(bg.pid, t), rb.policy(bg.pid, t), rb.ioprio(t)) == (10, os.SCHED_BATCH, (3, 0))
    if a.cgroups is not None:
        assert rb.cpu_cgroup(bg.pid) == f"/procsift-test-{os.getpid()}.w1-idle"
    elif a.backend == "autogroup":
        assert rb.autogroup(bg.pid)[1] == 10
    if SLICE:
        assert {rb.slice_ns(t) for t in ui.tids()} == {1_000_000}
    assert {rb.nice(ui.pid, t) for t in ui.tids()} == {0}
    a.restore_all()
    for c in (bg, ui):
        assert {(rb.nice(c.pid, t), rb.policy(c.pid, t), rb.ioprio(t)) for t in c.tids()} == {(0, 0, (0, 0))}
    assert rb.cpu_cgroup(bg.pid) == "/"


@pytest.mark.skipif(not TWO_CPUS or not Path("/sys/fs/cgroup/cpuset/cpuset.cpus").exists(),
                    reason="needs 2 CPUs and a v1 cpuset hierarchy")
def test_cpuset_confines_the_process_and_gives_back_each_threads_own_affinity(child: Child,
                                                                            journal: Path) -> None:
    for t in child.tids():
        os.sched_setaffinity(t, {1})  # the program had pinned itself to CPU 1
    prefix = f"procsift-test-{os.getpid()}"
    a = Applier(journal, backend="cgroup", cgroup_prefix=prefix)
    assert a.cpusets is not None
    a.apply(Plan((action(child.pid, cpus=(0,)),)))
    group = a.cpusets.mount / f"{prefix}.cpus-0"
    assert rb.cpu_cgroup(child.pid, "cpuset") == f"/{prefix}.cpus-0"
    assert {rb.affinity(child.pid, t) for t in child.tids()} == {"0"}
    child.spawn(2)
    assert sorted(map(int, (group / "tasks").read_text().split())) == child.tids()
    assert {rb.affinity(child.pid, t) for t in child.tids()} == {"0"}
    a.restore_all()
    assert rb.cpu_cgroup(child.pid, "cpuset") == "/"
    assert {rb.affinity(child.pid, t) for t in child.tids()} == {"1"}
    assert not group.exists()
