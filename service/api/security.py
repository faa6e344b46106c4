"""Answer only requests addressed to this server (a Host check, against DNS rebinding), and put
the browser security headers on every response, whichever part of the app (or a middleware) made it.

A web page on evil.example can make the user's browser talk to 127.0.0.1:8765 by rebinding its own
name to that address; the browser then sends `Host: evil.example` and lets the page read the answers.
Only the listening address, the localhost names and names the settings list are answered (421 else).
"""

from __future__ import annotations

import ipaddress
import json
import socket
from collections.abc import Iterable
from typing import Any

__all__ = ["HostGuard", "SECURITY_HEADERS", "host_allowed"]

# The dashboard is one HTML page, one script and one style sheet from /static: nothing inline,
# nothing from elsewhere, and it fetches only this origin.
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
       "base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
SECURITY_HEADERS: tuple[tuple[bytes, bytes], ...] = (
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"no-referrer"),
    (b"cross-origin-resource-policy", b"same-origin"),
    (b"cross-origin-opener-policy", b"same-origin"),
)
_WILDCARD = {"", "0.0.0.0", "::", "[::]"}


def _split_host(value: str) -> str | None:
    """The name or address part of a Host header (no port), lower case; None if malformed."""
    value = value.strip()
    if value.startswith("["):
        end = value.find("]")
        if end < 0 or (value[end + 1:] and not value[end + 1:].startswith(":")):
            return None
        return value[1:end].lower()
    name, _, port = value.partition(":") if value.count(":") == 1 else (value, "", "")
    if port and not port.isdigit():
        return None
    return name.lower().rstrip(".")


def host_allowed(header: str | None, listen: str, extra: Iterable[str] = (), machine: Iterable[str] = ()) -> bool:
    """Whether a request whose Host is `header` is addressed to a server listening on `listen`.

    Allowed: localhost and *.localhost; the listening address itself; names in `extra`; when
    listening on every address, any IP literal (a rebinding page cannot send one: it needs a
    name) and this machine's own names (`machine`).
    """
    if not header or len(header) > 255:
        return False
    name = _split_host(header)
    if not name:
        return False
    if name == "localhost" or name.endswith(".localhost") or name in {e.lower().rstrip(".") for e in extra}:
        return True
    wildcard = listen.strip().lower() in _WILDCARD
    try:
        ip = ipaddress.ip_address(name)
    except ValueError:
        ip = None
    if ip is not None:
        if ip.is_loopback or wildcard:
            return True
        try:
            return ip == ipaddress.ip_address(listen.strip("[]"))
        except ValueError:
            return False
    if wildcard:
        return name in {m.lower().rstrip(".") for m in machine}
    return name == listen.strip().lower().rstrip(".")


class HostGuard:
    """Pure ASGI middleware: 400/421 for a request not addressed to this server; security headers always."""

    def __init__(self, app: Any, listen: str, extra: Iterable[str] = ()) -> None:
        self.app, self.listen, self.extra = app, listen, tuple(extra)
        self.machine = (socket.gethostname(), socket.getfqdn()) if listen.strip().lower() in _WILDCARD else ()

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def with_headers(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                have = {k.lower() for k, _ in message.get("headers", [])}
                message = {**message, "headers": [*message.get("headers", []),
                                                  *(h for h in SECURITY_HEADERS if h[0] not in have)]}
            await send(message)

        hosts = [v for k, v in scope.get("headers") or [] if k == b"host"]
        host = hosts[0].decode("latin-1") if len(hosts) == 1 else ""
        if host_allowed(host, self.listen, self.extra, self.machine):
            await self.app(scope, receive, with_headers)
            return
        status = 400 if not hosts or len(hosts) > 1 else 421
        why = ("a request needs exactly one Host header" if status == 400 else
               f"this procsift answers only requests addressed to it ({self.listen} or localhost), not to "
               f"{host[:64]!r} (DNS rebinding guard; add names with PROCSIFT_ALLOWED_HOSTS)")
        body = json.dumps({"detail": why}).encode()
        await with_headers({"type": "http.response.start", "status": status,
                            "headers": [(b"content-type", b"application/json"),
                                        (b"content-length", str(len(body)).encode())]})
        await with_headers({"type": "http.response.body", "body": body})
