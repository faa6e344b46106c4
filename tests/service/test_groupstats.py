"""The daemon's per-group figures (pure): the 10-minute ring buffer and the Prometheus series."""

from __future__ import annotations

from procsift.service.groupstats import GroupHistory, Sample, export
from procsift.service.live import RUNQ_BUCKETS, Metrics

LABELS = ("interactive", "background", "html-serving")


def test_points_hold_per_label_figures_and_drop_out_after_the_span() -> None:
    h = GroupHistory(span_s=10.0)
    a, b = (1, 1), (2, 2)
    tracked = {a: ("nginx", "html-serving"), b: ("xz", "background")}
    samples = [Sample(a, "html-serving", run_ns=500_000_000, runq_ns=4_000_000, switches_in=40),
               Sample(b, "background", run_ns=2_000_000_000, runq_ns=1_000_000_000, switches_in=10)]
    p = h.record(100.0, 2.0, samples, tracked, changes=3, psi_cpu=12.5, psi_io=None)
    assert p["processes"] == {"html-serving": 1, "background": 1}
    assert p["cpu_share"] == {"html-serving": 0.25, "background": 1.0}
    assert p["runq_ms"] == {"html-serving": 4.0, "background": 1000.0}
    assert (p["psi_cpu"], p["psi_io"], p["changes"]) == (12.5, None, 3)
    for t in (102.0, 104.0, 106.0, 108.0, 110.0, 112.0):
        h.record(t, 2.0, [], {a: ("nginx", "html-serving")}, 0, None, None)
    snap = h.snapshot(2.0)
    assert [pt["t"] for pt in snap["points"]] == [102.0, 104.0, 106.0, 108.0, 110.0, 112.0]
    assert [(tl["pid"], tl["changes"]) for tl in snap["timelines"]] == [(1, [(102.0, "html-serving")])]


def test_a_timeline_keeps_only_the_windows_where_the_label_changed() -> None:
    h = GroupHistory(span_s=600.0)
    key = (7, 7)
    for t, label in [(2, None), (4, "interactive"), (6, "interactive"), (8, "background"), (10, "background")]:
        h.record(float(t), 2.0, [], {key: ("vim", label)}, 0, None, None)
    (tl,) = h.snapshot(2.0)["timelines"]
    assert tl["changes"] == [(2.0, None), (4.0, "interactive"), (8.0, "background")]
    assert (tl["first_t"], tl["last_t"]) == (2.0, 10.0)


def test_prometheus_series_per_label_with_a_histogram() -> None:
    m = Metrics()
    point = {"processes": {"html-serving": 2}}
    samples = [Sample((1, 1), "html-serving", run_ns=300_000_000, runq_ns=2_000_000, switches_in=4),  # 0.5 ms
               Sample((2, 2), "html-serving", run_ns=100_000_000, runq_ns=0, switches_in=0)]
    export(m, point, samples, LABELS)
    export(m, point, samples, LABELS)
    text = m.render()
    assert 'procsift_group_processes{label="html-serving"} 2' in text
    assert 'procsift_group_processes{label="background"} 0' in text
    assert 'procsift_group_cpu_seconds_total{label="html-serving"} 0.8' in text
    assert 'procsift_group_runq_seconds_total{label="html-serving"} 0.004' in text
    assert "# TYPE procsift_group_runq_delay_seconds histogram" in text
    assert 'procsift_group_runq_delay_seconds_bucket{label="html-serving",le="0.00025"} 0' in text
    assert 'procsift_group_runq_delay_seconds_bucket{label="html-serving",le="0.0005"} 2' in text
    assert 'procsift_group_runq_delay_seconds_bucket{label="html-serving",le="+Inf"} 2' in text
    assert 'procsift_group_runq_delay_seconds_count{label="html-serving"} 2' in text
    assert 'procsift_group_runq_delay_seconds_count{label="unlabelled"} 0' in text
    buckets = [ln for ln in text.splitlines() if ln.startswith('procsift_group_runq_delay_seconds_bucket{label="html')]
    assert len(buckets) == len(RUNQ_BUCKETS) + 1
