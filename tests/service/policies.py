"""Policy text for the service tests: every label to one profile, html-first never boosting."""

from __future__ import annotations


def one_profile_policy(nice: int, io_class: str | None = None) -> str:
    """A policy that gives every label the profile `p` (nice, optional I/O class), backend none,
    and PSI thresholds no machine reaches (so html-first never switches to a boost)."""
    io = f'io_class = "{io_class}"\n' if io_class else ""
    return f"""
[policy]
kind = "html-first"
backend = "none"
min_probability = 0.0

[profiles.p]
nice = {nice}
{io}
[labels]
interactive = "p"
html-serving = "p"
background = "p"

[html-first]
cpu_on = 100.0
cpu_off = 99.0
io_on = 100.0
io_off = 99.0
cpu_boost = "p"
io_boost = "p"
"""
