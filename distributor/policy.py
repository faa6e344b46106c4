"""Policy as data: TOML profiles, label map, exceptions and policy kind, validated at load (pure)."""

from __future__ import annotations

import os
import re
import stat
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from procsift.distributor._tomlpos import locate
from procsift.distributor.errors import PolicyError

__all__ = [
    "Profile", "ExceptionRule", "Policy", "FairShare", "Partition", "HtmlFirst", "Deadline",
    "load_policy", "parse_policy", "parse_cpulist", "format_cpulist", "KINDS", "IO_CLASSES", "SCHED_POLICIES",
    "BACKENDS", "DEFAULT_POLICY_NAME", "CPU_MAX", "MAX_POLICY_BYTES",
]

KINDS = ("fair-share", "partition", "html-first", "deadline")
IO_CLASSES = ("realtime", "best-effort", "idle")
SCHED_POLICIES = ("other", "batch", "idle")
BACKENDS = ("auto", "cgroup", "autogroup", "none")
DEFAULT_POLICY_NAME = "default-policy.toml"
SLICE_US_RANGE = (100, 100_000)  # the kernel clamps sched_runtime for fair tasks to 0.1–100 ms
_LABEL_RE = re.compile(r"^(interactive|background|html-serving|cluster-\d{1,6})$")
_LABELS_ALLOWED = "interactive, background, html-serving, cluster-N"
_CPULIST_RE = re.compile(r"^\d{1,6}(-\d{1,6})?(,\d{1,6}(-\d{1,6})?)*$")
CPU_MAX = 8191
"""The highest CPU number any Linux kernel has (NR_CPUS is at most 8192): a range is checked
against it before it is expanded, so "0-4000000000" is refused at once, not built."""
MAX_POLICY_BYTES = 1 << 20
TEXT_MAX = 4096


@dataclass(frozen=True)
class Profile:
    """How one group is placed; None means "leave this attribute as it is"."""

    name: str
    cpus: tuple[int, ...] | None = None
    nice: int | None = None
    io_class: str | None = None
    io_level: int | None = None
    sched_policy: str | None = None
    slice_us: int | None = None
    cpu_weight: int | None = None
    """cgroup backend: relative CPU weight, 1–10000 (100 = the default)."""
    cpu_idle: bool | None = None
    """cgroup backend: the group runs only when nothing else wants the CPU (cpu.idle)."""


@dataclass(frozen=True)
class ExceptionRule:
    """Processes never touched: any listed field must match (globs for comm/exe/cgroup); descendants too."""

    comm: str | None = None
    exe: str | None = None
    cgroup: str | None = None
    uid: int | None = None
    line: int | None = None

    def describe(self) -> str:
        """A short text for logs and `explain`."""
        fields = [f"{k}={v}" for k, v in (("comm", self.comm), ("exe", self.exe),
                                           ("cgroup", self.cgroup), ("uid", self.uid)) if v is not None]
        return "exception " + " ".join(fields)


@dataclass(frozen=True)
class FairShare:
    """Every core gets an equal share of each group: processes dealt round-robin, one core each."""


@dataclass(frozen=True)
class Partition:
    """Reserved cores for latency groups, the rest for everyone else; adapts when a side is empty."""

    reserved_groups: tuple[str, ...] = ("interactive", "html-serving")
    reserved_cpus: int = 0
    """How many cores to reserve; 0 = half of the online cores, rounded up, at least 1."""


@dataclass(frozen=True)
class HtmlFirst:
    """html-serving gets boost profiles only while PSI says CPU / I/O is contended (with hysteresis)."""

    cpu_on: float = 10.0
    cpu_off: float = 5.0
    io_on: float = 10.0
    io_off: float = 5.0
    cpu_boost: str = ""
    io_boost: str = ""
    group: str = "html-serving"


@dataclass(frozen=True)
class Deadline:
    """Per-group run-queue delay targets; urgency 1→ceiling doubles as the delay eats the slack."""

    target_ms: tuple[tuple[str, float], ...] = ()
    ceiling: int = 8
    nice_by_urgency: tuple[int, ...] = (0, -2, -5, -10)
    """Nice for urgency 1, 2, 4, 8 … (one per power of two up to the ceiling)."""
    slice_us_by_urgency: tuple[int, ...] = ()


