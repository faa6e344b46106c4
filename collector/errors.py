"""The error tree every procsift package raises from; the CLI and API translate it at one boundary."""

from __future__ import annotations


class ProcsiftError(Exception):
    """Base of every error procsift reports to a user as one plain line."""


class BPFUnavailable(ProcsiftError):
    """BPF could not be loaded here (not root, no headers, no bcc, kernel feature missing)."""


class ProcessGone(ProcsiftError):
    """A process exited (or its PID was reused) between looking and acting."""

    def __init__(self, pid: int, comm: str = "") -> None:
        super().__init__(f"process {pid}{f' ({comm})' if comm else ''} is gone")
        self.pid = pid
        self.comm = comm


class AccessDenied(ProcsiftError):
    """The kernel refused access to a process."""

    def __init__(self, pid: int, what: str = "") -> None:
        super().__init__(f"access denied to process {pid}{f': {what}' if what else ''}")
        self.pid = pid


class TraceError(ProcsiftError):
    """A trace file is missing, corrupt, truncated, of another schema, or holds a value outside its range.

    `row` (1-based, the n-th data row) and `column` say where, when the fault is in one value.
    """

    def __init__(self, path: str, why: str, row: int | None = None, column: str | None = None) -> None:
        where = ", ".join(([f"row {row}"] if row is not None else []) + ([f"column {column!r}"] if column else []))
        super().__init__(f"{path}: {where + ': ' if where else ''}{why}")
        self.path = path
        self.row = row
        self.column = column
