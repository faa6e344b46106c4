"""Bearer tokens for the endpoints that change anything: a root-only file, made on first start."""

from __future__ import annotations

import hmac
import os
import secrets
import sys
from pathlib import Path

from procsift.collector.errors import ProcsiftError

__all__ = ["load_or_create_token", "token_matches"]


def load_or_create_token(path: str | os.PathLike[str], announce: bool = True) -> str:
    """The token in `path`; a new random one (mode 0600, written atomically) if there is none."""
    p = Path(path)
    try:
        token = p.read_text().strip()
    except FileNotFoundError:
        token = ""
    except OSError as err:
        raise ProcsiftError(f"{p}: cannot read the API token ({err.strerror})") from err
    if token:
        if p.stat().st_mode & 0o077:
            raise ProcsiftError(f"{p}: the API token file is readable by others; chmod 600 it")
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
