"""Dependencies the routers declare: the served bundle, the daemon link, settings, the auth check."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated

from fastapi import Depends, HTTPException, Request, status

from procsift.models import Bundle
from procsift.service.api.auth import token_matches
from procsift.service.api.settings import Settings
from procsift.service.live import LiveLink

__all__ = ["BundleDep", "LiveDep", "OptionalLiveDep", "SettingsDep", "Authorized"]


def _bundle(request: Request) -> Bundle:
    get: Callable[[], Bundle] = request.app.state.bundle
    return get()


def _optional_live(request: Request) -> LiveLink | None:
    live: LiveLink | None = request.app.state.live
    return live


def _live(request: Request) -> LiveLink:
    live: LiveLink | None = request.app.state.live
    if live is None:
        raise HTTPException(status.HTTP_503_SERVICE_UNAVAILABLE,
                            "no daemon here: this endpoint answers inside 'procsift run', not 'procsift serve'")
    return live


def _settings(request: Request) -> Settings:
    settings: Settings = request.app.state.settings
    return settings


def _authorized(request: Request) -> None:
    if not token_matches(request.headers.get("authorization"), request.app.state.token):
        raise HTTPException(status.HTTP_401_UNAUTHORIZED, "a valid 'Authorization: Bearer TOKEN' is required",
                            headers={"WWW-Authenticate": "Bearer"})


BundleDep = Annotated[Bundle, Depends(_bundle)]
LiveDep = Annotated[LiveLink, Depends(_live)]
OptionalLiveDep = Annotated["LiveLink | None", Depends(_optional_live)]
SettingsDep = Annotated[Settings, Depends(_settings)]
Authorized = Depends(_authorized)