@dataclass(frozen=True)
class Policy:
    """A validated policy file."""

    source: str
    kind: str
    profiles: Mapping[str, Profile]
    labels: Mapping[str, str]
    exceptions: tuple[ExceptionRule, ...] = ()
    backend: str = "auto"
    min_probability: float = 0.0
    params: FairShare | Partition | HtmlFirst | Deadline = field(default_factory=FairShare)

    def profile_for(self, label: str | None) -> Profile | None:
        """The profile a label maps to, or None."""
        name = self.labels.get(label or "")
        return self.profiles.get(name) if name else None


def parse_cpulist(text: str) -> tuple[int, ...]:
    """'0-2,5' → (0, 1, 2, 5); raises ValueError on anything else, or on a CPU number over CPU_MAX."""
    text = text.replace(" ", "")
    if len(text) > 4096 or not _CPULIST_RE.match(text):
        raise ValueError(text)
    spans = []
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        first, last = int(lo), int(hi or lo)
        if last < first or last > CPU_MAX:
            raise ValueError(text)
        spans.append((first, last))
    return tuple(sorted({c for first, last in spans for c in range(first, last + 1)}))


def format_cpulist(cpus: Sequence[int]) -> str:
    """(0, 1, 2, 5) → "0-2,5", as the kernel prints a CPU list."""
    out: list[list[int]] = []
    for c in sorted(set(cpus)):
        if out and out[-1][1] == c - 1:
            out[-1][1] = c
        else:
            out.append([c, c])
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in out)


class _Checker:
    """Validation with the source text at hand, so every error names its line."""

    def __init__(self, path: str, text: str, online: Sequence[int] | None = None) -> None:
        self.path, self.text = path, text
        self.online = tuple(sorted(online)) if online is not None else None

    def fail(self, table: tuple[str | int, ...], key: str | None, why: str) -> PolicyError:
        return PolicyError(self.path, locate(self.text, table, key), why)

    def table(self, doc: Mapping[str, Any], name: str, table: tuple[str | int, ...],
              required: bool = False) -> dict[str, Any]:
        value = doc.get(name, {} if not required else None)
        if value is None:
            raise self.fail(table, None, f"missing table [{'.'.join(map(str, table + (name,)))}]")
        if not isinstance(value, dict):
            raise self.fail(table, name, f"{name} must be a table")
        return value

    def keys(self, data: Mapping[str, Any], table: tuple[str | int, ...], allowed: tuple[str, ...]) -> None:
        for key in data:
            if key not in allowed:
                raise self.fail(table, key, f"unknown key {key!r}; allowed: {', '.join(allowed)}")

    def integer(self, data: Mapping[str, Any], table: tuple[str | int, ...], key: str,
                lo: int, hi: int, default: int | None = None) -> int | None:
        if key not in data:
            return default
        v = data[key]
        if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
            raise self.fail(table, key, f"{key} = {v!r} is not allowed; allowed: an integer {lo} to {hi}")
        return v

    def number(self, data: Mapping[str, Any], table: tuple[str | int, ...], key: str,
               lo: float, hi: float, default: float) -> float:
        if key not in data:
            return default
        v = data[key]
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not lo <= v <= hi:
            raise self.fail(table, key, f"{key} = {v!r} is not allowed; allowed: a number {lo} to {hi}")
        return float(v)

    def choice(self, data: Mapping[str, Any], table: tuple[str | int, ...], key: str,
               allowed: tuple[str, ...], default: str | None = None) -> str | None:
        if key not in data:
            return default
        v = data[key]
        if v not in allowed:
            raise self.fail(table, key, f"{key} = {v!r} is not allowed; allowed: {', '.join(allowed)}")
        return str(v)

    def string(self, data: Mapping[str, Any], table: tuple[str | int, ...], key: str) -> str | None:
        if key not in data:
            return None
        v = data[key]
        if not isinstance(v, str) or not v or len(v) > TEXT_MAX:
            shown = repr(v) if len(repr(v)) <= 40 else repr(v)[:37] + "..."
            raise self.fail(table, key, f"{key} = {shown} is not allowed; allowed: a non-empty string of at "
                            f"most {TEXT_MAX} characters")
        return v

    def label(self, data: Mapping[str, Any], table: tuple[str | int, ...], key: str, default: str) -> str:
        v = data.get(key, default)
        if not isinstance(v, str) or not _LABEL_RE.match(v):
            raise self.fail(table, key, f"{key} = {v!r} is not allowed; allowed: {_LABELS_ALLOWED}")
        return v


