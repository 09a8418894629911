"""`dlperf report`: PNGs and one self-contained HTML page."""

from __future__ import annotations

import base64
import html
import io
import json
from pathlib import Path

import matplotlib.pyplot as plt

from dlperf.report.data import ReportError, load_points, reference, summary_rows
from dlperf.report.figures import (
    fig_fabric,
    fig_nas,
    fig_throughput,
    fig_time_to_accuracy,
)
from dlperf.results import write_bytes_atomic

# The summary table has 16 columns: smaller type and tight cells keep it inside a 1280 px
# window (the headless-browser test checks that nothing reaches the window's right edge).
STYLE = (
    "body{font-family:sans-serif;max-width:1180px;margin:2em auto;padding:0 1em}"
    "table{border-collapse:collapse;font-size:.82em}"
    "td,th{border:1px solid #ccc;padding:.25em .4em;text-align:right}img{max-width:100%}"
)


def _fmt(value, spec: str) -> str:
    return "—" if value is None else format(value, spec)


TTA_DIFFERS = ("workers", "backend", "precision", "gpu")
TTA_KEYS = ("epochs", "time_to_accuracy_s", "speedup", "speedup_base_nodes", "scaling_efficiency")


THROUGHPUT_KEYS = (
    "throughput_img_per_s", "throughput_speedup", "throughput_speedup_base_nodes",
    "throughput_efficiency",
)  # fmt: skip


def merge_tta(rows: list[dict], tta_rows: list[dict]) -> list[dict]:
    """The time-to-accuracy columns from a TTA sweep, the rest from the main one, by node count;
    a TTA point run with another number of workers, backend, precision or GPU says so
    (tta_workers, tta_backend, tta_precision, tta_gpu)."""
    by_nodes = {r["nodes"]: dict(r, **dict.fromkeys(TTA_KEYS)) for r in rows}
    for t in tta_rows:
        row = by_nodes.setdefault(t["nodes"], dict(t, **dict.fromkeys(THROUGHPUT_KEYS)))
        row.update({k: t[k] for k in TTA_KEYS})
        for key in TTA_DIFFERS:
            if t.get(key) is not None and t.get(key) != row.get(key):
                row[f"tta_{key}"] = t[key]
        if t["status"] != "ok":
            row["status"] = f"tta {t['status']}"
    return [by_nodes[n] for n in sorted(by_nodes)]


TITLES = {
    "fig3_time_to_accuracy": "Fig. 3: time to accuracy",
    "fig4_throughput": "Fig. 4: throughput",
    "fig5_nas_read": "Fig. 5: NAS (NFS) read rate",
    "fig6_fabric": "Fig. 6: fabric (RDMA) traffic",
}


def hosts_of(points: list) -> list[str]:
    """Every host the completed points ran on, from their provenance."""
    return sorted(
        {h for p in points if p.ok for h in (p.result.get("provenance") or {}).get("hosts") or []}
    )


