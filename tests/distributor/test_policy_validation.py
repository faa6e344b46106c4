"""Policy values of the wrong type, CPUs this machine lacks and ranges that would eat memory are
refused at load with file:line, before a daemon could take them."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from procsift.distributor import PolicyError, load_policy, parse_policy
from procsift.service.cli import main

from .test_policy import error_of, line_of, policy_text


@pytest.mark.parametrize("value", ["[1, {}]", "5", "true", "{ a = 1 }", '["fast"]'])
def test_a_label_mapped_to_anything_but_a_profile_name_names_its_line(value: str) -> None:
    text = policy_text().replace('html-serving = "fast"', f'"html-serving" = {value}')
    err = error_of(text)
    assert err.line == line_of(text, '"html-serving" =') and "allowed: a profile name (fast, slow)" in str(err)


def test_cpus_that_do_not_exist_here_are_refused() -> None:
    text = policy_text() + '\n[profiles.pinned]\ncpus = "0-999"\n'
    err = parse_policy_on(text, online=(0, 1))
    assert err.line == line_of(text, '"0-999"')
    assert "CPUs 2-999 do not exist on this machine; allowed: 0-1" in str(err)
    assert parse_policy(text.replace('"0-999"', '"1"'), "p.toml", online=(0, 1)).profiles["pinned"].cpus == (1,)


def parse_policy_on(text: str, online: tuple[int, ...]) -> PolicyError:
    with pytest.raises(PolicyError) as info:
        parse_policy(text, "p.toml", online=online)
    return info.value


@pytest.mark.parametrize("cpus", ['"0-4000000000"', '"0-99999999,5"', '"18446744073709551615"'])
def test_a_huge_cpu_range_is_refused_at_once(cpus: str) -> None:
    text = policy_text() + f"\n[profiles.pinned]\ncpus = {cpus}\n"
    t0 = time.perf_counter()
    err = error_of(text)
    assert time.perf_counter() - t0 < 0.5
    assert err.line == line_of(text, cpus) and "CPU numbers 0 to 8191" in str(err)


def test_load_policy_checks_cpus_against_this_machine(tmp_path: Path) -> None:
    n = len(os.sched_getaffinity(0))
    f = tmp_path / "p.toml"
    f.write_text(policy_text() + '\n[profiles.pinned]\ncpus = "0-8000"\n')
    with pytest.raises(PolicyError, match="do not exist on this machine"):
        load_policy(f)
    assert n >= 1


def test_html_first_group_must_be_a_label() -> None:
    text = policy_text("html-first", "[html-first]\ncpu_boost = 'fast'\nio_boost = 'fast'\ngroup = 'nginx-ish'\n")
    err = error_of(text)
    assert err.line == line_of(text, "nginx-ish") and "allowed: interactive, background, html-serving" in str(err)


def test_partition_cannot_reserve_more_cpus_than_exist() -> None:
    text = policy_text("partition", "[partition]\nreserved_cpus = 64\n")
    err = parse_policy_on(text, online=(0, 1))
    assert err.line == line_of(text, "reserved_cpus") and "this machine has 2" in str(err)


@pytest.mark.parametrize("text", ["a = " + "[" * 5000 + "]" * 5000, "x" * 10])
def test_deeply_nested_or_garbage_toml_is_one_error(text: str) -> None:
    assert isinstance(error_of(text), PolicyError)


def test_an_exception_pattern_has_a_bounded_length() -> None:
    text = policy_text(extra=f"\n[[exceptions]]\ncomm = \"{'a' * 5000}\"\n")
    err = error_of(text)
    assert "at most" in str(err)


def test_a_policy_that_is_not_a_regular_file_or_too_big_is_refused(tmp_path: Path) -> None:
    with pytest.raises(PolicyError, match="not a regular file"):
        load_policy("/dev/zero")
    big = tmp_path / "big.toml"
    big.write_text(policy_text() + "#" * (2 << 20))
    with pytest.raises(PolicyError, match="over 1 MiB"):
        load_policy(big)


def test_check_policy_on_a_huge_range_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "p.toml"
    f.write_text(policy_text() + '\n[profiles.pinned]\ncpus = "0-999999999"\n')
    assert main(["check-policy", str(f)]) == 1
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and err.startswith(f"procsift: error: {f}:")
