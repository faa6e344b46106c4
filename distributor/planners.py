"""The four placement policies as pure planners: labels + system view + state → Plan."""

from __future__ import annotations

import dataclasses
import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from fnmatch import fnmatchcase

from procsift.distributor.policy import Deadline, ExceptionRule, FairShare, HtmlFirst, Partition, Policy, Profile
from procsift.distributor.views import Action, Plan, PlannerState, ProcessView, SystemView

__all__ = ["plan", "excepted", "urgency_for", "next_urgency", "contended"]

_CPU_FIELDS = ("nice", "sched_policy", "slice_us", "cpu_weight", "cpu_idle")
_IO_FIELDS = ("io_class", "io_level")


def _matches(rule: ExceptionRule, p: ProcessView) -> bool:
    return ((rule.comm is None or fnmatchcase(p.comm, rule.comm))
            and (rule.exe is None or fnmatchcase(p.exe, rule.exe))
            and (rule.cgroup is None or fnmatchcase(p.cgroup, rule.cgroup)
                 or p.cgroup.startswith(rule.cgroup.rstrip("/") + "/"))
            and (rule.uid is None or p.uid == rule.uid))


def excepted(rules: Sequence[ExceptionRule], procs: Iterable[ProcessView]) -> dict[int, str]:
    """pid → why, for every process an exception matches and every descendant of one."""
    procs = list(procs)
    direct = {}
    for p in procs:
        rule = next((r for r in rules if _matches(r, p)), None)
        if rule is not None:
            direct[p.pid] = f"{rule.describe()} (policy line {rule.line})" if rule.line else rule.describe()
    # PID 1 passes nothing on: an exception matching init (say comm = "systemd*") must not
    # exempt the whole system. It is never touched anyway.
    parent = {p.pid: p.ppid for p in procs if p.pid != 1}
    out: dict[int, str] = {}
    for p in procs:
        pid, seen = p.pid, set()
        while pid in parent and pid not in seen and pid not in direct:
            seen.add(pid)
            pid = parent[pid]
        if pid in direct and (pid != 1 or p.pid == 1):
            out[p.pid] = direct[pid] if pid == p.pid else f"descendant of {pid}: {direct[pid]}"
    return out


def _overlay(base: Profile, over: Profile, fields: tuple[str, ...]) -> Profile:
    changes = {f: getattr(over, f) for f in fields if getattr(over, f) is not None}
    return dataclasses.replace(base, **changes)


def _action(p: ProcessView, prof: Profile, rule: str, cpus: tuple[int, ...] | None) -> Action:
    return Action(pid=p.pid, start_time=p.start_time, comm=p.comm, label=p.label, profile=prof.name,
                  rule=rule, cpus=cpus, nice=prof.nice, io_class=prof.io_class, io_level=prof.io_level,
                  sched_policy=prof.sched_policy, slice_us=prof.slice_us, cpu_weight=prof.cpu_weight,
                  cpu_idle=prof.cpu_idle)


def _profile_cpus(prof: Profile, system: SystemView) -> tuple[tuple[int, ...] | None, str]:
    if prof.cpus is None:
        return None, ""
    cpus = tuple(c for c in prof.cpus if c in system.online_cpus)
    if not cpus:
        return None, f"; cpus {','.join(map(str, prof.cpus))} none online, affinity left alone"
    return cpus, f"; cpus {_cpulist(cpus)}"


def _cpulist(cpus: Sequence[int]) -> str:
    return ",".join(map(str, cpus))


def contended(previous: bool, avg10: float | None, on: float, off: float) -> bool:
    """Hysteresis: contended from `on` upward, and stays so until it falls below `off`."""
    if avg10 is None:
        return False
    return avg10 >= off if previous else avg10 >= on


def urgency_for(delay_ms: float, target_ms: float, ceiling: int) -> int:
    """Urgency from the share of slack a delay used: 1, then doubled each time half the rest is used.

    delay < T/2 → 1; ≥ T/2 → 2; ≥ 3T/4 → 4; ≥ 7T/8 → 8 …; at or past the target → ceiling.
    """
    urgency, threshold, remaining = 1, target_ms / 2, target_ms / 2
    while urgency < ceiling and delay_ms >= threshold:
        urgency *= 2
        remaining /= 2
        threshold += remaining
    return ceiling if delay_ms >= target_ms else urgency


