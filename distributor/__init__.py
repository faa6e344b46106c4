"""Plans and applies per-group CPU placement, niceness and I/O class (filled by a later issue)."""

__all__: list[str] = []
