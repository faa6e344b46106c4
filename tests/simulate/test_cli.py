"""`procsift simulate`: tables, JSON, and one-line errors for bad input."""

from __future__ import annotations

import json

import pytest

from procsift.service.cli import main


def test_web_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", "web", "--users", "200", "--requests", "3000", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [r["policy"] for r in out["rows"]] == ["fifo", "fcf"]
    assert all(r["users"] == 200 for r in out["rows"])


def test_deadline_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", "deadline", "--strategy", "two-level", "--rate", "30",
                 "--duration", "600"]) == 0
    out = capsys.readouterr().out
    assert "two-level" in out and "fetches" in out


def test_deadline_fetch_mode_reaches_the_model(capsys: pytest.CaptureFixture[str]) -> None:
    runs = {}
    for mode in ("serial", "parallel", "drum", "drum-fifo"):
        assert main(["simulate", "deadline", "--strategy", "one-level", "--slice", "2", "--rate", "30",
                     "--duration", "600", "--fetch", mode, "--json"]) == 0
        runs[mode] = json.loads(capsys.readouterr().out)[0]
    # a refetch costs one fetch time instead of one per page: terminals finish sooner
    assert runs["parallel"]["mean_ratio_terminal"] < runs["serial"]["mean_ratio_terminal"]
    # a drum refetch of k pages costs 20 ms + (k - 1) x 3.9 ms (chained) or 12.6 ms (one request
    # per page): between the two
    assert runs["parallel"]["mean_ratio_terminal"] < runs["drum"]["mean_ratio_terminal"] \
        < runs["drum-fifo"]["mean_ratio_terminal"] < runs["serial"]["mean_ratio_terminal"]


@pytest.mark.parametrize("argv", [
    ["simulate", "deadline", "--fetch", "tape"],
    ["simulate", "web", "--users", "-5"],
    ["simulate", "web", "--policy", "lifo"],
    ["simulate", "deadline", "--strategy", "lottery"],
])
def test_bad_arguments_exit_nonzero(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code != 0
    assert "Traceback" not in capsys.readouterr().err


def test_bad_values_are_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", "deadline", "--duration", "10"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("procsift: error:") and err.count("\n") == 1
    assert main(["simulate", "deadline", "--strategy", "one-level", "--slice", "-1"]) == 1