def next_urgency(previous: int, delay_ms: float | None, target_ms: float, ceiling: int) -> int:
    """Rises at once to what the delay calls for; while the target is met it decays by halving."""
    if delay_ms is None:
        return max(1, previous // 2)
    now = urgency_for(delay_ms, target_ms, ceiling)
    if delay_ms < target_ms:
        return max(now, previous // 2, 1)
    return max(now, previous)


def _fair_share(policy: Policy, eligible: list[tuple[ProcessView, Profile]],
                system: SystemView) -> list[Action]:
    out: list[Action] = []
    groups: dict[str, list[tuple[ProcessView, Profile]]] = defaultdict(list)
    for p, prof in eligible:
        groups[p.label or ""].append((p, prof))
    dealt = 0  # a global deal: each group spread evenly, and the cores' totals stay even too
    for label in sorted(groups):
        members = sorted(groups[label], key=lambda pp: (pp[0].start_time, pp[0].pid))
        for i, (p, prof) in enumerate(members):
            pool = prof.cpus and tuple(c for c in prof.cpus if c in system.online_cpus) or system.online_cpus
            if len(pool) <= 1:
                out.append(_action(p, prof, f"fair-share: {label} -> profile {prof.name}; "
                                   "one CPU, affinity left alone", None))
                continue
            cpu = pool[(dealt + i) % len(pool)]
            out.append(_action(p, prof, f"fair-share: {label} #{i + 1} of {len(members)} -> cpu {cpu} "
                               f"(round-robin over {_cpulist(pool)}), profile {prof.name}", (cpu,)))
        dealt += len(members)
    return out


def _partition(params: Partition, eligible: list[tuple[ProcessView, Profile]],
               system: SystemView) -> list[Action]:
    online = system.online_cpus
    reserved_present = any(p.label in params.reserved_groups for p, _ in eligible)
    rest_present = any(p.label not in params.reserved_groups for p, _ in eligible)
    out: list[Action] = []
    k = params.reserved_cpus or math.ceil(len(online) / 2)
    k = max(1, min(k, len(online) - 1))
    # Reserve the highest-numbered cores: CPU 0 usually carries more interrupts and housekeeping.
    reserved, rest = online[-k:], online[:-k]
    for p, prof in eligible:
        mine = p.label in params.reserved_groups
        if len(online) <= 1:
            cpus, why = None, "one CPU, nothing to partition; affinity left alone"
        elif mine and not rest_present or not mine and not reserved_present:
            cpus, why = online, "the other side is empty, so all cpus"
        elif mine:
            cpus, why = reserved, f"reserved cpus {_cpulist(reserved)} ({k} of {len(online)})"
        else:
            cpus, why = rest, f"unreserved cpus {_cpulist(rest)}"
        out.append(_action(p, prof, f"partition: {p.label} -> {why}, profile {prof.name}", cpus))
    return out


def _html_first(policy: Policy, params: HtmlFirst, eligible: list[tuple[ProcessView, Profile]],
                system: SystemView, state: PlannerState) -> tuple[list[Action], PlannerState]:
    cpu = contended(state.is_contended("cpu"), system.psi_cpu and system.psi_cpu.some_avg10,
                    params.cpu_on, params.cpu_off)
    io = contended(state.is_contended("io"), system.psi_io and system.psi_io.some_avg10,
                   params.io_on, params.io_off)
    psi = (f"PSI cpu {system.psi_cpu.some_avg10 if system.psi_cpu else 'n/a'}% "
           f"io {system.psi_io.some_avg10 if system.psi_io else 'n/a'}%")
    out: list[Action] = []
    for p, prof in eligible:
        cpus, cpus_why = _profile_cpus(prof, system)
        if p.label != params.group:
            out.append(_action(p, prof, f"html-first: {p.label} -> profile {prof.name}{cpus_why}", cpus))
            continue
        boosts = []
        if cpu:
            prof = _overlay(prof, policy.profiles[params.cpu_boost], _CPU_FIELDS)
            boosts.append(f"CPU priority from {params.cpu_boost} (cpu contended)")
        if io:
            prof = _overlay(prof, policy.profiles[params.io_boost], _IO_FIELDS)
            boosts.append(f"I/O priority from {params.io_boost} (io contended)")
        why = " and ".join(boosts) if boosts else "no contention, no boost"
        out.append(_action(p, prof, f"html-first: {p.label} -> profile {prof.name}, {why}; {psi}{cpus_why}",
                           cpus))
    return out, PlannerState(urgency=state.urgency, contended=(("cpu", cpu), ("io", io)))


def _deadline(params: Deadline, eligible: list[tuple[ProcessView, Profile]], system: SystemView,
              state: PlannerState) -> tuple[list[Action], PlannerState]:
    delays: dict[str, float] = {}
    for p, _ in eligible:
        if p.dispatches > 0 and p.label:
            d = p.runq_ns / p.dispatches / 1e6
            delays[p.label] = max(delays.get(p.label, 0.0), d)
    urgency: dict[str, int] = {}
    for group, target in params.target_ms:
        urgency[group] = next_urgency(state.urgency_of(group), delays.get(group), target, params.ceiling)
    out: list[Action] = []
    targets = dict(params.target_ms)
    for p, prof in eligible:
        cpus, cpus_why = _profile_cpus(prof, system)
        label = p.label or ""
        if label not in urgency:
            out.append(_action(p, prof, f"deadline: {label} has no target -> profile {prof.name}{cpus_why}", cpus))
            continue
        u = urgency[label]
        level = u.bit_length() - 1
        changes: dict[str, int] = {}
        if level > 0:
            changes["nice"] = min(prof.nice if prof.nice is not None else 0, params.nice_by_urgency[level])
            if params.slice_us_by_urgency:
                s = params.slice_us_by_urgency[level]
                changes["slice_us"] = min(prof.slice_us, s) if prof.slice_us else s
        prof = dataclasses.replace(prof, **changes)
        delay = delays.get(label)
        seen = f"run-queue delay {delay:.2f} ms" if delay is not None else "no dispatches measured"
        out.append(_action(p, prof, f"deadline: {label} {seen} vs target {targets[label]:g} ms -> urgency "
                           f"{u}/{params.ceiling}, nice {prof.nice}, profile {prof.name}{cpus_why}", cpus))
    return out, PlannerState(urgency=tuple(sorted(urgency.items())), contended=state.contended)


def _with_autogroup_nice(actions: list[Action], procs: Sequence[ProcessView]) -> list[Action]:
    """Autogroup nice is shared by a whole session: set it only where every member gets one nice."""
    by_pid = {a.pid: a for a in actions}
    members: dict[str, list[ProcessView]] = defaultdict(list)
    for p in procs:
        if p.autogroup:
            members[p.autogroup].append(p)
    agreed: dict[str, int] = {}
    for group, ps in members.items():
        nices = {by_pid[p.pid].nice if p.pid in by_pid else None for p in ps}
        if len(nices) == 1 and None not in nices:
            agreed[group] = nices.pop()  # type: ignore[assignment]
    group_of = {p.pid: p.autogroup for p in procs}
    return [dataclasses.replace(a, autogroup_nice=agreed[g])
            if (g := group_of.get(a.pid)) in agreed and g is not None else a
            for a in actions]


def plan(policy: Policy, procs: Sequence[ProcessView], system: SystemView,
         state: PlannerState | None = None) -> Plan:
    """Plan one window: which process gets which placement, and why (pure)."""
    state = state or PlannerState()
    skipped: list[tuple[int, str]] = []
    exc = excepted(policy.exceptions, procs)
    eligible: list[tuple[ProcessView, Profile]] = []
    for p in procs:
        prof = policy.profile_for(p.label)
        if p.pid == 1:
            skipped.append((p.pid, "PID 1 is never touched"))
        elif p.pid in exc:
            skipped.append((p.pid, exc[p.pid]))
        elif p.label is None:
            skipped.append((p.pid, "no label yet"))
        elif prof is None:
            skipped.append((p.pid, f"label {p.label} maps to no profile"))
        elif p.probability < policy.min_probability:
            skipped.append((p.pid, f"label {p.label} probability {p.probability:.2f} below "
                            f"min_probability {policy.min_probability:.2f}"))
        else:
            eligible.append((p, prof))
    params = policy.params
    if isinstance(params, FairShare):
        actions = _fair_share(policy, eligible, system)
    elif isinstance(params, Partition):
        actions = _partition(params, eligible, system)
    elif isinstance(params, HtmlFirst):
        actions, state = _html_first(policy, params, eligible, system, state)
    else:
        actions, state = _deadline(params, eligible, system, state)
    actions = _with_autogroup_nice(actions, procs)
    return Plan(actions=tuple(actions), skipped=tuple(skipped), state=state, kind=policy.kind)
