"""The daemon loop, REST API and CLI that compose collector, models and distributor."""

__all__: list[str] = []
