"""Parsing /proc (against a fake procfs root)."""

from __future__ import annotations

from pathlib import Path

from procsift.collector.proc import ProcReader, is_kernel_thread, parse_stat, read_io, task_ids, tgid_of


def _stat(pid: int, comm: str, flags: int = 0, ppid: int = 1, start: int = 4242, threads: int = 3) -> str:
    rest = ["S", str(ppid)] + ["0"] * 3 + ["-1", str(flags)] + ["0"] * 4 + ["11", "22"] + ["0"] * 4
    rest += [str(threads), "0", str(start), "1000", "25"] + ["0"] * 27
    return f"{pid} ({comm}) " + " ".join(rest) + "\n"


def _fake(root: Path, pid: int, comm: str, **kw: int) -> None:
    d = root / str(pid)
    (d / "task" / str(pid)).mkdir(parents=True)
    (d / "stat").write_text(_stat(pid, comm, **kw))
    (d / "io").write_text("rchar: 1\nwchar: 2\nread_bytes: 4096\nwrite_bytes: 8192\n")
    (d / "status").write_text(f"Name:\t{comm}\nTgid:\t{pid}\n")
    (d / "cgroup").write_text("12:cpu:/v1\n0::/user.slice/app.scope\n")


def test_parse_stat_with_awkward_comm() -> None:
    st = parse_stat(_stat(7, "a) (b c", ppid=3, start=99, threads=5))
    assert (st.comm, st.ppid, st.start_time, st.nthreads, st.utime, st.stime) == ("a) (b c", 3, 99, 5, 11, 22)


def test_reader_on_fake_procfs(tmp_path: Path) -> None:
    _fake(tmp_path, 123, "web server")
    info = ProcReader(str(tmp_path)).info(123)
    assert info is not None
    assert (info.comm, info.start_time, info.nthreads, info.cgroup) == ("web server", 4242, 3, "/user.slice/app.scope")
    assert (info.read_bytes, info.write_bytes, info.rchar, info.wchar) == (4096, 8192, 1, 2)
    assert ProcReader(str(tmp_path)).info(999) is None
    assert read_io(999, str(tmp_path)) == (0, 0, 0, 0)
    assert tgid_of(123, str(tmp_path)) == 123 and tgid_of(5, str(tmp_path)) is None
    assert task_ids(123, str(tmp_path)) == [123]


def test_kernel_thread_flag(tmp_path: Path) -> None:
    _fake(tmp_path, 2, "kthreadd", flags=0x00200040)
    _fake(tmp_path, 3, "bash", flags=0x00400000)
    assert is_kernel_thread(2, str(tmp_path)) and not is_kernel_thread(3, str(tmp_path))
