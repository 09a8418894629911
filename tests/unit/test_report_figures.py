"""The report's series from results and telemetry as a sweep writes them: the cluster-wide rates
of Figs. 5 and 6, and the lines Fig. 3b draws its speedups against."""

from __future__ import annotations

import pytest
from dlperf.report.data import Point, cluster_rate, summary_rows
from dlperf.report.figures import fig_throughput, fig_time_to_accuracy

MB = 1e6


def samples(start: float, count: int, burst_at: float, burst: float, step: float = 1.0):
    """One host's telemetry rows: an NFS read counter that grows by BURST bytes in the
    interval ending at BURST_AT (flat otherwise), sampled every STEP s from START."""
    rows = []
    for i in range(count):
        t = start + i * step
        read = 5e9 + (burst if t >= burst_at else 0.0)  # a counter counted since boot
        rows.append({"t": t, "nfs": {"/mnt/isilon": {"read_bytes": read}}})
    return {}, rows


def test_hosts_are_summed_at_the_same_instant_not_by_sample_number():
    # Host b's sampler started 3 s after host a's (SSH start-up); both read 100 MB in the
    # same second of the clock, 106-107.
    point = Point(
        2, {}, {"a": samples(100, 11, 107, 100 * MB), "b": samples(103, 11, 107, 100 * MB)}
    )
    xs, ys = cluster_rate(point, "nfs", "read_bytes")
    assert xs == [float(x) for x in range(1, 14)]  # 100 .. 113, the grid of both hosts' samples
    assert ys[xs.index(7.0)] == pytest.approx(200.0)  # both hosts' 100 MB/s, in one second
    assert sum(ys) == pytest.approx(200.0)  # and nowhere else


def test_samples_off_the_grid_share_their_bytes_between_its_intervals():
    # Host b samples half a second off host a's instants: its 100 MB (106.5-107.5) fall half
    # in the grid's interval 106-107 and half in 107-108; no byte is lost or counted twice.
    point = Point(
        2, {}, {"a": samples(100, 11, 107, 100 * MB), "b": samples(103.5, 8, 107.5, 100 * MB)}
    )
    xs, ys = cluster_rate(point, "nfs", "read_bytes")
    assert ys[xs.index(7.0)] == pytest.approx(150.0) and ys[xs.index(8.0)] == pytest.approx(50.0)
    assert sum(y * 1.0 for y in ys) == pytest.approx(200.0)


def test_a_host_without_the_source_adds_nothing_and_none_at_all_draws_nothing():
    empty = ({}, [{"t": 100.0 + i} for i in range(5)])  # no NFS mount on that node
    point = Point(2, {}, {"a": samples(100, 5, 102, 10 * MB), "b": empty})
    xs, ys = cluster_rate(point, "nfs", "read_bytes")
    assert xs == [1.0, 2.0, 3.0, 4.0] and ys == pytest.approx([0.0, 10.0, 0.0, 0.0])
    assert cluster_rate(Point(1, {}, {"b": empty}), "nfs", "read_bytes") is None


def tta(nodes: int, status: str, seconds: float | None = None) -> Point:
    result = {"status": status, "mode": "tta", "world_size": nodes, "epochs": 3}
    if seconds is not None:
        result["time_to_accuracy_s"] = seconds
    return Point(nodes, result)


def lines(fig) -> dict[str, tuple[list, list]]:
    ax = fig.axes[1]
    return {ln.get_label(): (list(ln.get_xdata()), list(ln.get_ydata())) for ln in ax.lines}


def test_speedups_are_drawn_against_linear_from_the_point_they_are_measured_over():
    # The 1-node point failed: speedups are over 2 nodes, and so are linear and the seed's.
    drawn = lines(fig_time_to_accuracy([tta(1, "failed"), tta(2, "ok", 800), tta(4, "ok", 400)]))
    assert drawn["this run"] == ([2, 4], [1.0, 2.0])
    assert drawn["linear"] == ([2, 4], [1.0, 2.0])
    seed_x, seed_y = drawn["seed (C4140-M, 4x V100/node)"]
    assert seed_x == [2, 4, 8] and seed_y == pytest.approx([1.0, 3.3 / 1.8, 4.9 / 1.8])


def test_from_one_node_the_seeds_published_speedups_are_drawn_as_published():
    drawn = lines(fig_time_to_accuracy([tta(1, "ok", 1000), tta(2, "ok", 560)]))
    assert drawn["linear"] == ([1, 2], [1.0, 2.0])
    assert drawn["seed (C4140-M, 4x V100/node)"] == ([1, 2, 4, 8], [1.0, 1.8, 3.3, 4.9])


def test_a_smallest_point_that_never_reached_the_target_is_not_the_base():
    # The 1-node run used up its epochs (status ok, no time); the 2- and 4-node runs converged.
    points = [tta(1, "ok"), tta(2, "ok", 800), tta(4, "ok", 500)]
    rows = summary_rows(points)
    assert [r["speedup"] for r in rows] == [None, 1.0, 1.6]
    assert [r["speedup_base_nodes"] for r in rows] == [None, 2, 2]
    assert [r["scaling_efficiency"] for r in rows] == [None, 1.0, pytest.approx(0.8)]
    fig = fig_time_to_accuracy(points)
    notes = [t.get_text() for t in fig.axes[0].texts]
    assert notes == ["target not reached", "1.00x\n3 ep", "1.60x\n3 ep"]
    assert fig.axes[1].get_ylabel() == "speedup over 2 node(s)"