def captions(points: list, tta_points: list, base: list | None, prediction: dict) -> dict:
    """What each figure shows, measured where, and what in it is not a measurement."""
    where = ", ".join(hosts_of(points)) or "no host (no point completed)"
    tta_where = ", ".join(hosts_of(tta_points)) or "no host (no time-to-accuracy run completed)"
    launched = {((p.result.get("provenance") or {}).get("launch") or {}).get("launcher")
                for p in tta_points if p.ok}  # fmt: skip
    if launched == {"local"}:
        tta_where += " with the local launcher (N worker processes on one host, not N nodes)"
    tta_base = next((r["speedup_base_nodes"] for r in summary_rows(tta_points) if r["speedup"]), 1)
    fig4 = f"Measured: training images/s per node count on {where}"
    if base:
        fig4 += ", beside the baseline sweep's"
    if prediction:
        fig4 += "; the markers are dlperf model's prediction, not a measurement"
    if not any(p.result.get("mode") == "tta" for p in tta_points):
        fig3 = (
            "No time-to-accuracy measurement in this report: the sweep measured throughput "
            "(the figure says why, and how to add one)."
        )
    else:
        # Fig. 3b draws the seed's curve from the measurement's base on, where the seed has one
        seed = reference()["seed_ready_solution_v1_1"]["speedup_vs_1_node"]
        if tta_base in seed:
            published = "/".join(f"{seed[n]:g}x" for n in sorted(seed) if n > 1)
            beside = (
                f" beside linear and the seed's published {published} over one node (right; "
                "published, not measured here"
                + (f"; drawn from {tta_base} nodes on" if tta_base != 1 else "")
                + ")"
            )
        else:
            beside = (
                f" beside linear (right; the seed's published speedups, at {sorted(seed)} "
                f"nodes, have no point at {tta_base}: not drawn)"
            )
        fig3 = (
            f"Measured: time to the target top-1 per node count on "
            f"{tta_where} (left), and the speedup over {tta_base} node(s)"
            + beside
            + (
                "; the crosses are dlperf model's prediction, not a measurement."
                if any(row.get("tta_s") for row in prediction.values())
                else "."
            )
        )
    return {
        "fig3_time_to_accuracy": fig3,
        "fig4_throughput": fig4 + ".",
        "fig5_nas_read": f"Measured: NFS read MB/s over time per node count on {where}, summed "
        "over the nodes of each point.",
        "fig6_fabric": f"Measured: RDMA bytes sent and received per second over time per node "
        f"count on {where}.",
    }


