"""GET /v1/model, /healthz and /metrics."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import PlainTextResponse

from procsift.models import public_metadata
from procsift.service.api.deps import BundleDep, OptionalLiveDep
from procsift.service.api.schemas import Health, ModelInfo

__all__ = ["router"]

router = APIRouter(tags=["service"])


@router.get("/v1/model", response_model=ModelInfo)
def model(bundle: BundleDep) -> ModelInfo:
    """The served bundle's metadata: features, labels, window, versions, training hash, scores
    (no file-system paths or training file names: anyone who reaches the API can read it)."""
    return ModelInfo(kind=bundle.kind, labels=list(bundle.labels), window_s=bundle.window_s,
                     metadata=public_metadata(bundle.metadata))


@router.get("/healthz", response_model=Health)
def healthz(bundle: BundleDep, live: OptionalLiveDep) -> Health:
    """Liveness; `live` says whether a daemon is attached, `windows` how many it has closed."""
    snap = live.snapshot() if live is not None else None
    return Health(status="ok", model=bundle.kind, live=live is not None,
                  windows=None if snap is None else int(snap.get("windows", 0)))


@router.get("/metrics", response_class=PlainTextResponse)
def metrics(request: Request) -> PlainTextResponse:
    """Prometheus text format: windows, predictions, changes, restores, back-offs, drops, loop time."""
    return PlainTextResponse(request.app.state.metrics.render(), media_type="text/plain; version=0.0.4")
