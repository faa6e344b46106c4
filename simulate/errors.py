"""The simulator's error: bad input to a model or experiment, reported as one line by the CLI."""

from __future__ import annotations

from procsift.collector.errors import ProcsiftError


class SimulationError(ProcsiftError):
    """A simulation was asked for something it cannot do (bad parameter, unknown policy)."""
