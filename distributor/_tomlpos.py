"""Find the line of a key in TOML text, so validation errors can say file:line (tomllib gives none)."""

from __future__ import annotations

import re

__all__ = ["locate"]

_HEADER = re.compile(r"^\s*(\[\[?)\s*([^\]]+?)\s*\]\]?\s*(#.*)?$")


def _split_key(dotted: str) -> tuple[str, ...]:
    parts = re.findall(r'"([^"]*)"|\'([^\']*)\'|([A-Za-z0-9_-]+)', dotted)
    return tuple(next(p for p in groups if p) for groups in parts)


def locate(text: str, table: tuple[str | int, ...], key: str | None = None) -> int | None:
    """1-based line of `key` inside `table` (a path; ints index arrays of tables), else of the table.

    Falls back to the nearest thing found (the table header, then None) so an error always
    points as close to its cause as the text allows.
    """
    names = tuple(p for p in table if isinstance(p, str))
    index = next((p for p in table if isinstance(p, int)), None)
    seen_array = -1
    in_table = table == ()
    header_line: int | None = None
    key_re = re.compile(r'^\s*["\']?' + re.escape(key) + r'["\']?\s*=') if key else None
    for lineno, line in enumerate(text.splitlines(), start=1):
        m = _HEADER.match(line)
        if m:
            path = _split_key(m.group(2))
            if m.group(1) == "[[" and path == names:
                seen_array += 1
                in_table = index is None or seen_array == index
            else:
                in_table = path == names and index is None
            if in_table and header_line is None:
                header_line = lineno
            continue
        if in_table and key_re and key_re.match(line):
            return lineno
        if key_re is None and in_table and header_line is not None:
            return header_line
    if key and len(names) >= 1 and header_line is None:
        # `[profiles]` with `background = { nice = 5 }` or dotted keys: look for the last name.
        return locate(text, table[:-1], str(names[-1])) if len(table) > 1 else None
    return header_line
