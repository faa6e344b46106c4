"""Field offsets in kernel structs, read from the kernel's own BTF (/sys/kernel/btf/vmlinux).

bcc compiles against the installed kernel headers, which may be older than the running kernel
(Debian's 6.1 headers on a 6.18 kernel here), so the BPF program must not take struct layouts
from them. BTF describes the running kernel exactly; the few offsets the program needs are read
here and handed to the compiler as -D flags. Pure parsing of the documented format
(https://docs.kernel.org/bpf/btf.html): no bcc, no bpftool.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from pathlib import Path

__all__ = ["VMLINUX", "BtfError", "member_offsets", "task_offsets"]

VMLINUX = Path("/sys/kernel/btf/vmlinux")

_MAGIC = 0xEB9F
_STRUCT, _UNION, _TYPEDEF, _VOLATILE, _CONST, _RESTRICT, _TYPE_TAG = 4, 5, 8, 9, 10, 11, 18
_QUALIFIERS = (_TYPEDEF, _VOLATILE, _CONST, _RESTRICT, _TYPE_TAG)
# Bytes that follow the 12-byte common header, per kind: fixed, and per vlen entry.
_EXTRA = {1: (4, 0), 3: (12, 0), 4: (0, 12), 5: (0, 12), 6: (0, 8), 13: (0, 8), 14: (4, 0),
          15: (0, 12), 17: (4, 0), 19: (0, 12)}

# The task_struct fields the collector reads: the kernel's own per-task CPU time, run-queue
# wait and dispatch count (what /proc/PID/schedstat shows), and the ids.
TASK_FIELDS = {
    "TASK_PID_OFF": "pid",
    "TASK_TGID_OFF": "tgid",
    "TASK_EXEC_OFF": "se.sum_exec_runtime",
    "TASK_DELAY_OFF": "sched_info.run_delay",
    "TASK_PCOUNT_OFF": "sched_info.pcount",
}


class BtfError(Exception):
    """The BTF blob is missing, malformed, or lacks a struct or field asked for."""


class _Types:
    def __init__(self, blob: bytes) -> None:
        if len(blob) < 24:
            raise BtfError("BTF blob too short")
        magic, _ver, _flags, hdr_len, type_off, type_len, str_off, str_len = struct.unpack_from("<HBBIIIII", blob)
        if magic != _MAGIC:
            raise BtfError("not a little-endian BTF blob")
        self.blob = blob
        self.strs = blob[hdr_len + str_off:hdr_len + str_off + str_len]
        start, end = hdr_len + type_off, hdr_len + type_off + type_len
        self.pos = [0]  # type id -> offset of its record; id 0 is void
        unpack, pos = struct.unpack_from, start
        while pos < end:
            self.pos.append(pos)
            info = unpack("<I", blob, pos + 4)[0]
            fixed, per = _EXTRA.get((info >> 24) & 0x1F, (0, 0))
            pos += 12 + fixed + per * (info & 0xFFFF)

    def name(self, off: int) -> str:
        return self.strs[off:self.strs.index(b"\0", off)].decode()

    def header(self, tid: int) -> tuple[int, int, int, int]:
        """(name_off, kind, vlen, size_or_type) of a type."""
        name_off, info, size = struct.unpack_from("<III", self.blob, self.pos[tid])
        return name_off, (info >> 24) & 0x1F, info & 0xFFFF, size

    def find_struct(self, name: str) -> int:
        want = self.strs.find(b"\0" + name.encode() + b"\0") + 1
        if want <= 0:
            raise BtfError(f"no struct {name} in the kernel's BTF")
        for tid in range(1, len(self.pos)):
            name_off, kind, vlen, _ = self.header(tid)
            if name_off == want and kind == _STRUCT and vlen:
                return tid
        raise BtfError(f"no struct {name} in the kernel's BTF")

    def resolve(self, tid: int) -> int:
        """Follow typedefs and qualifiers to the underlying type."""
        for _ in range(32):
            _, kind, _, target = self.header(tid)
            if kind not in _QUALIFIERS:
                return tid
            tid = target
        raise BtfError("typedef chain too long")

    def member(self, tid: int, field: str) -> tuple[int, int]:
        """(byte offset, type id) of a member, looking into anonymous structs and unions."""
        _, kind, vlen, _ = self.header(tid)
        if kind not in (_STRUCT, _UNION):
            raise BtfError(f"{field}: not inside a struct")
        kflag = struct.unpack_from("<I", self.blob, self.pos[tid] + 4)[0] >> 31
        for i in range(vlen):
            name_off, mtype, moff = struct.unpack_from("<III", self.blob, self.pos[tid] + 12 + 12 * i)
            bits = moff & 0xFFFFFF if kflag else moff
            if name_off and self.name(name_off) == field:
                return bits // 8, mtype
            if not name_off:  # anonymous member: the field may live inside it
                inner = self.resolve(mtype)
                if self.header(inner)[1] in (_STRUCT, _UNION):
                    try:
                        off, t = self.member(inner, field)
                    except BtfError:
                        continue
                    return bits // 8 + off, t
        raise BtfError(f"no field {field}")


def member_offsets(struct_name: str, paths: Sequence[str], blob: bytes) -> dict[str, int]:
    """Byte offsets of dotted member paths (e.g. 'se.sum_exec_runtime') in a struct."""
    types = _Types(blob)
    root = types.find_struct(struct_name)
    out = {}
    for path in paths:
        tid, total = root, 0
        for part in path.split("."):
            off, mtype = types.member(types.resolve(tid), part)
            total += off
            tid = mtype
        out[path] = total
    return out


def task_offsets(path: Path = VMLINUX) -> dict[str, int]:
    """-D name -> offset for the task_struct fields the BPF program reads (BtfError if unknown)."""
    try:
        blob = path.read_bytes()
    except OSError as err:
        raise BtfError(f"cannot read {path} ({err.strerror})") from err
    found = member_offsets("task_struct", list(TASK_FIELDS.values()), blob)
    return {define: found[field] for define, field in TASK_FIELDS.items()}
