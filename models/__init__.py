"""Models that label Window rows: decision tree, EM clustering and the POS run/wait heuristic (filled by a later issue)."""

__all__: list[str] = []
