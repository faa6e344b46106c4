"""Reading /proc: process identity and enrichment (comm, exe, uid, cgroup, rss, I/O bytes).

The per-window hot path reads one `stat` and one `io` file per active process; fields
that rarely change (exe, uid, cgroup) are read once per process identity and cached.
`root` lets tests point this at a fake procfs.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import psutil

from procsift.collector.samples import ProcInfo

__all__ = ["CLK_TCK", "PAGE_SIZE", "Stat", "read_stat", "read_io", "read_schedstat", "tgid_of",
           "task_ids", "is_kernel_thread", "ProcReader"]

CLK_TCK = os.sysconf("SC_CLK_TCK")
PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")
PF_KTHREAD = 0x00200000  # include/linux/sched.h


@dataclass(frozen=True, slots=True)
class Stat:
    """The fields of /proc/PID/stat procsift uses."""

    comm: str
    state: str
    ppid: int
    flags: int
    utime: int
    stime: int
    nthreads: int
    start_time: int
    rss_pages: int


def parse_stat(text: str) -> Stat:
    """Parse the text of /proc/PID/stat (comm may hold spaces and parentheses)."""
    lpar, rpar = text.index("("), text.rindex(")")
    comm = text[lpar + 1:rpar]
    f = text[rpar + 2:].split()
    # f[0] is field 3 (state); field N is f[N - 3].
    return Stat(comm=comm, state=f[0], ppid=int(f[1]), flags=int(f[6]), utime=int(f[11]),
                stime=int(f[12]), nthreads=int(f[17]), start_time=int(f[19]), rss_pages=int(f[21]))


def _read(path: str) -> bytes:
    # os.open/os.read: half the cost of open() for small /proc files, and this runs
    # once per active process per window.
    fd = os.open(path, os.O_RDONLY)
    try:
        return os.read(fd, 8192)
    finally:
        os.close(fd)


def read_stat(pid: int, root: str = "/proc", tid: int | None = None) -> Stat | None:
    """/proc/PID/stat (or one thread's), or None when the process is gone."""
    path = f"{root}/{pid}/stat" if tid is None else f"{root}/{pid}/task/{tid}/stat"
    try:
        return parse_stat(_read(path).decode("utf-8", "replace"))
    except (OSError, ValueError, IndexError):
        return None


_IO_FIELDS = {b"read_bytes:": 0, b"write_bytes:": 1, b"rchar:": 2, b"wchar:": 3}


def read_io(pid: int, root: str = "/proc") -> tuple[int, int, int, int]:
    """Cumulative (read_bytes, write_bytes, rchar, wchar) of a process; zeros when unreadable."""
    out = [0, 0, 0, 0]
    try:
        for line in _read(f"{root}/{pid}/io").splitlines():
            key, _, value = line.partition(b" ")
            i = _IO_FIELDS.get(key)
            if i is not None:
                out[i] = int(value)
    except (OSError, ValueError):
        pass
    return out[0], out[1], out[2], out[3]


def read_schedstat(tid: int, root: str = "/proc") -> tuple[int, int, int] | None:
    """A task's (on-CPU ns, run-queue wait ns, dispatches) as the kernel counts them, or None."""
    try:
        f = _read(f"{root}/{tid}/schedstat").split()
        return int(f[0]), int(f[1]), int(f[2])
    except (OSError, ValueError, IndexError):
        return None


def tgid_of(tid: int, root: str = "/proc") -> int | None:
    """The process a thread belongs to, or None when it is gone."""
    try:
        with open(f"{root}/{tid}/status", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if line.startswith("Tgid:"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        return None
    return None


def task_ids(pid: int, root: str = "/proc") -> list[int]:
    """The thread ids of a process (empty when it is gone)."""
    try:
        return [int(t) for t in os.listdir(f"{root}/{pid}/task")]
    except OSError:
        return []


def is_kernel_thread(pid: int, root: str = "/proc") -> bool:
    """True for kernel threads (PF_KTHREAD), which procsift never touches."""
    st = read_stat(pid, root)
    return st is not None and bool(st.flags & PF_KTHREAD)


def _read_cgroup(pid: int, root: str) -> str:
    """The process' cgroup path: the v2 entry when there is one, else the first v1 entry."""
    try:
        with open(f"{root}/{pid}/cgroup", encoding="utf-8", errors="replace") as fh:
            lines = fh.read().splitlines()
    except OSError:
        return ""
    for line in lines:
        if line.startswith("0::"):
            return line[3:]
    return lines[0].split(":", 2)[2] if lines and lines[0].count(":") >= 2 else ""


class ProcReader:
    """Reads ProcInfo for processes, caching what only changes with the process' identity."""

    def __init__(self, root: str = "/proc") -> None:
        self.root = root
        self._static: dict[tuple[int, int], tuple[str, int, str]] = {}

    def info(self, pid: int, io: bool = True) -> ProcInfo | None:
        """ProcInfo of `pid` now, or None when it is gone; io=False skips /proc/PID/io (bytes -1)."""
        st = read_stat(pid, self.root)
        if st is None:
            return None
        key = (pid, st.start_time)
        static = self._static.get(key)
        if static is None:
            static = (self._exe(pid), self._uid(pid), _read_cgroup(pid, self.root))
            self._static[key] = static
        exe, uid, cgroup = static
        rb, wb, rc, wc = read_io(pid, self.root) if io else (-1, -1, -1, -1)
        return ProcInfo(pid=pid, start_time=st.start_time, ppid=st.ppid, comm=st.comm, exe=exe,
                        uid=uid, nthreads=st.nthreads, cgroup=cgroup,
                        rss_bytes=st.rss_pages * PAGE_SIZE, read_bytes=rb, write_bytes=wb,
                        rchar=rc, wchar=wc)

    def forget(self, pid: int, start_time: int) -> None:
        """Drop the cache of a process that exited."""
        self._static.pop((pid, start_time), None)

    def _exe(self, pid: int) -> str:
        if self.root != "/proc":
            try:
                return os.readlink(f"{self.root}/{pid}/exe")
            except OSError:
                return ""
        try:
            return psutil.Process(pid).exe()
        except (psutil.Error, OSError):
            return ""

    def _uid(self, pid: int) -> int:
        try:
            return os.stat(f"{self.root}/{pid}").st_uid
        except OSError:
            return -1
