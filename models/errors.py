"""Errors the models package raises; all are ProcsiftError, shown by the CLI as one plain line."""

from __future__ import annotations

from procsift.collector.errors import ProcsiftError

__all__ = ["ModelError", "BundleError", "IncompatibleModel", "UntrustedBundle", "TrainingDataError"]


class ModelError(ProcsiftError):
    """Base of every error from procsift.models."""


class BundleError(ModelError):
    """A bundle folder is missing, incomplete or corrupt; `field` names the metadata.json key at fault."""

    def __init__(self, path: str, why: str, field: str | None = None) -> None:
        super().__init__(f"{path}: {why}")
        self.path = path
        self.field = field


class IncompatibleModel(BundleError):
    """A bundle was built for other features, labels or input columns than this procsift reads."""


class UntrustedBundle(BundleError):
    """A bundle lives where someone other than this user (or root) could have written it."""


class TrainingDataError(ModelError):
    """Traces cannot be trained or evaluated on (empty, unlabelled, mixed window lengths...)."""
