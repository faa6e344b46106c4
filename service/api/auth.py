"""Bearer tokens for the endpoints that change anything: a root-only file, made on first start."""

from __future__ import annotations

import hmac
import os
import re
import secrets
import stat
import sys
from pathlib import Path

from procsift.collector.errors import ProcsiftError
from procsift.collector.trust import open_member, read_all, trust_problem

__all__ = ["load_or_create_token", "token_matches", "MIN_TOKEN_CHARS"]


MIN_TOKEN_CHARS = 32
"""A token shorter than this is refused: secrets.token_urlsafe(32), what procsift makes, has 43."""
_TOKEN = re.compile(r"^[A-Za-z0-9._~+/=-]+$")  # RFC 6750 b64token: what fits in a bearer header


def _read_token(p: Path) -> str | None:
    """The token in `p`, checked as a secret must be; None if there is no such file."""
    try:
        fd = open_member(str(p))
    except FileNotFoundError:
        return None
    except OSError as err:
        if p.is_symlink():
            raise ProcsiftError(f"{p}: the API token file is a symbolic link; give the file itself") from err
        raise ProcsiftError(f"{p}: cannot read the API token ({err.strerror})") from err
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ProcsiftError(f"{p}: the API token file is not a regular file")
        why = trust_problem(st, "the API token file")
        if why is not None and "owned by" in why:
            raise ProcsiftError(f"{p}: {why}; refusing a token others control")
        if st.st_mode & 0o077:
            raise ProcsiftError(f"{p}: the API token file is readable or writable by others; chmod 600 it")
        data = read_all(fd, 4096)
    finally:
        os.close(fd)
    if data is None:
        raise ProcsiftError(f"{p}: the API token file is over 4 KiB; a token is one line")
    token = data.decode("utf-8", "replace").strip()
    if not token:
        return None
    if len(token) < MIN_TOKEN_CHARS:
        raise ProcsiftError(f"{p}: the API token has {len(token)} characters; at least {MIN_TOKEN_CHARS} characters "
                            "are needed (delete the file and procsift makes a new one)")
    if not _TOKEN.match(token):
        raise ProcsiftError(f"{p}: the API token holds characters a bearer token cannot (spaces, control "
                            "characters...); allowed: letters, digits and ._~+/=-")
    return token


def load_or_create_token(path: str | os.PathLike[str], announce: bool = True) -> str:
    """The token in `path`; a new random one (mode 0600, written atomically) if there is none.

    An existing file must be owned by root or this user, readable and writable by no one else,
    a regular file (not a symbolic link), and hold at least MIN_TOKEN_CHARS token characters.
    """
    p = Path(path)
    token = _read_token(p)
    if token:
        return token
    token = secrets.token_urlsafe(32)
    try:
        p.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        tmp = p.with_name(f".{p.name}.{os.getpid()}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(token + "\n")
        os.replace(tmp, p)
    except OSError as err:
        raise ProcsiftError(f"{p}: cannot create the API token ({err.strerror})") from err
    if announce:
        print(f"procsift: API token created in {p} (send it as 'Authorization: Bearer TOKEN')",
              file=sys.stderr)
    return token


def token_matches(header: str | None, token: str) -> bool:
    """Whether an Authorization header carries exactly this bearer token (constant time)."""
    if not header or not header.startswith("Bearer "):
        return False
    return hmac.compare_digest(header[len("Bearer "):].strip().encode(), token.encode())
