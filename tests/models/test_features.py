"""The feature transform: behaviour only, rates per second, the /proc fallback."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd
import pytest

from procsift.collector.schema import SYSCALL_COLUMNS, CATEGORY_COLUMNS, Window
from procsift.collector.traceio import TraceMeta, windows_to_frame, write_trace
from procsift.models import FEATURE_NAMES, FeatureTransform, RAW_COLUMNS, load_traces, train_bundle
from procsift.models.features import raw_matrix



def test_rates_are_per_second_and_proportions_sum_to_one() -> None:
    w1 = Window(host="h", t_start=0, dur_s=1.0, pid=1, start_time=1, switches_in=10, run_ns=1_000_000,
                syscalls={"read": 30, "write": 10})
    w2 = Window(host="h", t_start=0, dur_s=2.0, pid=1, start_time=1, switches_in=20, run_ns=2_000_000,
                syscalls={"read": 60, "write": 20})
    X = FeatureTransform().fit_transform(raw_matrix(windows_to_frame([w1, w2])))
    assert X.shape == (2, len(FEATURE_NAMES))
    np.testing.assert_allclose(X[0], X[1])  # same behaviour, twice as long a window
    i = FEATURE_NAMES.index
    assert X[0, i("prop_file_read")] == pytest.approx(0.75)
    assert X[0, i("log_rate_syscalls")] == pytest.approx(np.log1p(40))
    assert X[0, [i(f"prop_{c[4:]}") for c in CATEGORY_COLUMNS]].sum() == pytest.approx(1.0)


def test_identity_columns_never_reach_the_features() -> None:
    assert not {"comm", "exe", "uid", "cgroup", "pid", "ppid", "start_time", "host"} & set(RAW_COLUMNS)


def test_a_renamed_copy_of_a_program_gets_the_same_label(tmp_path, make_frame: Callable[..., pd.DataFrame]) -> None:
    train = make_frame(seed=1)
    write_trace(tmp_path / "t.parquet", train, TraceMeta(window_s=1.0))
    bundle = train_bundle("tree", load_traces([tmp_path / "t.parquet"]))
    test = make_frame(n=10, seed=2)
    renamed = test.copy()
    renamed["comm"] = "totally-other"
    renamed["exe"] = "/opt/x/bin/renamed"
    renamed["uid"] = 4242
    renamed["cgroup"] = "/elsewhere.slice"
    renamed["pid"] += 5000
    a, pa = bundle.predict_frame(test)
    b, pb = bundle.predict_frame(renamed)
    assert list(a) == list(b)
    np.testing.assert_array_equal(pa, pb)


def test_rows_without_syscall_counts_are_labelled_by_the_scheduler_features(tmp_path, make_frame: Callable[..., pd.DataFrame]) -> None:
    write_trace(tmp_path / "t.parquet", make_frame(seed=3), TraceMeta(window_s=1.0))
    bundle = train_bundle("tree", load_traces([tmp_path / "t.parquet"]))
    proc = make_frame(n=15, seed=4)
    proc[list(SYSCALL_COLUMNS) + list(CATEGORY_COLUMNS) + ["syscalls"]] = 0
    proc[["sleep_ns", "block_ns", "max_wait_ns", "run_wait_transitions", "wakeups", "wakes_others"]] = 0
    assert bundle.needs_fallback(proc)
    labels, proba = bundle.predict_frame(proc, collector="proc")
    assert proba.shape == (len(proc), len(bundle.labels))
    assert np.mean(labels == proc["label"].to_numpy()) > 0.9
    label, _ = bundle.predict_row(proc.iloc[0])
    assert label == labels[0]


def test_training_on_proc_rows_is_refused_clearly(tmp_path, make_frame: Callable[..., pd.DataFrame]) -> None:
    f = make_frame(n=5)
    f[list(SYSCALL_COLUMNS) + list(CATEGORY_COLUMNS) + ["syscalls"]] = 0
    write_trace(tmp_path / "p.parquet", f, TraceMeta(window_s=1.0, collector="proc"))
    from procsift.models import TrainingDataError
    with pytest.raises(TrainingDataError, match="syscall counts"):
        train_bundle("tree", load_traces([tmp_path / "p.parquet"]))


def test_tree_feature_set_is_a_named_subset_with_the_new_ratios() -> None:
    from procsift.models import TREE_FEATURE_NAMES
    from procsift.models.features import PER_ALIVE, PROC_FEATURE_NAMES
    assert set(TREE_FEATURE_NAMES) <= set(FEATURE_NAMES)
    assert {PER_ALIVE.get(n, n) for n in PROC_FEATURE_NAMES} - {"log_io_bytes_per_switch"} <= set(TREE_FEATURE_NAMES)
    assert set(PER_ALIVE) | set(PER_ALIVE.values()) <= set(FEATURE_NAMES)
    w = Window(host="h", t_start=0, dur_s=1.0, pid=1, start_time=1, switches_in=10, wakeups=10,
               run_ns=1_000_000, syscalls={"read": 30, "write": 10, "sendto": 5})
    raw = raw_matrix(windows_to_frame([w]))
    full = FeatureTransform().fit_transform(raw)
    tree = FeatureTransform(feature_set="tree").fit_transform(raw)
    assert tree.shape == (1, len(TREE_FEATURE_NAMES))
    np.testing.assert_allclose(tree[0], [full[0, FEATURE_NAMES.index(n)] for n in TREE_FEATURE_NAMES])
    i = FEATURE_NAMES.index
    assert full[0, i("uses_network")] == 1.0
    assert full[0, i("log_file_calls_per_wakeup")] == pytest.approx(np.log1p(40 / 10))
    with pytest.raises(ValueError, match="feature_set"):
        FeatureTransform(feature_set="nope").fit(raw)


def test_rates_per_alive_second_do_not_dilute_a_short_life() -> None:
    """A process that lived 0.1 s of a 1 s window (0.05 s running) ran half of its life; one
    alive all window with 4 threads is alive 1 s; a /proc row (no sleep measured) keeps the window."""
    i = FEATURE_NAMES.index
    short = Window(host="h", t_start=0, dur_s=1.0, pid=1, start_time=1, run_ns=50_000_000, sleep_ns=50_000_000,
                   switches_in=10, exited=True, syscalls={"read": 10})
    long = Window(host="h", t_start=0, dur_s=1.0, pid=2, start_time=1, nthreads=4, run_ns=50_000_000,
                  sleep_ns=3_950_000_000, switches_in=10, syscalls={"read": 10})
    proc = Window(host="h", t_start=0, dur_s=1.0, pid=3, start_time=1, run_ns=50_000_000, switches_in=10)
    f = FeatureTransform().fit_transform(raw_matrix(windows_to_frame([short, long, proc])))
    assert f[0, i("log_run_us_per_alive_s")] == pytest.approx(np.log1p(500_000))
    assert f[0, i("log_switches_in_per_alive_s")] == pytest.approx(np.log1p(100))
    assert f[0, i("log_run_us_per_s")] == pytest.approx(np.log1p(50_000))
    assert f[1, i("log_run_us_per_alive_s")] == pytest.approx(np.log1p(50_000))
    assert f[2, i("log_run_us_per_alive_s")] == pytest.approx(np.log1p(50_000))


def test_io_byte_features_measure_bytes_per_call_and_per_switch() -> None:
    # An image server: 20 sendfile calls moving 2 MB in a second (sendfile counts the bytes in
    # both rchar and wchar); an HTML server: 200 calls moving 1 MB; a server that reads files
    # with read() and sends with sendto() (not in wchar): 100 calls, 1 MB.
    image = Window(host="h", t_start=0, dur_s=1.0, pid=1, start_time=1, switches_in=20, rchar=2_000_000,
                   wchar=2_000_000, syscalls={"sendfile": 20})
    html = Window(host="h", t_start=0, dur_s=1.0, pid=2, start_time=1, switches_in=100, rchar=1_000_000,
                  wchar=1_000_000, syscalls={"recvfrom": 100, "writev": 100})
    python = Window(host="h", t_start=0, dur_s=1.0, pid=3, start_time=1, switches_in=50, rchar=1_000_000,
                    wchar=0, syscalls={"read": 50, "sendto": 50})
    full = FeatureTransform().fit_transform(raw_matrix(windows_to_frame([image, html, python])))
    i = FEATURE_NAMES.index
    assert full[:, i("log_io_bytes_per_call")] == pytest.approx(np.log1p([100_000, 5_000, 10_000]))
    assert full[:, i("log_io_bytes_per_switch")] == pytest.approx(np.log1p([100_000, 10_000, 20_000]))
    assert full[:, i("log_rate_wchar")] == pytest.approx(np.log1p([2_000_000, 1_000_000, 0]))
    from procsift.models.features import PROC_FEATURE_NAMES
    assert {"log_rate_rchar", "log_rate_wchar", "log_io_bytes_per_switch"} <= set(PROC_FEATURE_NAMES)


def test_socket_features_and_think_time_of_an_idle_process_only() -> None:
    # An HTML server: 300 socket sends of 5 KB and 300 receives in 1 s; an image server: 20 sends
    # of 500 KB; an editor idle for 1.5 s of 2 s with a 1.5 s wait; a compressor whose worker
    # thread keeps a CPU busy while its main thread waits 1.5 s on it.
    html = Window(host="h", t_start=0, dur_s=1.0, pid=1, start_time=1, switches_in=300,
                  net_tx=300, net_tx_bytes=1_500_000, net_rx=300, syscalls={"read": 300, "writev": 300})
    image = Window(host="h", t_start=0, dur_s=1.0, pid=2, start_time=1, switches_in=20,
                   net_tx=20, net_tx_bytes=10_000_000, net_rx=5, syscalls={"sendfile": 20, "read": 5})
    editor = Window(host="h", t_start=0, dur_s=2.0, pid=3, start_time=1, switches_in=10, run_ns=20_000_000,
                    max_wait_ns=1_500_000_000, syscalls={"read": 10, "write": 10})
    zstd = Window(host="h", t_start=0, dur_s=2.0, pid=4, start_time=1, switches_in=10, run_ns=2_100_000_000,
                  max_wait_ns=1_500_000_000, syscalls={"read": 10, "write": 10})
    X = FeatureTransform().fit_transform(raw_matrix(windows_to_frame([html, image, editor, zstd])))
    i = FEATURE_NAMES.index
    assert X[:, i("log_net_tx_bytes_per_call")] == pytest.approx(np.log1p([5_000, 500_000, 0, 0]))
    assert X[:, i("log_rate_net_calls")] == pytest.approx(np.log1p([600, 25, 0, 0]))
    assert X[:, i("net_call_share")] == pytest.approx([1.0, 1.0, 0, 0])
    assert X[:, i("log_max_wait_ms")] == pytest.approx(np.log1p([0, 0, 1500, 1500]))
    assert X[:, i("log_idle_max_wait_ms")] == pytest.approx(np.log1p([0, 0, 1500 * 0.99, 0]))
