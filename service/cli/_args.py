"""Argument types every verb shares: each says what is allowed when it refuses a value, and the
parser reports a refusal as one line (no usage dump), like every other procsift error."""

from __future__ import annotations

import argparse
import math
import os
import sys
from typing import NoReturn

from procsift.collector.errors import ProcsiftError
from procsift.collector.schema import PID_MAX, WINDOW_RANGE_S, printable

__all__ = ["Parser", "window_seconds", "seconds", "pid", "port", "positive_int", "nonneg_int", "fraction",
           "existing_pids"]


class Parser(argparse.ArgumentParser):
    """argparse with one-line errors: "procsift: error: ... (see 'procsift VERB --help')", exit 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"procsift: error: {printable(message)} (see '{self.prog} --help')\n")


def _number(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None


def window_seconds(text: str) -> float:
    """A window length: WINDOW_RANGE_S (10 ms to an hour)."""
    v, (lo, hi) = _number(text), WINDOW_RANGE_S
    if not (math.isfinite(v) and lo <= v <= hi):
        raise argparse.ArgumentTypeError(f"must be > 0 seconds: {lo:g} to {hi:g}, not {text}")
    return v


def seconds(text: str) -> float:
    """A duration: a finite number of seconds > 0."""
    v = _number(text)
    if not (math.isfinite(v) and v > 0):
        raise argparse.ArgumentTypeError(f"must be a number of seconds > 0, not {text}")
    return v


def fraction(text: str) -> float:
    """A share in (0, 1]."""
    v = _number(text)
    if not 0 < v <= 1:
        raise argparse.ArgumentTypeError(f"must be > 0 and at most 1, not {text}")
    return v


def _int(text: str, lo: int, hi: int, what: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if not lo <= v <= hi:
        raise argparse.ArgumentTypeError(f"{what} must be {lo} to {hi}, not {text}")
    return v


def pid(text: str) -> int:
    """A process id: 1 to PID_MAX."""
    return _int(text, 1, PID_MAX, "a PID")


def port(text: str) -> int:
    """A TCP port: 1 to 65535."""
    return _int(text, 1, 65535, "a port")


def positive_int(text: str) -> int:
    """A count of at least 1."""
    return _int(text, 1, sys.maxsize, "a count")


def nonneg_int(text: str) -> int:
    """A count of 0 or more."""
    return _int(text, 0, sys.maxsize, "a count")


def existing_pids(pids: list[int] | None, flag: str = "-p") -> None:
    """Refuse PIDs that name no process now (recording or managing nothing is surely a typo)."""
    for p in pids or ():
        if not os.path.exists(f"/proc/{p}"):
            raise ProcsiftError(f"{flag} {p}: no process {p} is running")
