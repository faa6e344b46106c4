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


def test_a_process_once_serving_html_is_demoted_only_after_a_streak_of_background() -> None:
    from procsift.service.daemon import DEMOTE_STREAK, demotion_gate

    for streak in range(DEMOTE_STREAK):
        why = demotion_gate("background", "html-serving", streak)
        assert why is not None and "was html-serving" in why
    assert demotion_gate("background", "html-serving", DEMOTE_STREAK) is None


def test_demotion_gate_does_not_delay_what_was_never_anything_but_background() -> None:
    from procsift.service.daemon import demotion_gate

    assert demotion_gate("background", None, 0) is None          # a new hog: idled at once
    assert demotion_gate("html-serving", "html-serving", 0) is None
    assert demotion_gate("interactive", "interactive", 0) is None


def test_evidence_gate_waits_for_a_second_active_window() -> None:
    from procsift.service.daemon import EVIDENCE_WINDOWS, evidence_gate

    why = evidence_gate("html-serving", 1)
    assert why is not None and "1 active window" in why
    assert evidence_gate("html-serving", EVIDENCE_WINDOWS) is None
    assert evidence_gate(None, 0) is None
