"""Struct offsets from BTF: a hand-built blob (the format's rules), and the running kernel's."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from procsift.collector._btf import VMLINUX, BtfError, member_offsets, task_offsets


def _blob(types: list[tuple[str, int, int, int, list[tuple[str, int, int]]]]) -> bytes:
    """BTF with (name, kind, vlen-ignored, size_or_type, members[(name, type, bit offset)])."""
    strs = bytearray(b"\0")

    def name(s: str) -> int:
        if not s:
            return 0
        off = len(strs)
        strs.extend(s.encode() + b"\0")
        return off

    body = bytearray()
    for tname, kind, _, size, members in types:
        body += struct.pack("<III", name(tname), (kind << 24) | len(members), size)
        if kind == 1:  # INT: encoding word
            body += struct.pack("<I", 64)
        for mname, mtype, bits in members:
            body += struct.pack("<III", name(mname), mtype, bits)
    header = struct.pack("<HBBIIIII", 0xEB9F, 1, 0, 24, 0, len(body), len(body), len(strs))
    return header + bytes(body) + bytes(strs)


BLOB = _blob([
    ("long", 1, 0, 8, []),                                            # 1
    ("inner", 4, 0, 16, [("a", 1, 0), ("b", 1, 64)]),                 # 2
    ("", 5, 0, 8, [("hidden", 1, 0)]),                                # 3: anonymous union
    ("inner_t", 8, 0, 2, []),                                         # 4: typedef -> inner
    ("task_struct", 4, 0, 64, [("x", 1, 0), ("in", 4, 128), ("", 3, 256)]),  # 5
])


def test_offsets_follow_nesting_typedefs_and_anonymous_members() -> None:
    assert member_offsets("task_struct", ["x", "in.b", "hidden"], BLOB) == {"x": 0, "in.b": 24, "hidden": 32}


@pytest.mark.parametrize("path, what", [("nope", "no field nope"), ("x.y", "not inside a struct")])
def test_a_missing_field_is_a_clear_error(path: str, what: str) -> None:
    with pytest.raises(BtfError, match=what):
        member_offsets("task_struct", [path], BLOB)


def test_a_missing_struct_or_a_foreign_blob_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(BtfError, match="no struct mm_struct"):
        member_offsets("mm_struct", ["x"], BLOB)
    with pytest.raises(BtfError, match="not a little-endian BTF blob"):
        member_offsets("task_struct", ["x"], b"\0" * 64)
    with pytest.raises(BtfError, match="cannot read"):
        task_offsets(tmp_path / "absent")


@pytest.mark.skipif(not VMLINUX.exists(), reason="this kernel exposes no BTF")
def test_the_running_kernels_task_struct() -> None:
    off = task_offsets()
    # tgid follows pid (both pid_t); pcount and run_delay are sched_info's first two fields.
    assert off["TASK_TGID_OFF"] == off["TASK_PID_OFF"] + 4
    assert off["TASK_DELAY_OFF"] == off["TASK_PCOUNT_OFF"] + 8
    assert 0 < off["TASK_EXEC_OFF"] < off["TASK_PID_OFF"]
