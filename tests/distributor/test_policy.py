"""Policy files: the bundled default loads, every kind parses, and every mistake names its line."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from procsift.distributor import PolicyError, load_policy, parse_policy
from procsift.service.cli import main

BASE = """\
[policy]
kind = "{kind}"

[profiles.fast]
nice = -3
slice_us = 1000

[profiles.slow]
nice = 10
io_class = "idle"
sched_policy = "batch"
cpu_idle = true

[labels]
interactive = "fast"
html-serving = "fast"
background = "slow"
"""


def policy_text(kind: str = "fair-share", extra: str = "") -> str:
    return BASE.format(kind=kind) + textwrap.dedent(extra)


def error_of(text: str) -> PolicyError:
    with pytest.raises(PolicyError) as info:
        parse_policy(text, "p.toml")
    return info.value


def line_of(text: str, needle: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), 1) if needle in line)


def test_bundled_default_loads_and_makes_background_yield() -> None:
    p = load_policy()
    bg = p.profile_for("background")
    assert bg is not None and bg.cpu_idle and bg.io_class == "idle" and bg.nice == 10
    assert set(p.labels) == {"interactive", "html-serving", "background"}


@pytest.mark.parametrize("kind,extra", [
    ("fair-share", ""),
    ("partition", "[partition]\nreserved_groups = ['html-serving']\nreserved_cpus = 1\n"),
    ("html-first", "[html-first]\ncpu_boost = 'fast'\nio_boost = 'fast'\n"),
    ("deadline", "[deadline]\nceiling = 4\nnice_by_urgency = [0, -5, -10]\n"
                 "[deadline.target_ms]\ninteractive = 10\n"),
])
def test_each_kind_parses(kind: str, extra: str) -> None:
    p = parse_policy(policy_text(kind, extra))
    assert p.kind == kind
    assert p.profiles["slow"].io_level == 0 and p.profiles["fast"].slice_us == 1000


@pytest.mark.parametrize("bad,needle,allowed", [
    ("nice_x = 2", "nice_x", "allowed: cpus, nice"),
    ('io_class = "fast"', "io_class", "allowed: realtime, best-effort, idle"),
    ('sched_policy = "fifo"', "sched_policy", "allowed: other, batch, idle"),
    ("slice_us = 5", "slice_us", "allowed: an integer 100 to 100000"),
    ('cpus = "0-"', "cpus", 'allowed: "all" or a CPU list'),
    ("colour = 3", "colour", "allowed: cpus, nice"),
    ("io_level = 9", "io_level", "allowed: an integer 0 to 7"),
    ("cpu_idle = 1", "cpu_idle", "allowed: true, false"),
])
def test_bad_profile_value_names_its_line_and_what_is_allowed(bad: str, needle: str, allowed: str) -> None:
    text = policy_text() + f"\n[profiles.extra]\nnice = 1\n{bad}\n"
    err = error_of(text)
    assert str(err).startswith(f"p.toml:{line_of(text, bad)}: ")
    assert allowed in str(err)


def test_label_to_missing_profile() -> None:
    text = policy_text().replace('background = "slow"', 'background = "slwo"')
    err = error_of(text)
    assert err.line == line_of(text, "slwo") and "allowed: fast, slow" in str(err)


def test_unknown_label() -> None:
    text = policy_text().replace('background = "slow"', 'batchy = "slow"')
    assert error_of(text).line == line_of(text, "batchy")


def test_toml_syntax_error_has_line() -> None:
    text = policy_text().replace("nice = -3", "nice = = -3")
    err = error_of(text)
    assert err.line == line_of(text, "nice = = -3") and "not valid TOML" in str(err)


def test_second_exception_error_points_at_its_own_line() -> None:
    text = policy_text(extra="""
        [[exceptions]]
        comm = "sshd"

        [[exceptions]]
        comm = "cron"
        pid = 3
        """)
    err = error_of(text)
    assert err.line == line_of(text, "pid = 3") and "allowed: comm, exe, cgroup, uid" in str(err)


def test_missing_kind_and_unknown_kind() -> None:
    assert "allowed: fair-share, partition, html-first, deadline" in str(error_of(policy_text("rr")))
    text = policy_text().replace('kind = "fair-share"\n', "")
    assert error_of(text).line == 1


def test_html_first_boost_must_be_a_profile() -> None:
    text = policy_text("html-first", "[html-first]\ncpu_boost = 'fast'\nio_boost = 'turbo'\n")
    err = error_of(text)
    assert err.line == line_of(text, "turbo") and "allowed: fast, slow" in str(err)


def test_html_first_off_above_on_refused() -> None:
    text = policy_text("html-first", "[html-first]\ncpu_boost='fast'\nio_boost='fast'\ncpu_on=5\ncpu_off=9\n")
    assert error_of(text).line == line_of(text, "cpu_off=9")


def test_deadline_urgency_table_must_match_ceiling() -> None:
    text = policy_text("deadline", "[deadline]\nnice_by_urgency = [0, -1]\n[deadline.target_ms]\n"
                       "interactive = 10\n")
    err = error_of(text)
    assert err.line == line_of(text, "nice_by_urgency") and "4 integers" in str(err)


def test_load_policy_missing_file(tmp_path: Path) -> None:
    with pytest.raises(PolicyError, match="no such policy file"):
        load_policy(tmp_path / "nope.toml")


def test_check_policy_cli_one_line_and_exit_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "p.toml"
    f.write_text(policy_text().replace("nice = 10", "nice = 99"))
    assert main(["check-policy", str(f)]) == 1
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and err.startswith(f"procsift: error: {f}:9: nice = 99")
    assert main(["check-policy"]) == 0


def test_line_of_a_nested_table_key_and_of_an_inline_table() -> None:
    text = policy_text("deadline", "[deadline]\nceiling = 8\n[deadline.target_ms]\ninteractive = 10\n"
                       "background = -1\n")
    assert error_of(text).line == line_of(text, "background = -1")
    inline = textwrap.dedent("""\
        [policy]
        kind = "fair-share"

        [profiles]
        fast = { nice = -3 }
        slow = { nice = 99 }

        [labels]
        background = "slow"
        """)
    err = error_of(inline)
    assert err.line == 6 and "nice = 99" in str(err)
