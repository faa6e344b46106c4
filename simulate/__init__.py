"""Discrete-event simulation of scheduling policies from procsift's source papers."""

__all__: list[str] = []
