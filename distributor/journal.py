"""The on-disk journal of original values: written atomically (temp + fsync + rename) and locked."""

from __future__ import annotations

import fcntl
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from procsift.distributor.errors import JournalError

__all__ = ["Journal", "default_journal_path", "atomic_write", "STATE_DIR_ENV", "DEFAULT_STATE_DIR"]

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
        self._read()
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
            if doc.get("version") != VERSION:
                raise ValueError(f"journal version {doc.get('version')!r}, expected {VERSION}")
            self.processes = dict(doc["processes"])
            self.backed_off = set(doc.get("backed_off", []))
        except (ValueError, KeyError, TypeError, AttributeError) as err:
            raise JournalError(str(self.path), f"not a procsift journal ({err}); "
                               "move it away to start without restoring") from err

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
