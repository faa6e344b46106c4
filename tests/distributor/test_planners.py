"""The four planners as pure functions: placement, empty groups, one CPU, many CPUs, exceptions, state."""

from __future__ import annotations

from collections import Counter

import pytest

from procsift.distributor import PlannerState, ProcessView, Psi, SystemView, parse_policy, plan
from procsift.distributor.planners import next_urgency, urgency_for

from .test_policy import policy_text


def procs(**counts: int) -> list[ProcessView]:
    """e.g. procs(interactive=3, background=2) → views with distinct pids, in start order."""
    out, pid = [], 100
    for label, n in counts.items():
        for _ in range(n):
            out.append(ProcessView(pid=pid, start_time=pid * 10, comm=f"{label[:4]}{pid}",
                                   label=label.replace("_", "-"), ppid=1))
            pid += 1
    return out


def cpus(n: int) -> SystemView:
    return SystemView(online_cpus=tuple(range(n)))


def psi(avg10: float) -> Psi:
    return Psi(some_avg10=avg10, some_avg60=avg10, some_avg300=avg10, some_total_us=0)


# -- fair-share ----------------------------------------------------------------------------

@pytest.mark.parametrize("ncpu", [2, 3, 64])
def test_fair_share_every_core_gets_an_equal_share_of_each_group(ncpu: int) -> None:
    pol = parse_policy(policy_text("fair-share"))
    p = plan(pol, procs(interactive=7, background=130, html_serving=5), cpus(ncpu))
    assert len(p.actions) == 142
    for label in ("interactive", "background", "html-serving"):
        per_core = Counter(a.cpus[0] for a in p.actions if a.label == label)  # type: ignore[index]
        n = sum(per_core.values())
        counts = [per_core.get(c, 0) for c in range(ncpu)]
        assert max(counts) - min(counts) <= 1 and sum(counts) == n
    totals = Counter(a.cpus[0] for a in p.actions)  # type: ignore[index]
    assert max(totals.values()) - min(totals.get(c, 0) for c in range(ncpu)) <= 1
    assert all(a.nice == (10 if a.label == "background" else -3) for a in p.actions)


def test_fair_share_one_cpu_leaves_affinity_alone_but_keeps_priorities() -> None:
    p = plan(parse_policy(policy_text("fair-share")), procs(interactive=2, background=2), cpus(1))
    assert all(a.cpus is None for a in p.actions)
    assert {a.nice for a in p.actions} == {-3, 10} and "one CPU" in p.actions[0].rule


def test_fair_share_empty_and_no_processes() -> None:
    pol = parse_policy(policy_text("fair-share"))
    assert plan(pol, [], cpus(4)).actions == ()
    p = plan(pol, procs(background=4), cpus(4))
    assert sorted(a.cpus[0] for a in p.actions) == [0, 1, 2, 3]  # type: ignore[index]


# -- partition -----------------------------------------------------------------------------

PARTITION = "[partition]\nreserved_groups = ['interactive', 'html-serving']\n"


def test_partition_reserves_cores_for_latency_groups() -> None:
    p = plan(parse_policy(policy_text("partition", PARTITION)), procs(interactive=2, html_serving=1,
                                                                      background=3), cpus(2))
    by = {a.label: a.cpus for a in p.actions}
    assert by["interactive"] == (1,) and by["html-serving"] == (1,) and by["background"] == (0,)


def test_partition_many_cpus_reserved_count() -> None:
    pol = parse_policy(policy_text("partition", PARTITION + "reserved_cpus = 3\n"))
    p = plan(pol, procs(interactive=1, background=1), cpus(16))
    by = {a.label: a.cpus for a in p.actions}
    assert by["interactive"] == (13, 14, 15) and by["background"] == tuple(range(13))
    default = plan(parse_policy(policy_text("partition", PARTITION)), procs(interactive=1, background=1),
                   cpus(16))
    assert {a.label: len(a.cpus or ()) for a in default.actions} == {"interactive": 8, "background": 8}


@pytest.mark.parametrize("counts,label", [({"background": 3}, "background"),
                                          ({"interactive": 2}, "interactive")])
