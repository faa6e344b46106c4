"""Structured logging of every change: one `key=value` line per event on the procsift.distributor logger."""

from __future__ import annotations

import logging

from procsift.collector.schema import printable

__all__ = ["log_event", "kv", "LOGGER"]

LOGGER = logging.getLogger("procsift.distributor")


def _fmt(v: object) -> str:
    s = printable(",".join(map(str, v)) if isinstance(v, (tuple, list)) else v)  # one line, whatever a comm holds
    return f'"{s}"' if (not s or any(c in s for c in ' "=')) else s


def kv(event: str, **fields: object) -> str:
    """event=… k=v …, values with spaces quoted: greppable and machine-parseable."""
    return " ".join([f"event={event}"] + [f"{k}={_fmt(v)}" for k, v in fields.items() if v is not None])


def log_event(event: str, level: int = logging.INFO, **fields: object) -> None:
    """Log one event; the structured fields also ride along in `record.procsift` for JSON handlers."""
    LOGGER.log(level, kv(event, **fields), extra={"procsift": {"event": event, **fields}})
