"""Aggregation of per-task samples into Window rows (pure; recorded-style snapshots, no kernel)."""

from __future__ import annotations

from procsift.collector.aggregate import Aggregator
from procsift.collector.samples import (
    STATE_DEAD, STATE_RUNNABLE, STATE_RUNNING, STATE_SLEEP, Drain, ProcInfo, TaskSample,
)

TICK = 10_000_000  # ns per clock tick at CLK_TCK=100


def _info(pid: int, start_time: int, comm: str = "app") -> ProcInfo:
    return ProcInfo(pid=pid, start_time=start_time, ppid=1, comm=comm, exe=f"/bin/{comm}", uid=1000,
                    nthreads=2, cgroup="/user", rss_bytes=4096, read_bytes=0, write_bytes=0)


class FakeProc:
    """A stand-in for /proc: which processes exist now."""

    def __init__(self) -> None:
        self.procs: dict[int, ProcInfo] = {}
        self.threads: dict[int, int] = {}
        self.sched: dict[int, tuple[int, int, int]] = {}  # tid -> /proc/TID/schedstat now

    def info(self, pid: int, io: bool = True) -> ProcInfo | None:
        return self.procs.get(pid)

    def tgid_of(self, tid: int) -> int | None:
        return self.threads.get(tid)

    def schedstat(self, tid: int) -> tuple[int, int, int] | None:
        return self.sched.get(tid)


def _agg(fake: FakeProc) -> Aggregator:
    return Aggregator("h", fake.info, fake.tgid_of, clk_tck=100, schedstat=fake.schedstat)


def test_threads_fold_into_their_process_and_windows_are_deltas() -> None:
    fake = FakeProc()
    fake.procs[10] = _info(10, 5)
    fake.threads[11] = 10
    agg = _agg(fake)
    d1 = Drain.of(1000, [
        TaskSample(tid=10, tgid=10, run_ns=100, switches_in=6, voluntary=5, transitions=10, max_wait_ns=50),
        TaskSample(tid=11, tgid=0, run_ns=30, switches_in=3, involuntary=3, max_wait_ns=70),
    ], syscalls={10: {39: 7, 0: 2}})
    rows, forget = agg.build(d1, 0.0, 1.0)
    assert forget == []
    (w,) = rows
    assert (w.pid, w.start_time, w.comm) == (10, 5, "app")
    assert w.run_ns == 130 and w.switches_in == 9 and w.voluntary == 5 and w.involuntary == 3
    assert w.max_wait_ns == 70 and w.run_wait_transitions == 10
    assert w.syscalls == {"getpid": 7, "read": 2}
    d2 = Drain.of(2000, [
        TaskSample(tid=10, tgid=10, run_ns=160, switches_in=10, voluntary=9, transitions=18),
        TaskSample(tid=11, tgid=11 and 10, run_ns=30, switches_in=3, involuntary=3),
    ])
    (w2,) = agg.build(d2, 1.0, 1.0)[0]
    assert w2.run_ns == 60 and w2.switches_in == 4 and w2.voluntary == 4 and w2.max_wait_ns == 0
    assert w2.syscalls == {}


def test_state_in_progress_counts_up_to_now() -> None:
    fake = FakeProc()
    fake.procs[20] = _info(20, 5)
    agg = _agg(fake)
    s = TaskSample(tid=20, tgid=20, state=STATE_SLEEP, ts=500, sleep_ns=100, switches_in=5)
    (w,) = agg.build(Drain.of(1500, [s]), 0.0, 1.0)[0]
    assert w.sleep_ns == 100 + 1000
    # next window: still asleep, nothing new happened: no row (too quiet to report)
    assert agg.build(Drain.of(2500, [s]), 1.0, 1.0)[0] == []
    # it woke and ran: the whole sleep up to the wake-up is counted once, no double count
    s2 = TaskSample(tid=20, tgid=20, state=STATE_RUNNING, ts=2600, sleep_ns=100 + 2100,
                    switches_in=6, run_ns=0)
    (w3,) = agg.build(Drain.of(3000, [s2]), 2.0, 1.0)[0]
    assert w3.sleep_ns == 2200 - 2100 and w3.run_ns == 400  # 2500..2600 asleep, 2600..3000 running