def test_partition_adapts_when_the_other_side_is_empty(counts: dict[str, int], label: str) -> None:
    p = plan(parse_policy(policy_text("partition", PARTITION)), procs(**counts), cpus(4))
    assert all(a.cpus == (0, 1, 2, 3) and "empty" in a.rule for a in p.actions)


def test_partition_one_cpu() -> None:
    p = plan(parse_policy(policy_text("partition", PARTITION)), procs(interactive=1, background=1), cpus(1))
    assert all(a.cpus is None for a in p.actions)


# -- html-first ----------------------------------------------------------------------------

HTML = "[html-first]\ncpu_boost = 'boost'\nio_boost = 'boost'\ncpu_on = 10\ncpu_off = 5\nio_on = 20\n" \
       "io_off = 10\n[profiles.boost]\nnice = -8\nio_class = 'best-effort'\nio_level = 0\n"


def html_actions(cpu: float | None, io: float | None, state: PlannerState | None = None):
    system = SystemView(online_cpus=(0, 1), psi_cpu=psi(cpu) if cpu is not None else None,
                        psi_io=psi(io) if io is not None else None)
    p = plan(parse_policy(policy_text("html-first", HTML)), procs(html_serving=1, background=1), system, state)
    return {a.label: a for a in p.actions}, p.state


def test_html_first_no_contention_no_boost() -> None:
    by, _ = html_actions(1.0, 1.0)
    assert by["html-serving"].nice == -3 and by["html-serving"].io_class is None
    assert by["background"].nice == 10


def test_html_first_cpu_contention_boosts_cpu_only() -> None:
    by, state = html_actions(30.0, 1.0)
    assert by["html-serving"].nice == -8 and by["html-serving"].io_class is None
    assert by["background"].nice == 10 and state.is_contended("cpu") and not state.is_contended("io")


def test_html_first_io_contention_boosts_io_only() -> None:
    by, _ = html_actions(0.0, 50.0)
    assert by["html-serving"].nice == -3
    assert (by["html-serving"].io_class, by["html-serving"].io_level) == ("best-effort", 0)


def test_html_first_boost_has_hysteresis_and_ends_with_contention() -> None:
    _, s1 = html_actions(12.0, 0.0)
    by, s2 = html_actions(7.0, 0.0, s1)  # between off and on: stays boosted
    assert by["html-serving"].nice == -8 and s2.is_contended("cpu")
    by, s3 = html_actions(3.0, 0.0, s2)  # below off: boost lost
    assert by["html-serving"].nice == -3 and not s3.is_contended("cpu")
    by, _ = html_actions(7.0, 0.0, s3)  # between, from not contended: no boost
    assert by["html-serving"].nice == -3


def test_html_first_without_psi_never_boosts() -> None:
    by, _ = html_actions(None, None)
    assert by["html-serving"].nice == -3


# -- deadline ------------------------------------------------------------------------------

def test_urgency_doubles_each_time_half_the_remaining_slack_is_used() -> None:
    t = 8.0
    assert [urgency_for(d, t, 8) for d in (0, 3.9, 4, 5.9, 6, 6.9, 7, 7.9, 8, 100)] == \
        [1, 1, 2, 2, 4, 4, 8, 8, 8, 8]
    assert urgency_for(100, t, 4) == 4  # the ceiling caps it


def test_urgency_decays_by_halving_while_the_target_is_met() -> None:
    assert next_urgency(8, 0.1, 10, 8) == 4
    assert next_urgency(4, 0.1, 10, 8) == 2
    assert next_urgency(2, None, 10, 8) == 1
    assert next_urgency(1, 6.0, 10, 8) == 2  # rises at once
    assert next_urgency(8, 20.0, 10, 8) == 8


DEADLINE = "[deadline]\nceiling = 8\nnice_by_urgency = [0, -2, -5, -10]\n" \
           "slice_us_by_urgency = [3000, 2000, 1000, 500]\n[deadline.target_ms]\ninteractive = 10\n"