_PROFILE_KEYS = ("cpus", "nice", "io_class", "io_level", "sched_policy", "slice_us",
                 "cpu_weight", "cpu_idle")


def _profile(c: _Checker, name: str, data: Any) -> Profile:
    t: tuple[str | int, ...] = ("profiles", name)
    if not isinstance(data, dict):
        raise c.fail(("profiles",), name, f"profile {name!r} must be a table; allowed keys: "
                     + ", ".join(_PROFILE_KEYS))
    c.keys(data, t, _PROFILE_KEYS)
    cpus = None
    if "cpus" in data:
        raw = data["cpus"]
        try:
            if not isinstance(raw, str):
                raise ValueError(raw)
            cpus = None if raw == "all" else parse_cpulist(raw)
        except ValueError:
            shown = repr(raw) if len(repr(raw)) <= 40 else repr(raw)[:37] + "..."
            raise c.fail(t, "cpus", f"cpus = {shown} is not allowed; allowed: \"all\" or a CPU list "
                         f"like \"0-3,6\" of CPU numbers 0 to {CPU_MAX}") from None
        if cpus is not None and c.online is not None and not set(cpus) <= set(c.online):
            missing = format_cpulist(sorted(set(cpus) - set(c.online)))
            raise c.fail(t, "cpus", f"cpus = {raw!r}: CPUs {missing} do not exist on this machine; "
                         f"allowed: {format_cpulist(c.online)}")
    io_class = c.choice(data, t, "io_class", IO_CLASSES)
    io_level = c.integer(data, t, "io_level", 0, 7)
    if io_level is not None and io_class is None:
        raise c.fail(t, "io_level", "io_level needs io_class; allowed io_class: " + ", ".join(IO_CLASSES))
    if io_class in ("realtime", "best-effort") and io_level is None:
        io_level = 4
    if io_class == "idle":
        io_level = 0  # the idle class has no levels
    idle = data.get("cpu_idle")
    if idle is not None and not isinstance(idle, bool):
        raise c.fail(t, "cpu_idle", f"cpu_idle = {idle!r} is not allowed; allowed: true, false")
    return Profile(
        name=name, cpus=cpus, nice=c.integer(data, t, "nice", -20, 19),
        io_class=io_class, io_level=io_level,
        sched_policy=c.choice(data, t, "sched_policy", SCHED_POLICIES),
        slice_us=c.integer(data, t, "slice_us", *SLICE_US_RANGE),
        cpu_weight=c.integer(data, t, "cpu_weight", 1, 10_000), cpu_idle=idle,
    )


def _exception(c: _Checker, i: int, data: Any) -> ExceptionRule:
    t: tuple[str | int, ...] = ("exceptions", i)
    allowed = ("comm", "exe", "cgroup", "uid")
    if not isinstance(data, dict):
        raise c.fail((), "exceptions", "exceptions must be [[exceptions]] tables")
    c.keys(data, t, allowed)
    if not data:
        raise c.fail(t, None, "an exception must name at least one of: " + ", ".join(allowed))
    return ExceptionRule(comm=c.string(data, t, "comm"), exe=c.string(data, t, "exe"),
                         cgroup=c.string(data, t, "cgroup"),
                         uid=c.integer(data, t, "uid", 0, 2**32 - 2),
                         line=locate(c.text, t, None))