def test_a_loop_that_keeps_its_cpu_all_window_still_gets_its_row() -> None:
    """No switch, wake-up or syscall in a window, but it ran throughout: its run time is the
    window's, not lost (found by a 0.5 s recording of short CPU loops, 2026-11-23)."""
    fake = FakeProc()
    fake.procs[30] = _info(30, 5)
    agg = _agg(fake)
    s = TaskSample(tid=30, tgid=30, state=STATE_RUNNING, ts=900, run_ns=50, switches_in=1)
    (w1,) = agg.build(Drain.of(1000, [s]), 0.0, 1.0)[0]
    assert w1.run_ns == 50 + 100
    (w2,) = agg.build(Drain.of(2000, [s]), 1.0, 1.0)[0]  # the same sample: it never switched
    assert w2.run_ns == 1000 and w2.switches_in == 0
    done = TaskSample(tid=30, tgid=30, state=STATE_DEAD, ts=2500, run_ns=50 + 1600, switches_in=1, exited=1)
    (w3,) = agg.build(Drain.of(3000, [done]), 2.0, 1.0)[0]
    assert w3.run_ns == 500 and w3.exited
    assert w1.run_ns + w2.run_ns + w3.run_ns == 1650  # everything it ran, once


def test_a_dispatch_the_probe_never_saw_is_read_from_the_kernels_counters() -> None:
    """The kernel can put a task on a CPU without a sched_switch event (seen on 6.18 VMs): the
    probe then still has it queued since its last switch-out. Its kernel counters say it ran,
    so the window's run time is the kernel's, not queue time (before: a 0.3 s CPU loop lost its
    whole 0.37 s slice, and a mostly idle one showed run-queue time it never waited)."""
    fake = FakeProc()
    fake.procs[40] = _info(40, 5)
    agg = _agg(fake)
    # Switched out (preempted) at t=1000 after 50 ns of CPU in all; k_*: the kernel's counters then.
    out = TaskSample(tid=40, tgid=40, state=STATE_RUNNABLE, ts=1000, run_ns=50, switches_in=1,
                     involuntary=1, k_seen=True, k_exec=50, k_delay=7, k_pcount=1)
    fake.sched[40] = (50 + 800, 7 + 100, 2)  # by t=2000 the kernel had run it 800 ns, after 100 queued
    (w,) = agg.build(Drain.of(2000, [out]), 0.0, 1.0)[0]
    assert (w.run_ns, w.runq_ns, w.switches_in) == (50 + 800, 100, 2)
    # Really queued (the kernel ran it for no time since): the span is queue time, as before.
    fake.sched[40] = (50 + 800, 7 + 100, 2)
    waiting = TaskSample(tid=40, tgid=40, state=STATE_RUNNABLE, ts=2500, run_ns=850, runq_ns=100,
                         switches_in=2, involuntary=2, k_seen=True, k_exec=850, k_delay=107, k_pcount=2)
    (w2,) = agg.build(Drain.of(3000, [waiting]), 1.0, 1.0)[0]
    assert (w2.run_ns, w2.runq_ns) == (0, 500)


def test_kernel_counters_of_a_reused_tid_are_not_taken() -> None:
    fake = FakeProc()
    fake.procs[41] = _info(41, 5)
    agg = _agg(fake)
    s = TaskSample(tid=41, tgid=41, state=STATE_RUNNING, ts=1000, run_ns=10_000, switches_in=3,
                   k_seen=True, k_exec=10_000, k_delay=50, k_pcount=3, ev_sw=1)
    fake.sched[41] = (20, 0, 1)  # a newer task under the same tid: counters below what was seen
    (w,) = agg.build(Drain.of(1500, [s]), 0.0, 1.0)[0]
    assert w.run_ns == 10_000 + 500  # the event-based span, up to now