def test_deadline_maps_urgency_to_stronger_priority_and_carries_state() -> None:
    pol = parse_policy(policy_text("deadline", DEADLINE))
    slow = [ProcessView(pid=5, start_time=1, comm="ed", label="interactive", runq_ns=9_000_000, dispatches=1),
            ProcessView(pid=6, start_time=1, comm="bg", label="background", runq_ns=10**9, dispatches=1)]
    p1 = plan(pol, slow, cpus(2))
    by = {a.pid: a for a in p1.actions}
    assert p1.state.urgency_of("interactive") == 8
    assert by[5].nice == -10 and by[5].slice_us == 500 and "urgency 8/8" in by[5].rule
    assert by[6].nice == 10  # background has no target: its profile only
    fast = [ProcessView(pid=5, start_time=1, comm="ed", label="interactive", runq_ns=100_000, dispatches=10)]
    p2 = plan(pol, fast, cpus(2), p1.state)
    assert p2.state.urgency_of("interactive") == 4 and p2.actions[0].nice == -5
    p3 = plan(pol, fast, cpus(2), plan(pol, fast, cpus(2), p2.state).state)
    assert p3.state.urgency_of("interactive") == 1 and p3.actions[0].nice == -3  # profile again


def test_deadline_empty_group_decays() -> None:
    pol = parse_policy(policy_text("deadline", DEADLINE))
    p = plan(pol, procs(background=2), cpus(2), PlannerState(urgency=(("interactive", 8),)))
    assert p.state.urgency_of("interactive") == 4


# -- common --------------------------------------------------------------------------------

EXC = """
[[exceptions]]
comm = "sshd"
[[exceptions]]
uid = 1001
[[exceptions]]
exe = "/opt/keep/*"
[[exceptions]]
cgroup = "/system.slice/db.service"
"""


def test_exceptions_and_their_descendants_are_never_planned() -> None:
    pol = parse_policy(policy_text("fair-share", EXC))
    views = [
        ProcessView(pid=10, start_time=1, comm="sshd", label="background", ppid=1),
        ProcessView(pid=11, start_time=1, comm="bash", label="interactive", ppid=10),
        ProcessView(pid=12, start_time=1, comm="make", label="background", ppid=11),
        ProcessView(pid=13, start_time=1, comm="x", label="background", uid=1001),
        ProcessView(pid=14, start_time=1, comm="y", label="background", exe="/opt/keep/bin/y"),
        ProcessView(pid=15, start_time=1, comm="pg", label="background", cgroup="/system.slice/db.service/x"),
        ProcessView(pid=16, start_time=1, comm="cc", label="background", ppid=1),
    ]
    p = plan(pol, views, cpus(2))
    assert [a.pid for a in p.actions] == [16]
    why = dict(p.skipped)
    assert "descendant of 10" in why[12] and "comm=sshd" in why[12] and "policy line" in why[10]


def test_unlabelled_low_probability_and_unmapped_are_left_alone() -> None:
    pol = parse_policy(policy_text("fair-share").replace('[policy]\n', '[policy]\nmin_probability = 0.7\n')
                       .replace('html-serving = "fast"\n', ""))
    views = [ProcessView(pid=1, start_time=1, comm="a", label=None),
             ProcessView(pid=2, start_time=1, comm="b", label="background", probability=0.5),
             ProcessView(pid=3, start_time=1, comm="c", label="html-serving"),
             ProcessView(pid=4, start_time=1, comm="d", label="background", probability=0.9)]
    p = plan(pol, views, cpus(2))
    assert [a.pid for a in p.actions] == [4] and len(p.skipped) == 3


def test_autogroup_nice_only_when_the_whole_autogroup_agrees() -> None:
    pol = parse_policy(policy_text("fair-share"))
    views = [ProcessView(pid=11, start_time=1, comm="hog", label="background", autogroup="/autogroup-1"),
             ProcessView(pid=12, start_time=1, comm="hog", label="background", autogroup="/autogroup-1"),
             ProcessView(pid=3, start_time=1, comm="make", label="background", autogroup="/autogroup-2"),
             ProcessView(pid=4, start_time=1, comm="bash", label="interactive", autogroup="/autogroup-2"),
             ProcessView(pid=5, start_time=1, comm="cc", label="background", autogroup="/autogroup-3"),
             ProcessView(pid=6, start_time=1, comm="vim", label=None, autogroup="/autogroup-3")]
    by = {a.pid: a.autogroup_nice for a in plan(pol, views, cpus(2)).actions}
    assert by == {11: 10, 12: 10, 3: None, 4: None, 5: None}