def _params(c: _Checker, kind: str, doc: Mapping[str, Any], profiles: Mapping[str, Profile],
            labels: Mapping[str, str]) -> FairShare | Partition | HtmlFirst | Deadline:
    data = c.table(doc, kind, ())
    t: tuple[str | int, ...] = (kind,)
    if kind == "fair-share":
        c.keys(data, t, ())
        return FairShare()
    if kind == "partition":
        c.keys(data, t, ("reserved_groups", "reserved_cpus"))
        groups = data.get("reserved_groups", list(Partition.reserved_groups))
        if not isinstance(groups, list) or not all(isinstance(g, str) and _LABEL_RE.match(g) for g in groups):
            raise c.fail(t, "reserved_groups", f"reserved_groups = {groups!r} is not allowed; allowed: "
                         f"a list of labels ({_LABELS_ALLOWED})")
        reserved = c.integer(data, t, "reserved_cpus", 0, CPU_MAX, 0) or 0
        if c.online is not None and reserved and reserved > max(len(c.online) - 1, 0):
            raise c.fail(t, "reserved_cpus", f"reserved_cpus = {reserved} is not allowed; allowed: 0 (half) to "
                         f"{max(len(c.online) - 1, 0)}: this machine has {len(c.online)} CPUs and one at "
                         "least stays unreserved")
        return Partition(reserved_groups=tuple(groups), reserved_cpus=reserved)
    if kind == "html-first":
        c.keys(data, t, ("cpu_on", "cpu_off", "io_on", "io_off", "cpu_boost", "io_boost", "group"))
        p = HtmlFirst(
            cpu_on=c.number(data, t, "cpu_on", 0, 100, HtmlFirst.cpu_on),
            cpu_off=c.number(data, t, "cpu_off", 0, 100, HtmlFirst.cpu_off),
            io_on=c.number(data, t, "io_on", 0, 100, HtmlFirst.io_on),
            io_off=c.number(data, t, "io_off", 0, 100, HtmlFirst.io_off),
            cpu_boost=c.string(data, t, "cpu_boost") or "", io_boost=c.string(data, t, "io_boost") or "",
            group=c.label(data, t, "group", HtmlFirst.group),
        )
        for key, on, off in (("cpu_off", p.cpu_on, p.cpu_off), ("io_off", p.io_on, p.io_off)):
            if off > on:
                raise c.fail(t, key, f"{key} = {off} is not allowed; allowed: at most the *_on threshold ({on})")
        for key in ("cpu_boost", "io_boost"):
            name = getattr(p, key)
            if not name:
                raise c.fail(t, None, f"html-first needs {key}; allowed: a profile name ({', '.join(profiles)})")
            if name not in profiles:
                raise c.fail(t, key, f"{key} = {name!r} is not a profile; allowed: {', '.join(profiles)}")
        return p
    c.keys(data, t, ("target_ms", "ceiling", "nice_by_urgency", "slice_us_by_urgency"))
    ceiling = c.integer(data, t, "ceiling", 1, 64, 8) or 8
    if ceiling & (ceiling - 1):
        raise c.fail(t, "ceiling", f"ceiling = {ceiling} is not allowed; allowed: a power of two 1 to 64")
    levels = ceiling.bit_length()  # urgencies 1, 2, 4, … ceiling
    targets = c.table(data, "target_ms", t, required=True)
    tt: tuple[str | int, ...] = (kind, "target_ms")
    for group, ms in targets.items():
        if not _LABEL_RE.match(group):
            raise c.fail(tt, group, f"unknown group {group!r}; allowed: {_LABELS_ALLOWED}")
        if isinstance(ms, bool) or not isinstance(ms, (int, float)) or not 0 < ms <= 60_000:
            raise c.fail(tt, group, f"{group} = {ms!r} is not allowed; allowed: a number of ms, >0 to 60000")
    nice = data.get("nice_by_urgency", list(Deadline.nice_by_urgency)[:levels])
    if (not isinstance(nice, list) or len(nice) != levels
            or not all(isinstance(n, int) and not isinstance(n, bool) and -20 <= n <= 19 for n in nice)):
        raise c.fail(t, "nice_by_urgency", f"nice_by_urgency = {nice!r} is not allowed; allowed: {levels} "
                     f"integers -20 to 19, one per urgency {', '.join(str(1 << i) for i in range(levels))}")
    slices = data.get("slice_us_by_urgency", [])
    lo, hi = SLICE_US_RANGE
    if (not isinstance(slices, list) or (slices and len(slices) != levels)
            or not all(isinstance(s, int) and not isinstance(s, bool) and lo <= s <= hi for s in slices)):
        raise c.fail(t, "slice_us_by_urgency", f"slice_us_by_urgency = {slices!r} is not allowed; allowed: "
                     f"empty or {levels} integers {lo} to {hi}")
    return Deadline(target_ms=tuple((g, float(v)) for g, v in targets.items()), ceiling=ceiling,
                    nice_by_urgency=tuple(nice), slice_us_by_urgency=tuple(slices))


