"""The seed's figures 3-6 from a sweep (matplotlib, headless)."""

from __future__ import annotations

import textwrap

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from dlperf.report.data import (
    Point,
    cluster_rate,
    measure,
    missing_sources,
    reference,
    summary_rows,
)


def _no_data(ax, text: str) -> None:
    ax.text(0.5, 0.5, text, ha="center", va="center", wrap=True, fontsize=9, transform=ax.transAxes)
    ax.set_xticks([])
    ax.set_yticks([])


def fig_time_to_accuracy(
    points: list[Point],
    with_reference: bool = True,
    why_none: str = "",
    prediction: dict | None = None,
):
    """Measured time to accuracy (3a) and its speedup (3b); `prediction` ({nodes: row} of
    `dlperf model` with epochs) adds the model's time and speedup as markers."""
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(11, 4.2))
    if not any(p.result.get("mode") == "tta" for p in points):
        # A throughput sweep has no time to accuracy: say so rather than draw empty bars.
        for a, title in ((ax, "Fig. 3a: time to accuracy"), (ax2, "Fig. 3b: speedup")):
            a.set_title(title)
            why = why_none or (
                "the sweep measured throughput; run one with --mode tta "
                "and pass it to dlperf report --tta"
            )
            lines = [textwrap.fill(line, 48) for line in why.splitlines()]
            _no_data(a, "no time-to-accuracy points in this report\n\n" + "\n".join(lines))
        fig.tight_layout()
        return fig
    rows = summary_rows(points)
    labels = [str(r["nodes"]) for r in rows]
    minutes = [(r["time_to_accuracy_s"] or 0) / 60 for r in rows]
    bars = ax.bar(
        labels, minutes, color=["#4878a8" if r["status"] == "ok" else "#bbbbbb" for r in rows]
    )
    for bar, r in zip(bars, rows, strict=True):
        if r["status"] != "ok" or r["speedup"] is None:
            note = r["status"] if r["status"] != "ok" else "target not reached"
        else:
            note = f"{r['speedup']:.2f}x\n{r['epochs']} ep"
        ax.annotate(
            note,
            (bar.get_x() + bar.get_width() / 2, bar.get_height()),
            ha="center",
            va="bottom",
            fontsize=8,
        )
    predicted = {
        n: row for n, row in (prediction or {}).items() if row.get("tta_s") and str(n) in labels
    }
    if predicted:
        at = [(label, predicted[int(label)]["tta_s"] / 60) for label in labels
              if int(label) in predicted]  # fmt: skip
        ax.plot([x for x, _ in at], [y for _, y in at], "kx", markersize=9,
                label="predicted (dlperf model)")  # fmt: skip
        ax.legend(fontsize=8)
    ax.margins(y=0.18)  # room for the labels above the tallest bar, below the title
    ax.set_xlabel("nodes")
    ax.set_ylabel("time to target top-1 (minutes)")
    ax.set_title("Fig. 3a: time to accuracy")
    ok = [r for r in rows if r["speedup"]]
    ax2.plot([r["nodes"] for r in ok], [r["speedup"] for r in ok], "o-", label="this run")
    # Speedups are over the smallest point that succeeded: linear scaling and the seed's curve
    # (published over one node) are drawn from that same point on.
    base = ok[0]["nodes"] if ok else rows[0]["nodes"]
    nodes = [r["nodes"] for r in rows if r["nodes"] >= base]
    ax2.plot(nodes, [n / base for n in nodes], ":", color="grey", label="linear")
    seed = reference()["seed_ready_solution_v1_1"]["speedup_vs_1_node"]
    if with_reference and base in seed:
        at = {n: s / seed[base] for n, s in seed.items() if n >= base}
        ax2.plot(list(at), list(at.values()), "s--", label="seed (C4140-M, 4x V100/node)")
    # The model's speedups are over one node: rebased onto the same point as the measurement's.
    over = (predicted.get(base) or {}).get("tta_speedup")
    sped = sorted((n, row["tta_speedup"] / over) for n, row in predicted.items()
                  if over and row.get("tta_speedup") and n >= base)  # fmt: skip
    if sped:
        ax2.plot(
            [n for n, _ in sped], [v for _, v in sped], "kx--", label="predicted (dlperf model)"
        )
    ax2.set_xlabel("nodes")
    ax2.set_ylabel(f"speedup over {base} node(s)")
    ax2.set_title("Fig. 3b: time-to-accuracy speedup")
    ax2.legend(fontsize=8)
    fig.tight_layout()
    return fig


