"""The on-disk journal of original values: written atomically (temp + fsync + rename) and locked."""

from __future__ import annotations

import fcntl
import json
import os
import re
import tempfile
from pathlib import Path
from typing import Any

from procsift.distributor.errors import JournalError
from procsift.distributor.policy import CPU_MAX

__all__ = ["Journal", "default_journal_path", "atomic_write", "check_journal", "STATE_DIR_ENV", "DEFAULT_STATE_DIR"]

STATE_DIR_ENV = "PROCSIFT_STATE_DIR"
DEFAULT_STATE_DIR = "/var/lib/procsift"
VERSION = 1


def default_journal_path() -> Path:
    """$PROCSIFT_STATE_DIR/journal.json, else /var/lib/procsift/journal.json."""
    return Path(os.environ.get(STATE_DIR_ENV) or DEFAULT_STATE_DIR) / "journal.json"


def atomic_write(path: Path, data: bytes) -> None:
    """Write a file so a reader (or a crash) sees either the old or the new content, never half."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    dfd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(dfd)  # make the rename itself durable
    finally:
        os.close(dfd)


_MOVE_AWAY = "move it away to start without restoring"
_KEY = re.compile(r"^\d{1,7}:\d{1,16}$")
_TID = re.compile(r"^\d{1,7}$")
_IO_CLASSES = ("none", "realtime", "best-effort", "idle")
_FIELDS = ("nice", "affinity", "io", "policy", "slice")


def _bad(path: str, key: str | None, field: str, value: Any, allowed: str) -> JournalError:
    shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:37] + "..."
    where = f'process "{key}", ' if key is not None else ""
    return JournalError(path, f"not a procsift journal: {where}{field} = {shown} is not allowed; allowed: "
                        f"{allowed}; {_MOVE_AWAY}", key=key, field=field)


def _int(v: Any, lo: int, hi: int) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and lo <= v <= hi


# What each per-thread field may hold, and the words for it (the values _threadstate reads).
_FIELD_OK: dict[str, tuple[Any, str]] = {
    "nice": (lambda v: _int(v, -20, 19), "a whole number -20 to 19"),
    "affinity": (lambda v: isinstance(v, list) and 0 < len(v) <= CPU_MAX + 1 and all(_int(c, 0, CPU_MAX) for c in v),
                 f"a list of CPU numbers 0 to {CPU_MAX}"),
    "io": (lambda v: isinstance(v, list) and len(v) == 2 and v[0] in _IO_CLASSES and _int(v[1], 0, 7),
           f"[class, level]: class one of {', '.join(_IO_CLASSES)}, level 0 to 7"),
    "policy": (lambda v: _int(v, 0, 7), "a scheduling policy number 0 to 7"),
    "slice": (lambda v: v is None or _int(v, 0, 10**10), "null or nanoseconds 0 to 10^10"),
}


def _check_thread(path: str, key: str, where: str, state: Any) -> None:
    if not isinstance(state, dict) or set(state) != set(_FIELDS):
        raise _bad(path, key, where, state, "an object of " + ", ".join(_FIELDS))
    for f in _FIELDS:
        ok, allowed = _FIELD_OK[f]
        if not ok(state[f]):
            raise _bad(path, key, f"{where}.{f}", state[f], allowed)


def _check_group(path: str, key: str, name: str, group: Any) -> None:
    if not isinstance(group, dict) or not {"orig", "set"} <= set(group):
        raise _bad(path, key, name, group, "an object with orig and set")
    for f in ("orig", "set"):
        v = group[f]
        if (not isinstance(v, str) or len(v) > 4096 or not v.startswith("/") or "\0" in v or "\n" in v
                or {".", ".."} & set(v.split("/"))):
            raise _bad(path, key, f"{name}.{f}", v, "a cgroup path like /procsift.w50 (no . or .. in it)")
    if not isinstance(group.get("mount", ""), str):
        raise _bad(path, key, f"{name}.mount", group["mount"], "a path")


def _check_entry(path: str, key: str, e: Any) -> None:
    """One process's entry: the originals of its threads, what procsift set, and where it moved it."""
    if not isinstance(e, dict):
        raise _bad(path, key, "entry", e, "an object with pid, start_time, comm, default, threads, applied")
    if not _int(e.get("pid"), 1, 2**22):
        raise _bad(path, key, "pid", e.get("pid"), "a process id 1 to 4194304")
    if not _int(e.get("start_time"), 0, 2**53):
        raise _bad(path, key, "start_time", e.get("start_time"), "clock ticks since boot, 0 or more")
    if key != f"{e['pid']}:{e['start_time']}":
        raise _bad(path, key, "pid:start_time", f"{e['pid']}:{e['start_time']}", f"the key, {key}")
    if not isinstance(e.get("comm"), str) or len(e["comm"]) > 64:
        raise _bad(path, key, "comm", e.get("comm"), "a command name")
    if "default" not in e:
        raise _bad(path, key, "default", None, "the thread values to restore")
    _check_thread(path, key, "default", e["default"])
    threads = e.get("threads")
    if not isinstance(threads, dict) or not all(isinstance(t, str) and _TID.match(t) for t in threads):
        raise _bad(path, key, "threads", threads, "an object of thread id to thread values")
    for tid, state in threads.items():
        _check_thread(path, key, f"threads.{tid}", state)
    applied = e.get("applied")
    if not isinstance(applied, dict) or not set(applied) <= set(_FIELDS):
        raise _bad(path, key, "applied", applied, "an object of fields (" + ", ".join(_FIELDS) + ")")
    for f, v in applied.items():
        ok, allowed = _FIELD_OK[f]
        if not ok(v):
            raise _bad(path, key, f"applied.{f}", v, allowed)
    tids = e.get("applied_tids")
    if not isinstance(tids, dict) or not all(
            isinstance(t, str) and _TID.match(t) and isinstance(fs, list)
            and all(isinstance(f, str) and f in _FIELDS for f in fs) for t, fs in tids.items()):
        raise _bad(path, key, "applied_tids", tids, "an object of thread id to a list of fields")
    for name in ("cgroup", "cpuset"):
        if name in e:
            _check_group(path, key, name, e[name])
    if "autogroup" in e:
        ag = e["autogroup"]
        if not isinstance(ag, dict) or not isinstance(ag.get("name"), str) or len(ag["name"]) > 64:
            raise _bad(path, key, "autogroup", ag, "an object with name, orig and set")
        for f in ("orig", "set"):
            if not _int(ag.get(f), -20, 19):
                raise _bad(path, key, f"autogroup.{f}", ag.get(f), "a whole number -20 to 19")


