"""Errors the distributor raises; all are ProcsiftError subclasses, reported as one plain line."""

from __future__ import annotations

from procsift.collector.errors import AccessDenied, ProcessGone, ProcsiftError

__all__ = ["PolicyError", "JournalError", "BackendUnavailable", "ProcessGone", "AccessDenied", "ProcsiftError"]


class PolicyError(ProcsiftError):
    """A policy file is missing, not TOML, or holds a value outside what is allowed."""

    def __init__(self, path: str, line: int | None, why: str) -> None:
        where = f"{path}:{line}" if line else path
        super().__init__(f"{where}: {why}")
        self.path = path
        self.line = line
        self.why = why


class JournalError(ProcsiftError):
    """The journal of original values cannot be read, written or locked, or holds an entry outside
    its schema (`key`: the process, "pid:start_time"; `field`: the dotted field at fault)."""

    def __init__(self, path: str, why: str, key: str | None = None, field: str | None = None) -> None:
        super().__init__(f"{path}: {why}")
        self.path = path
        self.key = key
        self.field = field


class BackendUnavailable(ProcsiftError):
    """The requested placement backend (cgroup, autogroup) does not exist or is not writable here."""