def fig_throughput(
    points: list[Point], baseline: list[Point] | None = None, prediction: dict | None = None
):
    """Measured throughput per node count; `prediction` ({nodes: row} of `dlperf model`) is
    drawn beside it as markers."""
    fig, ax = plt.subplots(figsize=(7, 4.2))
    nodes = sorted({p.nodes for p in points} | {p.nodes for p in baseline or []})
    width = 0.4 if baseline else 0.6

    def draw(ps, shift: float, label: str) -> None:
        """The sweep's bars; a point without a rate gets no bar but its status on the axis."""
        by = {p.nodes: p for p in ps}
        xs = [x + shift for x in range(len(nodes))]
        rates = [measure(by[n].result, "throughput_img_per_s") if n in by and by[n].ok else None
                 for n in nodes]  # fmt: skip
        ax.bar(xs, [r or 0 for r in rates], width, label=label)
        for x, n, rate in zip(xs, nodes, rates, strict=True):
            if not rate:
                status = by[n].result.get("status") if n in by else "not run"
                why = "no rate" if status in ("ok", None) else status
                ax.annotate(why, (x, 0), ha="center", va="bottom", rotation=90, fontsize=8)

    xs = range(len(nodes))
    draw(points, -width / 2 if baseline else 0, "this run")
    if baseline:
        draw(baseline, width / 2, "baseline")
    if prediction:
        at = [(x, prediction[n]["throughput"]) for x, n in zip(xs, nodes, strict=True)
              if n in prediction]  # fmt: skip
        ax.plot([x for x, _ in at], [y for _, y in at], "kx--", label="predicted (dlperf model)")
    if baseline or prediction:
        ax.legend(fontsize=8)
    ax.set_xticks(list(xs), [str(n) for n in nodes])
    ax.set_xlabel("nodes")
    ax.set_ylabel("training throughput (images/s)")
    ax.set_title("Fig. 4: throughput")
    fig.tight_layout()
    return fig


def _over_time(
    points: list[Point],
    section: str,
    keys: list[tuple[str, str]],
    title: str,
    ylabel: str,
    source: str,
    empty: str,
):
    fig, ax = plt.subplots(figsize=(7, 4.2))
    drawn = 0
    reasons = []
    for p in points:
        for key, style in keys:
            series = cluster_rate(p, section, key)
            if series and series[0]:
                suffix = "" if len(keys) == 1 else f" {key.split('_')[0]}"
                ax.plot(series[0], series[1], style, label=f"{p.nodes} node(s){suffix}")
                drawn += 1
        if not p.telemetry:
            reasons.append(f"{p.nodes} node(s): no telemetry recorded")
        reasons += [f"{p.nodes} node(s): {r}" for r in missing_sources(p, source)]
    ax.set_title(title)
    if drawn:
        ax.set_xlabel("seconds since the point's first telemetry sample")
        ax.set_ylabel(ylabel)
        ax.legend(fontsize=8)
    else:
        reasons = reasons or [empty]
        _no_data(ax, "no data\n" + "\n".join(sorted(set(reasons))[:6]))
    fig.tight_layout()
    return fig, drawn, reasons


def fig_nas(points: list[Point]):
    return _over_time(
        points,
        "nfs",
        [("read_bytes", "-")],
        "Fig. 5: NAS (NFS) read throughput",
        "NFS read (MB/s, all nodes)",
        "nfs",
        "the sampled nodes had no NFS mounts",
    )


def fig_fabric(points: list[Point]):
    return _over_time(
        points,
        "fabric",
        [("xmit_bytes", "-"), ("rcv_bytes", "--")],
        "Fig. 6: fabric send/receive throughput",
        "RDMA port data (MB/s, all nodes)",
        "fabric",
        "the sampled nodes had no RDMA port counters",
    )
