"""The journal: atomic, locked, and refusing what it cannot read with one clear line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from procsift.distributor import JournalError
from procsift.distributor.journal import Journal, atomic_write, default_journal_path


def test_save_is_atomic_and_leaves_no_temp_files(tmp_path: Path) -> None:
    j = Journal(tmp_path / "j.json").open()
    j.processes["5:7"] = {"pid": 5}
    j.save()
    j.close()
    assert json.loads((tmp_path / "j.json").read_text())["processes"] == {"5:7": {"pid": 5}}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["j.json", "j.json.lock"]
    atomic_write(tmp_path / "j.json", b"{}")
    assert (tmp_path / "j.json").read_bytes() == b"{}"


def test_second_owner_is_refused(tmp_path: Path) -> None:
    with Journal(tmp_path / "j.json"):
        with pytest.raises(JournalError, match="in use by another procsift"):
            Journal(tmp_path / "j.json").open()
    Journal(tmp_path / "j.json").open().close()  # free again once the first closed


def test_corrupt_journal_is_one_clear_error(tmp_path: Path) -> None:
    (tmp_path / "j.json").write_text("{not json")
    with pytest.raises(JournalError, match="not a procsift journal"):
        Journal(tmp_path / "j.json").open()


def test_state_dir_env_overrides(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PROCSIFT_STATE_DIR", str(tmp_path))
    assert default_journal_path() == tmp_path / "journal.json"


def test_restore_while_another_procsift_holds_the_journal_is_one_line(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    from procsift.service.cli import main
    with Journal(tmp_path / "j.json") as j:
        j.save()
        assert main(["restore", "--journal", str(tmp_path / "j.json")]) == 1
    err = capsys.readouterr().err.strip()
    assert err == f"procsift: error: {tmp_path / 'j.json'}: in use by another procsift (its lock is held)"
    assert main(["restore", "--journal", str(tmp_path / "j.json")]) == 0
    assert capsys.readouterr().out.startswith("restored 0 process(es)")
    assert main(["restore", "--journal", str(tmp_path / "none" / "j.json")]) == 0
    assert capsys.readouterr().out.startswith("nothing to restore") and not (tmp_path / "none").exists()


def test_log_lines_are_key_value() -> None:
    from procsift.distributor._log import kv
    assert kv("set", pid=5, field="nice", old=0, new=10, rule="html-first: background -> x", cpus=(0, 1)) == \
        'event=set pid=5 field=nice old=0 new=10 rule="html-first: background -> x" cpus=0,1'
