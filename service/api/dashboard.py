"""GET /: the live dashboard page (static HTML + JS served from the package; no CDN)."""

from __future__ import annotations

from importlib import resources

from fastapi import APIRouter
from fastapi.responses import HTMLResponse

__all__ = ["router"]

router = APIRouter(tags=["dashboard"])


@router.get("/", response_class=HTMLResponse, include_in_schema=False)
def index() -> HTMLResponse:
    """The dashboard; it polls /v1/processes, /v1/groups, /v1/plan and /metrics itself."""
    return HTMLResponse((resources.files("procsift.service.api") / "static" / "index.html").read_text())