def test_planning_is_pure() -> None:
    pol = parse_policy(policy_text("fair-share"))
    views = procs(interactive=3, background=3)
    assert plan(pol, views, cpus(2)) == plan(pol, views, cpus(2))


def test_view_from_a_collector_window() -> None:
    from procsift.collector.schema import Window
    w = Window(host="h", t_start=0.0, dur_s=1.0, pid=42, start_time=7, ppid=1, comm="nginx", exe="/usr/sbin/nginx",
               uid=33, cgroup="/system.slice/nginx.service", runq_ns=5_000_000, switches_in=10)
    v = ProcessView.from_window(w, "html-serving", 0.9, "/autogroup-3")
    assert (v.pid, v.start_time, v.label, v.probability, v.dispatches, v.autogroup) == \
        (42, 7, "html-serving", 0.9, 10, "/autogroup-3")


@pytest.mark.parametrize("ncpu,expect", [(1, None), (2, None), (4, (2, 3)), (64, (2, 3))])
def test_profile_cpus_are_bounded_by_the_online_cpus(ncpu: int, expect: tuple[int, ...] | None) -> None:
    text = policy_text("html-first", HTML).replace("nice = 10\n", 'nice = 10\ncpus = "2-3"\n')
    p = plan(parse_policy(text), procs(background=1), cpus(ncpu))
    assert p.actions[0].cpus == expect
    if expect is None:
        assert "none online" in p.actions[0].rule


def test_plan_says_why_for_explain() -> None:
    pol = parse_policy(policy_text("fair-share", EXC))
    views = [ProcessView(pid=10, start_time=1, comm="sshd", label="background"),
             ProcessView(pid=16, start_time=1, comm="cc", label="background")]
    p = plan(pol, views, cpus(2))
    assert "fair-share: background" in (p.why(16) or "") and "comm=sshd" in (p.why(10) or "")
    assert p.why(999) is None


def test_an_exception_matching_init_does_not_exempt_the_whole_system() -> None:
    pol = parse_policy(policy_text("fair-share", '[[exceptions]]\ncomm = "systemd*"\n'))
    views = [ProcessView(pid=1, start_time=1, comm="systemd", label="background", ppid=0),
             ProcessView(pid=300, start_time=1, comm="systemd-journal", label="background", ppid=1),
             ProcessView(pid=301, start_time=1, comm="cc", label="background", ppid=1)]
    p = plan(pol, views, cpus(2))
    assert [a.pid for a in p.actions] == [301] and {pid for pid, _ in p.skipped} == {1, 300}


def test_bundled_default_exceptions_leave_ordinary_work_placeable() -> None:
    from procsift.distributor import load_policy
    views = [ProcessView(pid=1, start_time=1, comm="systemd", label="background", ppid=0),
             ProcessView(pid=700, start_time=1, comm="sshd", label="background", ppid=1),
             ProcessView(pid=701, start_time=1, comm="bash", label="interactive", ppid=700),
             ProcessView(pid=702, start_time=1, comm="make", label="background", ppid=701),
             ProcessView(pid=703, start_time=1, comm="pipewire", label="interactive", ppid=1)]
    p = plan(load_policy(), views, cpus(2))
    assert {a.pid for a in p.actions} == {700, 701, 702} and p.why(1) == "PID 1 is never touched"


def test_dry_run_text_fits_80_columns_and_says_why() -> None:
    from procsift.distributor import format_plan
    pol = parse_policy(policy_text("fair-share", EXC))
    views = procs(interactive=2, background=2) + [ProcessView(pid=10, start_time=1, comm="sshd", label="background")]
    text = format_plan(plan(pol, views, cpus(2)))
    assert all(len(line) <= 80 for line in text.splitlines())
    assert "nice 10, batch, idle, cpus" in text and "why: fair-share: background" in text
    assert "left alone:" in text and "comm=sshd" in text
