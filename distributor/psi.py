"""Pressure-stall information: pure parsing of /proc/pressure/{cpu,io} and one reader."""

from __future__ import annotations

from pathlib import Path

from procsift.distributor.views import Psi

__all__ = ["parse_psi", "read_psi", "PSI_ROOT"]

PSI_ROOT = Path("/proc/pressure")


def parse_psi(text: str) -> Psi:
    """Parse the text of a /proc/pressure file ("some avg10=… total=…" and optional "full …")."""
    rows: dict[str, dict[str, str]] = {}
    for line in text.splitlines():
        parts = line.split()
        if not parts:
            continue
        if parts[0] not in ("some", "full"):
            raise ValueError(f"unexpected PSI line {line!r}")
        rows[parts[0]] = dict(p.split("=", 1) for p in parts[1:])
    if "some" not in rows:
        raise ValueError("PSI text has no 'some' line")
    some, full = rows["some"], rows.get("full")
    return Psi(
        some_avg10=float(some["avg10"]), some_avg60=float(some["avg60"]),
        some_avg300=float(some["avg300"]), some_total_us=int(some["total"]),
        full_avg10=float(full["avg10"]) if full else None,
        full_avg60=float(full["avg60"]) if full else None,
        full_avg300=float(full["avg300"]) if full else None,
        full_total_us=int(full["total"]) if full else None,
    )


def read_psi(resource: str = "cpu", root: Path = PSI_ROOT) -> Psi | None:
    """Read /proc/pressure/<resource> ("cpu", "io", "memory"); None where PSI is off or absent."""
    try:
        return parse_psi((root / resource).read_text())
    except (FileNotFoundError, PermissionError, OSError):
        # CONFIG_PSI=n, or psi=0 on the command line: the file is missing or reads EOPNOTSUPP.
        return None
