"""The Window row: one process, one window. Field names here are the contract between all parts."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from procsift.collector.syscalls import CATEGORIES, SYSCALL_NAMES, category_of

__all__ = [
    "SCHEMA_VERSION", "LABELS", "Window", "IDENTITY_COLUMNS", "SCHED_COLUMNS", "IO_COLUMNS",
    "SOCKET_COLUMNS", "CATEGORY_COLUMNS", "SYSCALL_COLUMNS", "COLUMNS", "INT_COLUMNS", "STR_COLUMNS",
    "MIN_DISPATCHES", "MIN_SYSCALLS", "IDLE_RUN_NS", "syscall_column", "category_column", "is_insufficient",
    "COUNT_MAX", "PID_MAX", "WINDOW_RANGE_S", "MAX_TRACE_WINDOWS", "TEXT_MAX", "value_range", "allowed_values",
    "printable",
]

SCHEMA_VERSION = 3
"""Bumped whenever a column is added, removed or changes meaning (2: rchar, wchar;
3: the socket columns)."""

LABELS: tuple[str, ...] = ("interactive", "background", "html-serving")
"""The labels a row may carry; anything else is refused on read."""

MIN_DISPATCHES = 5
"""A window with fewer dispatches than this and no syscall counts is too quiet to judge."""
MIN_SYSCALLS = 3
"""A window with one dispatch or none, fewer syscalls than this and under IDLE_RUN_NS on a CPU
is too quiet to judge: a timer tick (wake, one or two calls, sleep), not behaviour."""
IDLE_RUN_NS = 1_000_000

IDENTITY_COLUMNS: tuple[str, ...] = (
    "host", "t_start", "dur_s", "pid", "start_time", "ppid", "comm", "exe", "uid",
    "nthreads", "cgroup",
)
SCHED_COLUMNS: tuple[str, ...] = (
    "run_ns", "runq_ns", "sleep_ns", "block_ns", "switches_in", "voluntary",
    "involuntary", "max_wait_ns", "run_wait_transitions", "wakeups", "wakes_others",
)
IO_COLUMNS: tuple[str, ...] = ("read_bytes", "write_bytes", "rchar", "wchar", "rss_bytes")
"""Storage bytes (read_bytes, write_bytes), bytes through read/write-like calls including
sockets, pipes and sendfile (rchar, wchar; /proc/PID/io), and the resident set."""
SOCKET_COLUMNS: tuple[str, ...] = ("net_tx", "net_tx_bytes", "net_rx", "net_rx_bytes", "unix_calls")
"""Socket traffic whatever the syscall (read/write, send*/recv*, sendfile): IPv4/IPv6 sends
and receives (calls, failed ones included, and bytes), and AF_UNIX calls. Zero where the
kernel lacks the sock tracepoints (before 6.3) and under the /proc fallback."""


def syscall_column(name: str) -> str:
    """Column holding the count of syscall `name`."""
    return f"sys_{name}"


def category_column(category: str) -> str:
    """Column holding the count of syscalls in `category`."""
    return f"cat_{category}"


CATEGORY_COLUMNS: tuple[str, ...] = tuple(category_column(c) for c in CATEGORIES)
SYSCALL_COLUMNS: tuple[str, ...] = tuple(syscall_column(n) for n in SYSCALL_NAMES)
FLAG_COLUMNS: tuple[str, ...] = ("syscalls", "insufficient", "exited")
OPTIONAL_COLUMNS: tuple[str, ...] = ("label", "source")

COLUMNS: tuple[str, ...] = (
    IDENTITY_COLUMNS + SCHED_COLUMNS + IO_COLUMNS + SOCKET_COLUMNS + FLAG_COLUMNS + CATEGORY_COLUMNS
    + SYSCALL_COLUMNS + OPTIONAL_COLUMNS
)
"""Every column of a trace file, in file order."""

STR_COLUMNS: frozenset[str] = frozenset({"host", "comm", "exe", "cgroup", "label", "source"})
FLOAT_COLUMNS: frozenset[str] = frozenset({"t_start", "dur_s"})
BOOL_COLUMNS: frozenset[str] = frozenset({"insufficient", "exited"})
INT_COLUMNS: frozenset[str] = frozenset(COLUMNS) - STR_COLUMNS - FLOAT_COLUMNS - BOOL_COLUMNS


# -- what a trace may hold (the trace file's schema; collector/traceio.py enforces it) -----------

COUNT_MAX = 2**53
"""Counts, nanoseconds and bytes: whole numbers from 0 to here (exact in a float64; a window
that reached it would have lasted 104 days on one CPU)."""
PID_MAX = 2**22
"""PID_MAX_LIMIT on 64-bit Linux: no pid, ppid or thread count is larger."""
WINDOW_RANGE_S = (0.01, 3600.0)
"""A trace's window length: from 10 ms (shorter is below the cost of draining the maps) to an hour."""
MAX_TRACE_WINDOWS = 10_000_000
"""At most this many windows between a trace's first and last row (58 days of 0.5 s windows):
re-aggregating a trace allocates per window, so a stray t_start a century away must not be taken."""
T_START_MAX = float(2**32)
"""Unix seconds up to 2106."""
TEXT_MAX: dict[str, int] = {"host": 255, "comm": 64, "exe": 4096, "cgroup": 4096, "source": 255}