def test_process_exiting_mid_window_yields_its_last_row() -> None:
    fake = FakeProc()
    fake.procs[30] = _info(30, 5, "short")
    agg = _agg(fake)
    agg.build(Drain.of(1000, [TaskSample(tid=30, tgid=30, run_ns=10, switches_in=5)]), 0.0, 1.0)
    del fake.procs[30]  # gone from /proc before the window closed
    d = Drain.of(2000, [TaskSample(tid=30, tgid=30, run_ns=25, switches_in=7, exited=True,
                                             comm="short")], syscalls={30: {60: 1}})
    rows, forget = agg.build(d, 1.0, 1.0)
    (w,) = rows
    assert w.exited and w.comm == "short" and w.exe == "/bin/short" and w.run_ns == 15
    assert w.syscalls == {"exit": 1}
    assert forget == [30]


def test_a_dead_task_accrues_no_time_after_its_last_switch() -> None:
    fake = FakeProc()
    agg = _agg(fake)
    s = TaskSample(tid=31, tgid=31, state=STATE_DEAD, ts=1200, run_ns=200, sleep_ns=50, switches_in=3,
                   exited=True, comm="gone")
    (w,) = agg.build(Drain.of(2000, [s]), 1.0, 1.0)[0]
    assert (w.run_ns, w.runq_ns, w.sleep_ns, w.block_ns) == (200, 0, 50, 0)


def test_never_seen_process_that_exits_gets_identity_from_bpf() -> None:
    agg = _agg(FakeProc())
    s = TaskSample(tid=40, tgid=40, ppid=7, run_ns=5, switches_in=1, start_ns=123 * TICK + 5,
                   exited=True, comm="blink")
    (w,) = agg.build(Drain.of(10, [s]), 0.0, 1.0)[0]
    assert (w.pid, w.start_time, w.ppid, w.comm, w.exited) == (40, 123, 7, "blink", True)


def test_reused_pid_is_another_process() -> None:
    fake = FakeProc()
    fake.procs[50] = _info(50, 100, "old")
    agg = _agg(fake)
    agg.build(Drain.of(1, [TaskSample(tid=50, tgid=50, run_ns=1000, switches_in=9)]), 0.0, 1.0)
    # the old process exits, a new one gets PID 50 within the same run
    fake.procs[50] = _info(50, 300, "new")
    new = TaskSample(tid=50, tgid=50, run_ns=40, switches_in=6, start_ns=300 * TICK)
    (w,) = agg.build(Drain.of(2, [new]), 1.0, 1.0)[0]
    # counters start from zero for the new process (not 40 - 1000 clamped), identity is new
    assert (w.start_time, w.comm, w.run_ns, w.switches_in) == (300, "new", 40, 6)


def test_pid_reused_before_the_old_row_was_reported() -> None:
    fake = FakeProc()
    fake.procs[60] = _info(60, 900, "newer")  # /proc already shows the next process
    agg = _agg(fake)
    old = TaskSample(tid=60, tgid=60, run_ns=5, switches_in=5, start_ns=100 * TICK, exited=False)
    assert agg.build(Drain.of(1, [old]), 0.0, 1.0)[0] == []  # held until BPF reports the exit
    # The next drain has the newer process under the PID; the old one's exit report was lost.
    newer = TaskSample(tid=60, tgid=60, run_ns=7, switches_in=2, start_ns=900 * TICK)
    rows = sorted(agg.build(Drain.of(2, [newer]), 1.0, 1.0)[0], key=lambda w: w.start_time)
    assert [(w.start_time, w.comm, w.run_ns, w.exited) for w in rows] == [(100, "", 5, True), (900, "newer", 7, False)]


def test_process_gone_from_proc_before_its_exit_is_reported_makes_one_row() -> None:
    """The race of a process that exits between the drain and the /proc read: its figures
    wait one window for the exit report (with the comm), rather than making an anonymous row."""
    agg = _agg(FakeProc())  # /proc never saw it
    alive = TaskSample(tid=61, tgid=61, ppid=3, run_ns=800, switches_in=4, start_ns=100 * TICK)
    assert agg.build(Drain.of(1000, [alive], syscalls={61: {0: 7}}), 0.0, 1.0)[0] == []
    gone = TaskSample(tid=61, tgid=61, ppid=3, run_ns=850, switches_in=5, start_ns=100 * TICK,
                      exited=True, comm="cc1")
    rows, forget = agg.build(Drain.of(2000, [gone], syscalls={61: {60: 1}}), 1.0, 1.0)
    (w,) = rows
    assert (w.comm, w.start_time, w.exited, w.run_ns, w.switches_in) == ("cc1", 100, True, 850, 5)
    assert w.syscalls == {"read": 7, "exit": 1} and forget == [61]


