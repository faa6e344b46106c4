"""Labelled traces recorded from real workloads, and the recipes that record them."""

__all__: list[str] = []
