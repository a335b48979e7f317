"""The comparison as one self-contained HTML page (``report.html``): tables, plots, waveforms.

No JavaScript, no external file: CSS inline, plots as SVG data URIs (:mod:`fourfold.reports.plots`).
Every string that comes from a run (labels, paths, group and item names, answer text, notes) goes
through :func:`html.escape`, so an answer such as ``<script>alert(1)</script>`` shows as text.

Per group: TTFT and E2E CDFs overlaid, the ITL histogram, output tokens per second over time,
similarity distributions (scored runs), and per side the stream waveform (tokens per 50 ms) of a
typical request (median E2E) and of the worst one (most stalls, then longest E2E), with their
answers.
"""

from __future__ import annotations

import html
import json
from dataclasses import dataclass
from typing import Any

import numpy as np

from fourfold.reports import plots
from fourfold.reports.capacity import sweep_plot_uri, sweep_rates_text
from fourfold.reports.compare import Row
from fourfold.reports.document import Report, Side
from fourfold.reports.glossary import (
    DEFINITIONS,
    GATED_MARK,
    METRICS_DOC,
    fmt_band,
    fmt_ci,
    fmt_delta,
    fmt_p,
    fmt_pct,
    fmt_value,
    legend_lines,
    shown_p,
    verdict_text,
)
from fourfold.reports.load import RunData, group_names
from fourfold.reports.markdown import structured_cells, structured_rows
from fourfold.reports.scores import scoring_notes

__all__ = ["code_spans", "render_html", "waveform_records"]

ANSWER_PREVIEW_CHARS = 4000
WAVEFORM_NOTE = ("Each side in its colour of the plots above; filled: its typical request (median E2E), "
                 "dashed outline: its worst (most stalls, then longest E2E).")
CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2rem auto;\
max-width:72rem;color:#222;
padding:0 1rem}
table{border-collapse:collapse;margin:.5rem 0 1rem}\
th,td{border:1px solid #ccc;padding:.25rem .5rem;font-size:.9rem}
th{background:#f4f4f4}td.num{text-align:right;font-variant-numeric:tabular-nums}
tr.better td.verdict{background:#e6f4ea}tr.worse td.verdict{background:#fce8e6}
tr.equivalent td.verdict{background:#eef3fb}
.plots{display:flex;flex-wrap:wrap;gap:1rem}.plots img{max-width:34rem;width:100%}
details pre{white-space:pre-wrap;background:#f8f8f8;padding:.5rem;max-height:20rem;overflow:auto}
small,.note{color:#555}.warning{background:#fff4e5;padding:.25rem .5rem}
"""


def e(value: object) -> str:
    return html.escape(str(value), quote=True)


def code_spans(text: str) -> str:
    """``text`` escaped, its Markdown code spans (```name```) as ``<code>`` elements: the metric
    definitions are written for docs/metrics.md. A backtick without its pair stays as it is."""
    parts = text.split("`")
    if len(parts) % 2 == 0:                     # an odd number of backticks: the last one has no pair
        parts[-2:] = [parts[-2] + "`" + parts[-1]]
    return "".join(f"<code>{e(part)}</code>" if i % 2 else e(part) for i, part in enumerate(parts))


@dataclass
class PickedRecord:
    title: str
    record: dict[str, Any]
    worst: bool = False             # the worst request; False: the typical one


def _rows_html(rows: list[Row]) -> str:
    out = ["<table><tr>" + "".join(f"<th>{h}</th>" for h in
                                   ("metric", "baseline", "candidate", "Δ", "Δ%", "95% CI of Δ", "band",
                                    "p (adj.)", "verdict", "test", "n (baseline / candidate)")) + "</tr>"]
    for r in rows:
        label = (f"{r.label} ({r.unit})" + (", paired" if r.paired else "")
                 + (f" {GATED_MARK}" if r.gated else ""))
        cells = [f"<td>{e(label)}</td>"]
        cells += [f'<td class="num">{e(v)}</td>' for v in (
            fmt_value(r.baseline, r.unit), fmt_value(r.candidate, r.unit), fmt_delta(r.delta, r.unit),
            fmt_pct(r.delta_pct), fmt_ci(r.ci_low, r.ci_high, r.unit), fmt_band(r), fmt_p(shown_p(r)))]
        test = f"{r.test}; {r.why}" if r.why else r.test
        cells += [f'<td class="verdict">{e(verdict_text(r))}</td>', f"<td><small>{e(test)}</small></td>",
                  f'<td class="num"><small>{r.n_baseline} / {r.n_candidate}</small></td>']
        out.append(f'<tr class="{e(r.verdict.split()[0])}">' + "".join(cells) + "</tr>")
    out.append("</table>")
    return "\n".join(out)


def _img(uri: str | None, alt: str) -> str:
    return f'<img src="{uri}" alt="{e(alt)}">' if uri else ""


def _group_rows(run: RunData, group: str, variant: str | None) -> np.ndarray:
    """Row numbers of the group's ok records with content chunks."""
    frame = run.records
    keep = frame["ok"].to_numpy(dtype=bool) & (frame["n_chunks"].to_numpy() > 0)
    if variant is not None:
        keep &= (frame["variant"] == variant).to_numpy()
    return np.flatnonzero(keep & (group_names(frame) == group).to_numpy())


def _read_record(run: RunData, line_offset: int) -> dict[str, Any] | None:
    try:
        with open(run.path / "records.jsonl", "rb") as fh:
            fh.seek(line_offset)
            data = json.loads(fh.readline())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def waveform_records(side: Side, group: str) -> list[PickedRecord]:
    """The typical (median E2E) and the worst (most stalls, then longest E2E; the first such
    record on ties) ok request of a side."""
    candidates = [(run, _group_rows(run, side.source_group(group), side.variant)) for run in side.runs]
    candidates = [(run, rows) for run, rows in candidates if rows.size]
    if not candidates:
        return []
    e2e = np.concatenate([run.records["e2e_ms"].to_numpy(dtype=float)[rows] for run, rows in candidates])
    stalls = np.concatenate([run.records["stalls"].to_numpy()[rows] for run, rows in candidates])
    typical = int(np.nanargmin(np.abs(e2e - np.nanmedian(e2e))))
    most = np.flatnonzero(stalls == stalls.max())
    worst = int(most[np.nanargmax(e2e[most])]) if np.isfinite(e2e[most]).any() else int(most[0])
    bounds = np.cumsum([0] + [rows.size for _, rows in candidates])
    picked = []
    for title, index in (("typical (median E2E)", typical), ("worst (most stalls, then longest E2E)", worst)):
        is_worst = title.startswith("worst")
        which = int(np.searchsorted(bounds, index, side="right")) - 1
        run, rows = candidates[which]
        row = run.records.iloc[int(rows[index - bounds[which]])]
        record = _read_record(run, int(row["line_offset"]))
        if record is not None:
            stall_count = int(row["stalls"])
            picked.append(PickedRecord(f"{side.label}: {title}, E2E {row['e2e_ms']:.0f} ms, {stall_count} "
                                       f"stall(s), item {row['item_id']}", record, is_worst))
        if typical == worst:
            break
    return picked


def _waveforms(report: Report, group: str) -> str:
    """Per side its typical and worst request, in the side's colour of the plots above (filled:
    typical, dashed: worst), and their answers."""
    parts = []
    plotted = [side for side in report.sides if group in side.groups]       # in the plots' order
    for index, side in enumerate(report.sides):
        picked = waveform_records(side, group)
        if not picked:
            continue
        order = next((i for i, other in enumerate(plotted) if other is side), index)
        waves = [plots.Waveform(p.title, p.record.get("chunk_offsets_ms") or [],
                                int(p.record.get("output_tokens") or 0), p.worst) for p in picked]
        color = plots.COLORS[order % len(plots.COLORS)]
        parts.append(_img(plots.waveform_plot(f"stream waveform: {side.label}", waves, color),
                          f"stream waveform of {side.label}"))
        for p in picked:
            text = str(p.record.get("text") or "")
            shown = text[:ANSWER_PREVIEW_CHARS] + ("…" if len(text) > ANSWER_PREVIEW_CHARS else "")
            parts.append(f"<details><summary>answer: {e(p.title)}</summary><pre>{e(shown)}</pre></details>")
    if parts:
        parts.insert(0, f'<p class="note">{WAVEFORM_NOTE}</p>')
    return "\n".join(parts)


def _group_section(report: Report, group: str) -> str:
    series = [plots.Series(side.label, side.groups[group]) for side in report.sides if group in side.groups]
    figures = [
        _img(plots.cdf_plot(f"TTFT CDF: {group}", series, "ttft_ms", "time to first token (ms)"), "TTFT CDF"),
        _img(plots.cdf_plot(f"E2E CDF: {group}", series, "e2e_ms", "end-to-end latency (ms)"), "E2E CDF"),
        _img(plots.itl_plot(f"ITL histogram (pooled chunk gaps): {group}", series), "ITL histogram"),
        _img(plots.tokens_plot(f"output tokens/s over time: {group}", series), "tokens per second"),
        _img(plots.similarity_plot(f"similarity to the reference: {group}", series),
             "similarity distribution"),
        _img(plots.phases_plot(f"request phases (means): {group}",
                               [(f"{s.label}: {kind} connections", means) for s in series
                                for kind, means in s.sample.phase_means.items()]),
             "request phases: DNS, TCP connect, TLS, request written, waiting for the head"),
    ]
    return (f"<h3>{e(group)}</h3>\n<div class=\"plots\">{''.join(f for f in figures if f)}</div>\n"
            f"<h4>Stream waveforms</h4>\n{_waveforms(report, group)}")


def _sweep_plots(report: Report) -> str:
    """Latency against the offered rate, one plot per sweep side; the alt text lists the rates."""

    figures = [_img(sweep_plot_uri(block, f"latency vs offered rate: {label}"),
                    f"latency vs offered rate, {label}: {sweep_rates_text(block)}")
               for label, block in report.sweeps]
    return f"<h3>Latency vs offered rate</h3>\n<div class=\"plots\">{''.join(figures)}</div>"


def _sides_table(report: Report) -> str:
    rows = []
    for role, side in zip(("baseline", *["candidate"] * len(report.comparisons)), report.sides):
        runs = "<br>".join(e(r.path) for r in side.runs)
        variant = f" (variant {e(side.variant)})" if side.variant else ""
        rows.append(f"<tr><td>{role}</td><td>{e(side.label)}</td><td>{runs}{variant}</td>"
                    f'<td class="num">{side.requests}</td></tr>')
    return ("<table><tr><th>side</th><th>label</th><th>run directories</th><th>requests</th></tr>"
            + "".join(rows) + "</table>")


def render_html(report: Report, *, plots: bool = True) -> str:
    """The report as one self-contained page; ``plots=False`` (``fourfold compare --no-plots``) leaves the
    plots out (each costs matplotlib ~0.1-0.2 s on a 2-core machine) and says so."""
    s = report.settings
    body = [f"<h1>fourfold comparison</h1>\n<p class=\"note\">created {e(report.created_at)}</p>",
            _sides_table(report),
            *(f'<p class="warning"><b>Warning:</b> {e(w)}</p>' for w in report.warnings)]
    for comparison in report.comparisons:
        body.append(f"<h2>{e(comparison.baseline.label)} → {e(comparison.candidate.label)}</h2>")
        for group in comparison.groups():
            body.append(f"<h3>{e(group)}</h3>")
            body.append(_rows_html([r for r in comparison.rows if r.group == group]))
            if group in comparison.group_notes:
                body.append(f'<p class="note">{e(comparison.group_notes[group])}</p>')
    structured = [structured_cells(row) for row in structured_rows(report)]
    if structured:
        body.append("<h2>First-token cost of structured prompts</h2><table><tr><th>group</th><th>side</th>"
                    "<th>plain TTFT mean (ms)</th><th>structured TTFT mean (ms)</th><th>B - A (ms)</th>"
                    "<th>n plain / structured</th></tr>"
                    + "".join("<tr>" + "".join(f"<td>{e(c)}</td>" for c in row) + "</tr>"
                              for row in structured)
                    + "</table>")
    for note in [*report.notes,
                 *scoring_notes(list({id(r): r for s in report.sides for r in s.runs}.values()))]:
        body.append(f'<p class="note">{e(note)}</p>')
    for section in report.sections:
        body.append(section.html or f"<pre>{e(section.markdown)}</pre>")
    body.append("<h2>Plots</h2>")
    if not plots:
        body.append('<p class="note">plots left out (--no-plots)</p>')
    else:
        if report.sweeps:
            body.append(_sweep_plots(report))
        groups = list(dict.fromkeys(g for c in report.comparisons for g in c.groups()))
        body += [_group_section(report, group) for group in groups]
    body.append("<hr>" + "".join(f'<p class="note">{e(line)}</p>' for line in
                                 legend_lines(s.resamples, s.seed, s.confidence, s.alpha)))
    body.append(f"<h2>Metric definitions</h2><p>One definition per metric in <code>{METRICS_DOC}</code>; the "
                "names vLLM's <code>bench serve</code> and NVIDIA AIPerf use for "
                "it:</p><table><tr><th>fourfold</th><th>definition</th><th>vLLM</th><th>AIPerf</th></tr>"
                + "".join(f"<tr><td><code>{e(n)}</code></td><td>{code_spans(d)}</td><td>{code_spans(v)}</td>"
                          f"<td>{code_spans(a)}</td></tr>" for n, d, v, a in DEFINITIONS) + "</table>")
    return ("<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>fourfold "
            f"comparison</title><style>{CSS}</style></head><body>\n" + "\n".join(body) + "\n</body></html>\n")