def parse_policy(text: str, path: str = "<policy>", online: Sequence[int] | None = None) -> Policy:
    """Validate policy TOML text; raises PolicyError naming path:line and what is allowed.

    `online`: the CPUs of the machine the policy is for; a profile naming others is refused
    (None: CPU numbers are only checked against CPU_MAX).
    """
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        m = re.search(r"\(at line (\d+), column \d+\)", str(err))
        raise PolicyError(path, int(m.group(1)) if m else None,
                          f"not valid TOML: {re.sub(r' [(]at line.*', '', str(err))}") from err
    except RecursionError as err:
        raise PolicyError(path, None, "not valid TOML: nested too deeply") from err
    c = _Checker(path, text, online)
    top = ("policy", "profiles", "labels", "exceptions") + KINDS
    c.keys(doc, (), top)
    head = c.table(doc, "policy", (), required=True)
    c.keys(head, ("policy",), ("kind", "backend", "min_probability"))
    if "kind" not in head:
        raise c.fail(("policy",), None, "[policy] needs kind; allowed: " + ", ".join(KINDS))
    kind = c.choice(head, ("policy",), "kind", KINDS) or "fair-share"
    profiles_raw = c.table(doc, "profiles", (), required=True)
    profiles = {name: _profile(c, name, data) for name, data in profiles_raw.items()}
    labels_raw = c.table(doc, "labels", (), required=True)
    labels: dict[str, str] = {}
    for label, prof in labels_raw.items():
        if not _LABEL_RE.match(label):
            raise c.fail(("labels",), label, f"unknown label {label!r}; allowed: {_LABELS_ALLOWED}")
        if not isinstance(prof, str):
            shown = repr(prof) if len(repr(prof)) <= 40 else repr(prof)[:37] + "..."
            raise c.fail(("labels",), label, f"{label} = {shown} is not allowed; allowed: a profile name ("
                         + ", ".join(profiles) + ")")
        if prof not in profiles:
            raise c.fail(("labels",), label, f"{label} = {prof!r} is not a profile; allowed: "
                         + ", ".join(profiles))
        labels[label] = prof
    exc_raw = doc.get("exceptions", [])
    if not isinstance(exc_raw, list):
        raise c.fail((), "exceptions", "exceptions must be [[exceptions]] tables")
    exceptions = tuple(_exception(c, i, e) for i, e in enumerate(exc_raw))
    for other in KINDS:
        if other != kind and other in doc:
            c.table(doc, other, ())  # must at least be a table; unused parameters are kept for switching
    return Policy(
        source=path, kind=kind, profiles=profiles, labels=labels, exceptions=exceptions,
        backend=c.choice(head, ("policy",), "backend", BACKENDS, "auto") or "auto",
        min_probability=c.number(head, ("policy",), "min_probability", 0.0, 1.0, 0.0),
        params=_params(c, kind, doc, profiles, labels),
    )


def load_policy(path: str | Path | None = None, online: Sequence[int] | None = None) -> Policy:
    """Load and validate a policy file for this machine; None loads the bundled default policy.

    `online`: the CPUs to check profiles against (None: this machine's online CPUs).
    """
    if online is None:
        from procsift.distributor._sys import online_cpus  # noqa: PLC0415 (a read of /sys)
        online = online_cpus()
    if path is None:
        ref = resources.files("procsift.distributor").joinpath(DEFAULT_POLICY_NAME)
        return parse_policy(ref.read_text(encoding="utf-8"), f"<bundled {DEFAULT_POLICY_NAME}>", online)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise PolicyError(str(path), None, "no such policy file") from None
    except OSError as err:
        raise PolicyError(str(path), None, f"cannot read policy file: {err.strerror}") from err
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise PolicyError(str(path), None, "not a regular file; a policy is a TOML file")
        with os.fdopen(os.dup(fd), "rb") as fh:
            data = fh.read(MAX_POLICY_BYTES + 1)
    except OSError as err:
        raise PolicyError(str(path), None, f"cannot read policy file: {err.strerror}") from err
    finally:
        os.close(fd)
    if len(data) > MAX_POLICY_BYTES:
        raise PolicyError(str(path), None, f"over {MAX_POLICY_BYTES >> 20} MiB; not a policy file")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise PolicyError(str(path), None, f"not UTF-8 text ({err.reason} at byte {err.start})") from err
    return parse_policy(text, str(path), online)
