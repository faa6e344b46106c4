"""The running daemon, read (/v1/processes, /v1/groups, /v1/plan) and steered (/v1/pause ...)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, HTTPException, Path, status

from procsift.service.api.deps import Authorized, LiveDep, SettingsDep
from procsift.service.api.live_schemas import Groups, History, PlanView, ProcessDetail, ProcessList
from procsift.service.api.schemas import CommandResult
from procsift.service.live import CommandTimeout, LiveLink

__all__ = ["router"]

router = APIRouter(prefix="/v1", tags=["live"])
_503: dict[int | str, dict[str, Any]] = {503: {"description": "no daemon attached, or no window closed yet"}}


def _snapshot(live: LiveLink) -> dict[str, Any]:
    snap = live.snapshot()
    if snap is None:
        raise HTTPException(status.HTTP_503_SERVICE_UNAVAILABLE, "the daemon has not closed its first window yet")
    return snap


def _row(p: dict[str, Any]) -> dict[str, Any]:
    last = (p.get("windows") or [None])[-1] or {}
    return {"pid": p["pid"], "start_time": p["start_time"], "comm": p["comm"], "label": p["label"],
            "probability": p["probability"], "profile": (p.get("action") or {}).get("profile"),
            "placement": p.get("action"), "rule": p["rule"],
            "last_window": {k: last.get(k) for k in ("run_ms", "runq_ms", "max_wait_ms", "syscalls",
                                                    "top_syscalls", "run_wait_transitions")}}


@router.get("/processes", response_model=ProcessList, responses=_503)
def processes(live: LiveDep) -> dict[str, Any]:
    """Every tracked process: label, group, placement, the last window's key figures."""
    snap = _snapshot(live)
    rows = sorted((_row(p) for p in snap["processes"].values()), key=lambda r: (r["label"] or "", r["pid"]))
    return {"windows": snap["windows"], "t": snap["t"], "paused": snap["paused"], "processes": rows}


@router.get("/processes/{pid}", response_model=ProcessDetail, responses={**_503, 404: {"description": "not tracked"}})
def process(live: LiveDep, pid: int = Path(ge=1, le=2**22)) -> dict[str, Any]:
    """Why a process is placed as it is: its recent windows, label, probability, rule and action."""
    snap = _snapshot(live)
    p = snap["processes"].get(str(pid))
    if p is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"PID {pid} is not tracked (idle, exempt, or gone)")
    return p


@router.get("/groups", response_model=Groups, responses=_503)
def groups(live: LiveDep) -> dict[str, Any]:
    """Per label: processes, profiles applied and the CPUs the group may use."""
    snap = _snapshot(live)
    return {"policy": snap["policy"], "paused": snap["paused"], "groups": snap["groups"]}


@router.get("/plan", response_model=PlanView, responses=_503)
def plan(live: LiveDep) -> dict[str, Any]:
    """The last window's plan: actions and the processes deliberately left alone."""
    snap = _snapshot(live)
    return {"policy": snap["policy"], "dry_run": snap["dry_run"], "paused": snap["paused"],
            "actions": snap["plan"], "skipped": snap["skipped"], "label_changes": snap["label_changes"]}


@router.get("/history", response_model=History, responses=_503)
def history(live: LiveDep) -> dict[str, Any]:
    """The last 10 minutes, one point per window: processes, CPU share and run-queue delay per
    label, PSI cpu/io, changes applied; and each process's label changes (the dashboard's charts)."""
    return _snapshot(live)["history"]  # type: ignore[no-any-return]


_AUTH: dict[int | str, dict[str, Any]] = {401: {"description": "missing or wrong bearer token"}, 504: {"description": "daemon did not answer"}}
_CONTROL = {
    "pause": "Put every changed value back and change nothing until resume (labels go on).",
    "resume": "Apply the plan again from the next window.",
    "reload": "Re-read policy and model (validated first; the running ones stay on error).",
    "restore": "Put every changed value back now; stays paused until resume.",
}


def _control(name: str):  # type: ignore[no-untyped-def]
    def endpoint(live: LiveDep, settings: SettingsDep) -> CommandResult:
        try:
            result = live.submit(name, settings.command_timeout_s)
        except CommandTimeout as err:
            raise HTTPException(status.HTTP_504_GATEWAY_TIMEOUT, str(err)) from err
        if not result.get("ok", True):  # a refused reload: the daemon runs on with what it had
            raise HTTPException(422,
                                f"{result.get('error')} (the running policy and model are kept)")
        return CommandResult(command=name, **result)  # type: ignore[arg-type]
    endpoint.__name__, endpoint.__doc__ = name, _CONTROL[name]
    return endpoint


_REFUSED: dict[int | str, dict[str, Any]] = {
    422: {"description": "the policy or model on disk is invalid; the running ones are kept"}}
for _name in _CONTROL:  # the daemon loop carries each out between windows (service/live.py)
    router.add_api_route(f"/{_name}", _control(_name), methods=["POST"], response_model=CommandResult,
                         dependencies=[Authorized],
                         responses={**_AUTH, **_503, **(_REFUSED if _name == "reload" else {})})
