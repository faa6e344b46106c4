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
    """A trace file is missing, corrupt, truncated or of another schema."""

    def __init__(self, path: str, why: str) -> None:
        super().__init__(f"{path}: {why}")
        self.path = path