def check_journal(doc: Any, path: str) -> None:
    """The journal schema: every entry checked, so restoring code can trust what it reads."""
    if not isinstance(doc, dict):
        raise JournalError(path, f"not a procsift journal (not a JSON object); {_MOVE_AWAY}")
    version = doc.get("version")
    if isinstance(version, bool) or version != VERSION:
        raise JournalError(path, f"not a procsift journal (journal version {version!r}, expected {VERSION}); "
                           f"{_MOVE_AWAY}", field="version")
    processes = doc.get("processes")
    if not isinstance(processes, dict):
        raise _bad(path, None, "processes", processes, 'an object of "pid:start_time" to entries')
    for key, e in processes.items():
        if not _KEY.match(key):
            raise _bad(path, key, "key", key, '"pid:start_time"')
        _check_entry(path, key, e)
    backed = doc.get("backed_off", [])
    if not isinstance(backed, list) or not all(isinstance(k, str) and _KEY.match(k) for k in backed):
        raise _bad(path, None, "backed_off", backed, 'a list of "pid:start_time"')


class Journal:
    """Original values per process (key "pid:start_time"), what procsift set, and who backed off.

    One owner at a time: an exclusive flock on `<path>.lock` is held while the journal is open,
    so a second daemon (or `procsift restore` while one runs) fails plainly instead of racing.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.processes: dict[str, dict[str, Any]] = {}
        self.backed_off: set[str] = set()
        self._lock_fd: int | None = None
        self._last: bytes | None = None

    def open(self) -> Journal:
        """Take the lock and read whatever a previous run left (an absent file is an empty journal)."""
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(f"{self.path}.lock", os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as err:
            raise JournalError(str(self.path), f"cannot open the journal lock: {err.strerror}") from err
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise JournalError(str(self.path), "in use by another procsift (its lock is held)") from None
        self._lock_fd = fd
        try:
            self._read()
        except BaseException:
            self.close()  # a journal that cannot be read does not keep its lock
            raise
        return self

    def _read(self) -> None:
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return
        except OSError as err:
            raise JournalError(str(self.path), f"cannot read: {err.strerror}") from err
        try:
            doc = json.loads(raw)
        except (ValueError, RecursionError) as err:
            raise JournalError(str(self.path), f"not a procsift journal ({err.__class__.__name__}); "
                               f"{_MOVE_AWAY}") from err
        check_journal(doc, str(self.path))
        self.processes = dict(doc["processes"])
        self.backed_off = set(doc.get("backed_off", []))

    def save(self) -> None:
        """Write the journal atomically (before the changes it describes are made)."""
        doc = {"version": VERSION, "owner_pid": os.getpid(), "processes": self.processes,
               "backed_off": sorted(self.backed_off)}
        data = json.dumps(doc, indent=1, sort_keys=True).encode()
        if data == self._last:
            return  # nothing changed this window: no rewrite, no fsync
        try:
            atomic_write(self.path, data)
        except OSError as err:
            raise JournalError(str(self.path), f"cannot write: {err.strerror}") from err
        self._last = data

    def close(self) -> None:
        """Release the lock."""
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    def __enter__(self) -> Journal:
        return self.open()

    def __exit__(self, *exc: object) -> None:
        self.close()