_RANGES: dict[str, tuple[float, float, bool]] = {
    "t_start": (0.0, T_START_MAX, False), "dur_s": (0.0, WINDOW_RANGE_S[1], True),
    "pid": (0, PID_MAX, False), "ppid": (0, PID_MAX, False), "nthreads": (0, PID_MAX, False),
    "uid": (-1, 2**32 - 1, False),
}


def printable(text: object) -> str:
    """Text as it may be shown on a terminal or in a log line: control and format characters (an
    escape sequence, a newline, a bidi override) written as \\x1b, \\n, \\u202e. Any user can name
    a process "\\x1b]0;...": its comm must not drive the terminal of whoever runs `procsift top`."""
    s = str(text)
    if s.isprintable():
        return s
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in s)


def value_range(column: str) -> tuple[float, float, bool]:
    """(lowest, highest, lowest excluded) of a numeric trace column."""
    return _RANGES.get(column, (0, COUNT_MAX, False))


def allowed_values(column: str) -> str:
    """What a trace column may hold, in words (the "allowed: ..." of an error)."""
    if column in BOOL_COLUMNS:
        return "true or false (1 or 0)"
    if column == "label":
        return ", ".join(LABELS) + " or empty"
    if column in STR_COLUMNS:
        return f"text of at most {TEXT_MAX.get(column, 255)} characters"
    lo, hi, open_lo = value_range(column)
    if column == "t_start":
        return f"unix seconds 0 to {hi:.0f}"
    if column == "dur_s":
        return f"a number of seconds > 0 and at most {hi:g}"
    return f"a whole number {lo:g} to {hi:.0f}" if lo < 0 else f"a whole number 0 to {hi:.0f}"


def is_insufficient(switches_in: Any, syscalls: Any, run_ns: Any) -> Any:
    """True when a window holds too little activity to judge (the process keeps its label).

    Only a window under IDLE_RUN_NS on a CPU can be too quiet: a process that computed all
    window without a syscall or a switch (a CPU loop alone on its core) is busy, not quiet.
    Below that, with no syscall counts (the /proc collector, or none made): fewer than
    MIN_DISPATCHES dispatches; with them, a timer tick (see MIN_SYSCALLS). Plain numbers give
    a bool (the daemon's per-window call); numpy arrays or pandas Series give flags element by
    element.
    """
    return (run_ns < IDLE_RUN_NS) & (((syscalls == 0) & (switches_in < MIN_DISPATCHES)) | (
        (switches_in <= 1) & (syscalls < MIN_SYSCALLS)))


@dataclass(frozen=True, slots=True)
class Window:
    """What one process (thread group) did in one window; threads are folded in."""

    host: str
    t_start: float
    dur_s: float
    pid: int
    start_time: int
    ppid: int = 0
    comm: str = ""
    exe: str = ""
    uid: int = -1
    nthreads: int = 1
    cgroup: str = ""
    run_ns: int = 0
    runq_ns: int = 0
    sleep_ns: int = 0
    block_ns: int = 0
    switches_in: int = 0
    voluntary: int = 0
    involuntary: int = 0
    max_wait_ns: int = 0
    run_wait_transitions: int = 0
    wakeups: int = 0
    wakes_others: int = 0
    read_bytes: int = 0
    write_bytes: int = 0
    rchar: int = 0
    wchar: int = 0
    rss_bytes: int = 0
    net_tx: int = 0
    net_tx_bytes: int = 0
    net_rx: int = 0
    net_rx_bytes: int = 0
    unix_calls: int = 0
    syscalls: Mapping[str, int] = field(default_factory=dict)
    exited: bool = False
    label: str | None = None
    source: str | None = None

    @property
    def syscalls_total(self) -> int:
        """All syscalls the process made in the window."""
        return sum(self.syscalls.values())

    @property
    def insufficient(self) -> bool:
        """Too little activity to judge; see is_insufficient."""
        return is_insufficient(self.switches_in, self.syscalls_total, self.run_ns)

    def categories(self) -> dict[str, int]:
        """Syscall counts summed per category (every category present)."""
        out = dict.fromkeys(CATEGORIES, 0)
        for name, count in self.syscalls.items():
            out[category_of(name)] += count
        return out

    def top_syscalls(self, n: int = 3) -> list[tuple[str, int]]:
        """The `n` most frequent syscalls, most frequent first."""
        return sorted(self.syscalls.items(), key=lambda kv: (-kv[1], kv[0]))[:n]

    def as_record(self) -> dict[str, object]:
        """The row as a flat mapping of trace columns (zeros for syscalls not made)."""
        rec: dict[str, object] = {c: getattr(self, c)
                                  for c in IDENTITY_COLUMNS + SCHED_COLUMNS + IO_COLUMNS + SOCKET_COLUMNS}
        total = 0
        sys_counts = dict.fromkeys(SYSCALL_COLUMNS, 0)
        for name, count in self.syscalls.items():
            col = syscall_column(name)
            if col not in sys_counts:
                col = syscall_column("unknown")
            sys_counts[col] += count
            total += count
        rec["syscalls"] = total
        rec["insufficient"] = is_insufficient(self.switches_in, total, self.run_ns)
        rec["exited"] = self.exited
        rec.update({category_column(c): v for c, v in self.categories().items()})
        rec.update(sys_counts)
        rec["label"] = self.label
        rec["source"] = self.source
        return rec
