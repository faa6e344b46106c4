"""Files that decide what procsift runs or allows (a bundle's pickle, the API token): who may
have written them, read once from an open descriptor so the bytes checked are the bytes used.

The rule is ssh's for a private key: owned by root or by the user procsift runs as, and
writable by nobody else (no group or world write bit), a regular file, not a symbolic link.
"""

from __future__ import annotations

import os
import stat

__all__ = ["trust_problem", "open_member", "read_all"]


def trust_problem(st: os.stat_result, what: str) -> str | None:
    """Why `what` (described by `st`) must not be trusted, in words; None when it may be."""
    me = os.geteuid()
    if st.st_uid not in (me, 0):
        return f"{what} is owned by uid {st.st_uid}, not by you (uid {me}) or root"
    if st.st_mode & 0o002:
        return f"{what} is writable by every user"
    if st.st_mode & 0o020:
        return f"{what} is writable by its group"
    return None


def open_member(name: str, dir_fd: int | None = None) -> int:
    """Open a file for reading without following a symbolic link (ELOOP if it is one) and
    without blocking on a FIFO; the caller fstat()s the descriptor and checks what it got."""
    return os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dir_fd)


def read_all(fd: int, limit: int) -> bytes | None:
    """Every byte of an open regular file, or None when it holds more than `limit` bytes."""
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or st.st_size > limit:
        return None
    chunks: list[bytes] = []
    total = 0
    while True:
        chunk = os.read(fd, 1 << 20)
        if not chunk:
            return b"".join(chunks)
        total += len(chunk)
        if total > limit:
            return None
        chunks.append(chunk)
