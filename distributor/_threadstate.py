"""One thread's placement as plain data ({nice, affinity, io, policy, slice}) read from and written to the kernel."""

from __future__ import annotations

from typing import Any

from procsift.distributor import _sys

__all__ = ["FIELDS", "read_thread", "write_thread", "same", "is_fair"]

FIELDS = ("nice", "affinity", "io", "policy", "slice")
_SCHED_FIELDS = ("nice", "policy", "slice")  # set together by sched_setattr; never on realtime threads
ThreadState = dict[str, Any]


def is_fair(policy: int) -> bool:
    """SCHED_OTHER / BATCH / IDLE; realtime and deadline threads are never re-prioritised."""
    return policy in _sys.POLICY_NAME


def read_thread(tid: int, default_slice: int | None) -> ThreadState:
    """The thread's values now. slice is the EEVDF slice in ns (None where unsupported or not fair).

    The kernel reports the slice in use whether or not it is custom, so the default value
    stands for "no custom slice"; write_thread turns it back into 0 (which clears custom_slice).
    """
    policy, nice, runtime = _sys.sched_getattr(tid)
    slice_ns = int(runtime) if default_slice is not None and is_fair(policy) and runtime else None
    io_class, level = _sys.ioprio_get(tid)
    return {"nice": nice, "affinity": list(_sys.get_affinity(tid)), "io": [io_class, level],
            "policy": policy, "slice": slice_ns}


def same(field: str, a: Any, b: Any) -> bool:
    """Compare one field as the kernel means it (affinity is a set; io of class none ignores level)."""
    if field == "affinity":
        return sorted(a or []) == sorted(b or [])
    if field == "io":
        return list(a)[0] == list(b)[0] and (list(a)[0] in ("none", "idle") or list(a)[1] == list(b)[1])
    return bool(a == b)


def write_thread(tid: int, want: ThreadState, cur: ThreadState, default_slice: int | None) -> list[str]:
    """Write the fields in `want` to one thread; returns the fields written.

    sched_setattr sets policy, nice and slice together (and sched_setscheduler would reset a
    custom slice), so a change of policy or slice goes through one sched_setattr call.
    """
    done: list[str] = []
    if "policy" in want or "slice" in want:
        policy = want.get("policy", cur["policy"])
        nice = want.get("nice", cur["nice"])
        slice_ns = want["slice"] if "slice" in want else cur["slice"]
        if default_slice is not None:
            _sys.sched_setattr(tid, policy, nice, 0 if slice_ns in (None, default_slice) else slice_ns)
        else:  # no custom slice here: sched_setscheduler keeps nice, then setpriority sets it
            _sys.set_policy(tid, policy)
            _sys.set_nice(tid, nice)
        done += [f for f in ("policy", "nice", "slice") if f in want]
    elif "nice" in want:
        _sys.set_nice(tid, want["nice"])
        done.append("nice")
    if "affinity" in want:
        _sys.set_affinity(tid, tuple(want["affinity"]))
        done.append("affinity")
    if "io" in want:
        io_class, level = want["io"]
        _sys.ioprio_set(tid, io_class, level)
        done.append("io")
    return done
