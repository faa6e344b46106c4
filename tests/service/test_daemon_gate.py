"""The daemon's demand gate: a light process labelled background is left alone (pure)."""

from __future__ import annotations

from procsift.service.daemon import BACKGROUND_MIN_DEMAND, demand_gate


def test_heavy_background_is_acted_on() -> None:
    assert demand_gate("background", 0.9) is None
    assert demand_gate("background", BACKGROUND_MIN_DEMAND) is None


def test_light_or_unmeasured_background_is_left_alone() -> None:
    why = demand_gate("background", 0.04)
    assert why is not None and "4%" in why and "left alone" in why
    assert demand_gate("background", None) is not None


def test_other_labels_are_never_gated() -> None:
    for label in ("interactive", "html-serving", None):
        assert demand_gate(label, 0.0) is None
