"""PSI parsing (pure) and reading."""

from __future__ import annotations

from pathlib import Path

import pytest

from procsift.distributor import parse_psi, read_psi

CPU = "some avg10=12.50 avg60=3.10 avg300=0.90 total=6924789\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"


def test_parse_some_and_full() -> None:
    p = parse_psi(CPU)
    assert (p.some_avg10, p.some_avg60, p.some_avg300, p.some_total_us) == (12.5, 3.1, 0.9, 6924789)
    assert p.full_avg10 == 0.0 and p.full_total_us == 0


def test_parse_cpu_without_full_line_older_kernels() -> None:
    p = parse_psi(CPU.splitlines()[0])
    assert p.some_avg10 == 12.5 and p.full_avg10 is None


def test_parse_garbage_raises() -> None:
    with pytest.raises(ValueError):
        parse_psi("hello world")


def test_read_psi_absent_is_none(tmp_path: Path) -> None:
    assert read_psi("cpu", tmp_path) is None
    (tmp_path / "io").write_text(CPU)
    assert read_psi("io", tmp_path) == parse_psi(CPU)


def test_read_psi_here() -> None:
    if not Path("/proc/pressure/cpu").exists():
        pytest.skip("no PSI on this kernel")
    p = read_psi("cpu")
    assert p is not None and 0 <= p.some_avg10 <= 100