def test_the_models_speedups_are_rebased_onto_the_measurements_base():
    prediction = {1: {"tta_s": 1000, "tta_speedup": 1.0}, 2: {"tta_s": 550, "tta_speedup": 1.8},
                  4: {"tta_s": 300, "tta_speedup": 3.3}}  # fmt: skip
    points = [tta(1, "failed"), tta(2, "ok", 800), tta(4, "ok", 450)]
    drawn = lines(fig_time_to_accuracy(points, prediction=prediction))
    xs, ys = drawn["predicted (dlperf model)"]
    assert xs == [2, 4] and ys == pytest.approx([1.0, 3.3 / 1.8])


def test_throughput_speedups_have_their_own_base():
    # 1 node: no rate recorded (a TTA-only result); 2 and 4 nodes measured throughput.
    points = [
        Point(1, {"status": "ok", "time_to_accuracy_s": 100.0}),
        Point(2, {"status": "ok", "throughput_img_per_s": 100.0}),
        Point(4, {"status": "ok", "throughput_img_per_s": 180.0}),
    ]
    rows = summary_rows(points)
    assert [r["throughput_speedup"] for r in rows] == [None, 1.0, 1.8]
    assert [r["throughput_efficiency"] for r in rows] == [None, 1.0, pytest.approx(0.9)]


def test_a_point_without_a_rate_has_no_bar_and_says_why():
    points = [
        Point(1, {"status": "ok", "throughput_img_per_s": 50.0}),
        Point(2, {"status": "failed"}),
    ]
    fig = fig_throughput(points, baseline=[Point(1, {"status": "ok", "throughput_img_per_s": 40})])
    ax = fig.axes[0]
    heights = [bar.get_height() for bar in ax.patches]
    assert heights == [50.0, 0, 40, 0]  # this run's bars, then the baseline's
    assert sorted(t.get_text() for t in ax.texts) == ["failed", "not run"]


def test_a_counter_that_could_not_be_read_is_no_sample_not_a_zero():
    unread = ({}, [{"t": 100.0 + i, "fabric": {"rxe0/1": {"xmit_bytes": None}}} for i in range(5)])
    assert cluster_rate(Point(1, {}, {"a": unread}), "fabric", "xmit_bytes") is None


def test_one_port_unread_in_one_sample_adds_nothing_instead_of_its_whole_count():
    # Two HCA ports, each sending 100 MB/s; port mlx5_1 could not be read at t=101. The host's
    # rate stays 200 MB/s-worth of bytes (the missed interval's bytes counted when the port is
    # read again), never its whole cumulative count as one spike.
    def row(t, a, b):
        return {"t": t, "fabric": {"mlx5_0/1": {"xmit_bytes": a}, "mlx5_1/1": {"xmit_bytes": b}}}

    rows = [row(100, 1e12, 2e12), row(101, 1e12 + 1e8, None), row(102, 1e12 + 2e8, 2e12 + 2e8)]
    xs, ys = cluster_rate(Point(1, {}, {"a": ({}, rows)}), "fabric", "xmit_bytes")
    assert xs == [1.0, 2.0]
    assert ys == pytest.approx([100.0, 300.0])
    assert sum(ys) == pytest.approx(400.0)  # 2 s x 2 ports x 100 MB/s, no byte lost


def test_a_mount_that_appears_mid_run_starts_from_its_first_reading():
    def row(t, mounts):
        return {"t": t, "nfs": {m: {"read_bytes": v} for m, v in mounts.items()}}

    rows = [
        row(100, {"/home": 5e9}),
        row(101, {"/home": 5e9 + 1e7}),
        row(102, {"/home": 5e9 + 2e7, "/mnt/isilon": 9e11}),  # mounted now, counted since boot
        row(103, {"/home": 5e9 + 3e7, "/mnt/isilon": 9e11 + 5e7}),
    ]
    _, ys = cluster_rate(Point(1, {}, {"a": ({}, rows)}), "nfs", "read_bytes")
    assert ys == pytest.approx([10.0, 10.0, 60.0])


def test_a_completed_point_with_no_rate_says_no_rate_not_ok():
    points = [
        Point(1, {"status": "ok", "throughput_img_per_s": 50.0}),
        Point(2, {"status": "ok", "throughput_img_per_s": 0.0}),
    ]
    ax = fig_throughput(points).axes[0]
    assert [bar.get_height() for bar in ax.patches] == [50.0, 0]
    assert [t.get_text() for t in ax.texts] == ["no rate"]


def test_the_rate_figures_time_axis_is_from_the_first_sample_not_the_points_start():
    from dlperf.report.figures import fig_nas

    point = Point(2, {"status": "ok"}, {"a": samples(100, 11, 107, 100 * MB)})
    fig, drawn, _ = fig_nas([point])
    assert drawn
    assert fig.axes[0].get_xlabel() == "seconds since the point's first telemetry sample"