def provenance_rows(points: list) -> str:
    """One table row per completed point: where it ran and with what."""
    rows = []
    for p in points:
        if not p.ok:
            continue
        prov = p.result.get("provenance") or {}
        commit = prov.get("git_commit")
        revision = (
            "—" if not commit else commit[:12] + (" (modified)" if prov.get("git_dirty") else "")
        )
        scaling = p.result.get("loss_scaling")
        cells = (
            p.nodes,
            ", ".join(prov.get("hosts") or []) or "—",
            prov.get("launch_host") or "—",
            p.result.get("backend") or "—",
            prov.get("loader") or "—",
            (
                f"{scaling['skipped_steps']} steps skipped, scale {scaling['scale']:g}"
                if scaling
                else "—"
            ),
            prov.get("dlperf") or "—",
            revision,
        )
        rows.append("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in cells) + "</tr>")
    return "".join(rows)


def load_prediction(path: Path) -> dict[int, dict]:
    """The rows of a `dlperf model --json` file, by node count."""
    try:
        record = json.loads(path.read_text())
        rows = {int(row["nodes"]): row for row in record["rows"]}
        if not all(float(row["throughput"]) > 0 for row in rows.values()):
            raise ValueError("a row's throughput is not > 0")
        return rows
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ReportError(f"--model {path}: not a dlperf model --json file ({exc})") from None


def _base(rows: list[dict], key: str) -> str:
    """'over N node(s)' for the point the rows' speedups of KEY are measured over."""
    base = next((r[key] for r in rows if r.get(key)), None)
    return f" over {base} node(s)" if base else ""


def workers(row: dict) -> str:
    text = _fmt(row["workers"], "d")
    if "tta_workers" in row:  # the time to accuracy comes from a sweep with other workers
        text += f" (time to accuracy: {_fmt(row['tta_workers'], 'd')})"
    return text


def labelled(key: str):
    """A backend/precision/GPU cell; a time-to-accuracy sweep run otherwise adds its own."""

    def cell(row: dict) -> str:
        text = str(row.get(key) or "—")
        if f"tta_{key}" in row:
            text += f" (time to accuracy: {row[f'tta_{key}']})"
        return html.escape(text)

    return cell


def summary_table(rows: list[dict]) -> str:
    """The summary as an HTML table: one row per node count, speedups and efficiencies of time
    to accuracy and of throughput each over their own base point, which the header names."""
    tta_over, tput_over = (
        _base(rows, "speedup_base_nodes"),
        _base(rows, "throughput_speedup_base_nodes"),
    )
    columns = (
        ("nodes", lambda r: r["nodes"]),
        ("workers", workers),
        ("status", lambda r: html.escape(str(r["status"]))),
        ("epochs", lambda r: _fmt(r["epochs"], "d")),
        ("time to accuracy (s)", lambda r: _fmt(r["time_to_accuracy_s"], ".1f")),
        (f"speedup{tta_over}", lambda r: _fmt(r["speedup"], ".2f")),
        ("scaling efficiency", lambda r: _fmt(r["scaling_efficiency"], ".0%")),
        ("img/s", lambda r: _fmt(r["throughput_img_per_s"], ".1f")),
        (f"img/s speedup{tput_over}", lambda r: _fmt(r.get("throughput_speedup"), ".2f")),
        ("img/s efficiency", lambda r: _fmt(r.get("throughput_efficiency"), ".0%")),
        ("backend", labelled("backend")),
        ("precision", labelled("precision")),
        ("GPU", labelled("gpu")),
        ("predicted img/s", lambda r: _fmt(r.get("predicted_img_per_s"), ".1f")),
        ("error", lambda r: _fmt(r.get("prediction_error"), "+.0%") + _other_gpus(r, "")),
        # the model's epochs x images / rate: no evaluation in it, which a measured time has
        (
            "predicted time to accuracy (s, training only)",
            lambda r: _fmt(r.get("predicted_tta_s"), ".1f"),
        ),
        ("error", lambda r: _fmt(r.get("tta_prediction_error"), "+.0%") + _other_gpus(r, "tta_")),
        ("largest loss (model)", lambda r: html.escape(str(r.get("largest_loss") or "—"))),
    )
    head = "".join(f"<th>{html.escape(name)}</th>" for name, _ in columns)
    body = "".join(
        "<tr>" + "".join(f"<td>{cell(r)}</td>" for _, cell in columns) + "</tr>" for r in rows
    )
    return f"<table><tr>{head}</tr>{body}</table>"


def _other_gpus(row: dict, prefix: str) -> str:
    """Why a row has no error against the model: its prediction was for another GPU count."""
    gpus, ran = row.get("predicted_gpus"), row.get(f"{prefix}predicted_for_workers")
    return f" (predicted for {gpus} GPUs, {ran} workers ran)" if ran else ""


def add_prediction(rows: list[dict], prediction: dict[int, dict]) -> list[dict]:
    """Each row with the model's throughput for its node count, the measurement's error against
    it, and the loss the model names largest. A prediction for another number of GPUs than the
    row's workers is shown, but no error against it is taken."""
    out = []
    for row in rows:
        pred = prediction.get(row["nodes"])
        if pred is None:
            out.append(row)
            continue
        gpus = pred.get("gpus")
        extra = {"predicted_gpus": gpus}
        measured = row.get("throughput_img_per_s")
        if gpus is not None and row.get("workers") not in (None, gpus):
            extra["predicted_for_workers"], measured = row["workers"], None
        tta, tta_pred = row.get("time_to_accuracy_s"), pred.get("tta_s")
        tta_workers = row.get("tta_workers", row.get("workers"))
        if tta and tta_pred and gpus is not None and tta_workers not in (None, gpus):
            extra["tta_predicted_for_workers"], tta = tta_workers, None
        error = measured / pred["throughput"] - 1.0 if measured else None
        out.append(dict(row, predicted_img_per_s=pred["throughput"], prediction_error=error,
                        predicted_tta_s=tta_pred,
                        tta_prediction_error=tta / tta_pred - 1.0 if tta and tta_pred else None,
                        largest_loss=pred.get("largest_loss"), **extra))  # fmt: skip
    return out


def build_report(
    results: Path,
    output: Path,
    baseline: Path | None = None,
    tta: Path | None = None,
    notes: tuple[str, ...] = (),
    model: Path | None = None,
) -> dict:
    points = load_points(results)
    prediction = load_prediction(model) if model else {}
    base = load_points(baseline) if baseline else None
    tta_points = load_points(tta) if tta else points
    output.mkdir(parents=True, exist_ok=True)
    nas, nas_drawn, nas_why = fig_nas(points)
    fabric, fabric_drawn, fabric_why = fig_fabric(points)
    figures = {
        "fig3_time_to_accuracy": fig_time_to_accuracy(
            tta_points, why_none="\n".join(notes), prediction=prediction
        ),
        "fig4_throughput": fig_throughput(points, base, prediction),
        "fig5_nas_read": nas,
        "fig6_fabric": fabric,
    }
    # Every file is made before any is written: a report that fails part-way leaves the last
    # one whole, never new figures beside an old page.
    pngs = {}
    for name, fig in figures.items():
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=110)
        plt.close(fig)
        pngs[name] = buf.getvalue()
    images = {name: base64.b64encode(data).decode() for name, data in pngs.items()}
    rows = summary_rows(points)
    if tta:
        rows = merge_tta(rows, summary_rows(tta_points))
    rows = add_prediction(rows, prediction)
    caption_text = captions(points, tta_points, base, prediction)
    provenance = provenance_rows([*points, *(tta_points if tta else ())])
    ref = reference()
    seed = ref["seed_ready_solution_v1_1"]
    failures = "".join(
        f"<li>{p.nodes} node(s): "
        f"<pre>{html.escape(str(p.result.get('error', ''))[-1500:])}</pre></li>"
        for p in (*points, *(tta_points if tta else ()))
        if not p.ok
    )
    mlperf = "".join(
        f"<tr><td>{html.escape(s['name'])}</td><td>{s['gpus']}</td><td>{s['minutes']}</td>"
        f"<td>{s['epochs']}</td></tr>"
        for s in ref["mlperf_training_v0_5_resnet_scale_up"]["systems"]
    )
    telemetry_notes = [("Fig. 5", nas_drawn, nas_why), ("Fig. 6", fabric_drawn, fabric_why)]
    missing = "".join(
        f"<li>{name}: {html.escape('; '.join(sorted(set(why))) or 'no samples')}</li>"
        for name, drawn, why in telemetry_notes
        if not drawn or why
    )
    note_items = "".join(f"<li>{html.escape(n)}</li>" for n in notes)
    page = (
        f"""<!doctype html>
<html><head><meta charset="utf-8"><title>dlperf report: {html.escape(results.name)}</title>
<style>{STYLE}</style></head>
<body><h1>dlperf report: {html.escape(results.name)}</h1>
{"<h2>Notes</h2><ul>" + note_items + "</ul>" if notes else ""}
<h2>Summary</h2>
{summary_table(rows)}
{"<h2>Failed or missing points</h2><ul>" + failures + "</ul>" if failures else ""}
{"<h2>Missing telemetry</h2><ul>" + missing + "</ul>" if missing else ""}
"""
        + "".join(
            f"<h2>{TITLES.get(name, name)}</h2>"
            f'<img alt="{name}" src="data:image/png;base64,{data}">'
            f'<p class="caption">{html.escape(caption_text[name])}</p>'
            for name, data in images.items()
        )
        + (
            "<h2>Provenance</h2><table><tr><th>nodes</th><th>hosts</th><th>launched from</th>"
            "<th>backend</th><th>input</th><th>loss scaler</th><th>dlperf</th>"
            f"<th>source revision</th></tr>{provenance}</table>"
            if provenance
            else ""
        )
        + f"""
<h2>Reference</h2><p>{html.escape(seed["source"])}: speedups
{seed["speedup_vs_1_node"]}, epochs {seed["epochs_to_converge"]}.</p>
<p>{html.escape(ref["mlperf_training_v0_5_resnet_scale_up"]["source"])} (scale-up systems):</p>
<table><tr><th>system</th><th>GPUs</th><th>minutes</th><th>epochs</th></tr>{mlperf}</table>
</body></html>
"""
    )
    summary = (json.dumps({"rows": rows}, indent=2, sort_keys=True) + "\n").encode()
    for name, data in pngs.items():
        write_bytes_atomic(output / f"{name}.png", data)
    write_bytes_atomic(output / "summary.json", summary)
    write_bytes_atomic(output / "index.html", page.encode())  # last: the page says it is done
    return {"figures": figures, "rows": rows, "html": output / "index.html"}
