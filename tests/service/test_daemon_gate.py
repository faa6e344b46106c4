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


def test_demand_is_what_the_process_wanted_whatever_others_wanted() -> None:
    from procsift.collector import Window
    from procsift.service.daemon import BACKGROUND_MIN_DEMAND, window_demand

    def w(run: float, runq: float, block: float = 0.0) -> Window:
        return Window(host="h", t_start=0, dur_s=2.0, pid=1, start_time=1, run_ns=int(run * 1e9),
                      runq_ns=int(runq * 1e9), block_ns=int(block * 1e9))

    assert window_demand(w(2.0, 0.0)) == 1.0                      # a hog, alone
    assert window_demand(w(0.13, 1.87)) == 1.0                    # a hog among thirty runnable tasks
    assert window_demand(w(0.0, 2.0)) == 1.0                      # queued all window long
    assert abs(window_demand(w(0.2, 0.4)) - 0.125) < 1e-9         # light, on a busy machine
    assert window_demand(w(0.2, 0.4)) < BACKGROUND_MIN_DEMAND
    assert abs(window_demand(w(0.1, 0.0, 0.5)) - 0.3) < 1e-9      # D state counts (disk demand)
    assert window_demand(w(0.0, 0.0)) == 0.0