def test_held_figures_are_kept_when_no_exit_report_comes() -> None:
    agg = _agg(FakeProc())
    alive = TaskSample(tid=62, tgid=62, run_ns=300, switches_in=3, start_ns=100 * TICK)
    assert agg.build(Drain.of(1000, [alive], syscalls={62: {0: 2}}), 0.0, 1.0)[0] == []
    (w,) = agg.build(Drain.of(2000, []), 1.0, 1.0)[0]
    assert (w.pid, w.start_time, w.exited, w.run_ns, w.syscalls) == (62, 100, True, 300, {"read": 2})
    assert agg.build(Drain.of(3000, []), 2.0, 1.0)[0] == []


def test_unknown_syscall_numbers_are_counted_as_unknown() -> None:
    fake = FakeProc()
    fake.procs[70] = _info(70, 1)
    agg = _agg(fake)
    (w,) = agg.build(Drain.of(1, [], syscalls={70: {9999: 4, 9998: 1}}), 0.0, 1.0)[0]
    assert w.syscalls == {"unknown": 5}


def test_per_cpu_syscall_counts_group_by_process_without_zero_entries() -> None:
    import numpy as np

    from procsift.collector._bpf import _group_counts

    keys = np.array([(7, 39), (5, 0), (7, 1), (5, 1), (9, 3)], dtype=[("tgid", "<u4"), ("nr", "<u4")])
    vals = np.array([[2, 3], [1, 0], [0, 4], [0, 0], [6, 1]], dtype=np.uint64)  # per CPU
    assert _group_counts(keys, vals) == {7: {39: 5, 1: 4}, 5: {0: 1}, 9: {3: 7}}
    assert _group_counts(keys[:0], vals[:0]) == {}


def test_io_counters_are_per_window_deltas_including_rchar_and_wchar() -> None:
    from dataclasses import replace
    fake = FakeProc()
    fake.procs[10] = replace(_info(10, 5), read_bytes=4096, write_bytes=0, rchar=1000, wchar=500)
    agg = _agg(fake)
    # Started before the probe (start_ns 0): what it did before is not this window's.
    (w1,) = agg.build(Drain.of(1000, [TaskSample(tid=10, tgid=10, run_ns=1, switches_in=6)],
                               syscalls={10: {40: 3}}), 0.0, 1.0)[0]  # sendfile
    assert (w1.read_bytes, w1.rchar, w1.wchar) == (0, 0, 0)
    fake.procs[10] = replace(fake.procs[10], read_bytes=8192, rchar=301_000, wchar=250_500)
    (w2,) = agg.build(Drain.of(2000, [TaskSample(tid=10, tgid=10, run_ns=2, switches_in=7)],
                               syscalls={10: {40: 3}}), 1.0, 1.0)[0]
    assert (w2.read_bytes, w2.write_bytes, w2.rchar, w2.wchar) == (4096, 0, 300_000, 250_000)


def test_socket_counters_come_from_the_drain_and_make_a_row_of_their_own() -> None:
    fake = FakeProc()
    fake.procs[10] = _info(10, 5)
    agg = _agg(fake)
    drain = Drain.of(1000, [TaskSample(tid=10, tgid=10, run_ns=1, switches_in=6)],
                     sockets={10: (3, 3000, 4, 400, 7)})
    (w,) = agg.build(drain, 0.0, 1.0)[0]
    assert (w.net_tx, w.net_tx_bytes, w.net_rx, w.net_rx_bytes, w.unix_calls) == (3, 3000, 4, 400, 7)
    # No other sign of life in the window than socket traffic: still a row.
    (w2,) = agg.build(Drain.of(2000, [TaskSample(tid=10, tgid=10, run_ns=1, switches_in=6)],
                                sockets={10: (1, 10, 0, 0, 0)}), 1.0, 1.0)[0]
    assert w2.net_tx == 1 and w2.switches_in == 0
