"""create_app(): the FastAPI application, its lifespan (loads the model) and error mapping."""

from __future__ import annotations

import gc
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from importlib import resources

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.staticfiles import StaticFiles

from procsift.collector.errors import ProcsiftError
from procsift.models import Bundle, load_bundle
from procsift.service.api import dashboard, info, live, predict
from procsift.service.api.auth import load_or_create_token
from procsift.service.api.limits import BodyLimit
from procsift.service.api.rows import document_rows
from procsift.service.api.security import HostGuard
from procsift.service.api.settings import Settings
from procsift.service.live import LiveLink, Metrics

__all__ = ["create_app"]


def create_app(settings: Settings | None = None, bundle: Callable[[], Bundle] | None = None,
               live_link: LiveLink | None = None, token: str | None = None) -> FastAPI:
    """The API. Alone (`procsift serve`) it loads `settings.model` at start-up; inside the daemon it
    is given the daemon's bundle getter and live link. `token` overrides the token file (tests)."""
    settings = settings or Settings()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if bundle is None:
            loaded = load_bundle(settings.model)  # once, at start-up; never from a request
            app.state.bundle = lambda: loaded
        # Everything loaded so far (numpy, pandas, scikit-learn, the model) lives as long as the
        # server: keep it out of the collector's full passes, which a 10,000-window request
        # otherwise triggers several times (~40 ms of a ~90 ms request, measured).
        gc.freeze()
        yield

    # No /docs or /redoc: FastAPI serves their scripts from a CDN; /openapi.json is enough.
    app = FastAPI(title="procsift", version="0.1.0", lifespan=lifespan, docs_url=None, redoc_url=None,
                  description="Labels processes from their behaviour; inside `procsift run`, shows and steers the daemon.")
    app.state.settings = settings
    app.state.bundle = bundle
    app.state.live = live_link
    app.state.metrics = live_link.metrics if live_link is not None else Metrics()
    app.state.token = token if token is not None else load_or_create_token(settings.token_path())
    for router in (predict.router, info.router, live.router, dashboard.router):
        app.include_router(router)
    document_rows(app)
    app.mount("/static", StaticFiles(directory=str(resources.files("procsift.service.api") / "static")),
              name="static")

    @app.exception_handler(ProcsiftError)
    async def _domain_error(_request: Request, err: ProcsiftError) -> JSONResponse:
        return JSONResponse({"detail": str(err)}, status_code=400)

    @app.exception_handler(RequestValidationError)
    async def _invalid(_request: Request, err: RequestValidationError) -> JSONResponse:
        # Where and why, without echoing the input back: a NaN or Infinity in it cannot be
        # written as JSON (FastAPI's default answer then fails with a 500), and a large body
        # need not come back.
        return JSONResponse({"detail": [{"loc": list(e.get("loc", ())), "msg": str(e.get("msg", "")),
                                         "type": str(e.get("type", ""))} for e in err.errors()]},
                            status_code=422)

    app.add_middleware(BodyLimit, max_bytes=settings.max_body_bytes)
    app.add_middleware(HostGuard, listen=settings.host, extra=settings.extra_hosts())  # outermost: sees every answer
    return app
