"""The LLM metrics in Locust's own report: its HTML report and its ``--csv`` files.

Locust 2.47's report page (``/stats/report``, the "Download Report" button, ``--html``) renders one
template with no extension point, so the LLM section is a plain HTML block put after the report's
root element: per level:scenario TTFT/ITL/E2E percentiles, output tokens/s and error classes, then
the ``--slo`` verdicts. ``register(environment)`` (local runner or master) adds it to

- ``/stats/report``: an ``after_request`` hook on the web UI's app;
- the ``--html`` file: rewritten at ``quitting`` (Locust writes it just before);
- ``--csv PREFIX``: ``PREFIX_llm.csv`` beside Locust's files at ``quitting`` (the LLM tab's CSV).

Both at exit hold the last test (Locust clears its own statistics at each test start too).
"""

from __future__ import annotations

import html
import logging
import os
from typing import Any

from flask import Response, request

from fourfold.gates.slo import Verdict
from fourfold.levels.runtime import find_runtime, get_runtime
from fourfold.levels.slogate import get_gate, live_verdicts
from fourfold.levels.webui import csv_text, table_rows

log = logging.getLogger("fourfold")
SECTION_ID = "fourfold-llm"
# (title, summary key, statistic) per column of the HTML table
_PERCENTILES = (("TTFT", "ttft_ms"), ("ITL", "itl_ms"), ("E2E", "e2e_ms"))
_QUANTILES = ("p50", "p90", "p95", "p99")


def _ms(value: Any) -> str:
    return "" if value is None else f"{value:.1f}"


def _group_name(group: dict[str, Any]) -> str:
    return f"{group['level']}:{group['scenario']}" if group.get("scenario") else str(group["level"])


def report_section(summary: dict[str, Any], verdicts: list[Verdict], slo_error: str = "") -> str:
    """The LLM block of the HTML report (pure: a summary and verdicts in, HTML out)."""
    head = ["level:scenario", "requests", "failures"]
    head += [f"{title} {q} ms" for title, _ in _PERCENTILES for q in _QUANTILES]
    head += ["output tok/s", "errors"]
    rows = []
    for group in [*summary.get("groups", []), summary["total"]]:
        cells = [_group_name(group), str(group.get("requests", 0)), str(group.get("failures", 0))]
        cells += [_ms((group.get(key) or {}).get(q)) for _, key in _PERCENTILES for q in _QUANTILES]
        tps = group.get("output_tps")
        cells.append("" if tps is None else f"{tps:.1f}")
        cells.append(", ".join(f"{name} x{n}" for name, n in (group.get("errors") or {}).items()
                               if name != "ok"))
        rows.append(cells)
    parts = [f'<section id="{SECTION_ID}" style="font-family:sans-serif;margin:2em auto;max-width:1200px">',
             "<h2>LLM metrics (fourfold)</h2>", _table(head, rows), "<h3>SLO verdicts</h3>"]
    if slo_error:
        parts.append(f"<p>--slo is malformed: {html.escape(slo_error)}</p>")
    elif not verdicts:
        parts.append("<p>no --slo given</p>")
    else:
        parts.append(_table(["SLO", "scope", "measured", "verdict"],
                            [[v.slo.label, v.slo.target, v.slo.format_value(v.measured),
                              v.status if not v.reason else f"{v.status}: {v.reason}"] for v in verdicts]))
    parts.append("</section>")
    return "\n".join(parts)


def _table(head: list[str], rows: list[list[str]]) -> str:
    cell = 'style="border:1px solid #999;padding:2px 6px;text-align:right"'
    out = ['<table style="border-collapse:collapse;font-size:13px">',
           "<tr>" + "".join(f"<th {cell}>{html.escape(h)}</th>" for h in head) + "</tr>"]
    out += ["<tr>" + "".join(f"<td {cell}>{html.escape(str(c))}</td>" for c in row) + "</tr>" for row in rows]
    out.append("</table>")
    return "\n".join(out)


def inject(page: str, section: str) -> str:
    """``page`` with ``section`` after Locust's root element (before ``</body>`` when there is none);
    a page that has the section already is returned as it is."""
    if f'id="{SECTION_ID}"' in page:
        return page
    anchor = '<div id="root"></div>'
    if anchor in page:
        return page.replace(anchor, anchor + "\n" + section, 1)
    at = page.rfind("</body>")
    return page[:at] + section + page[at:] if at >= 0 else page + section


# ---- the shell ----
def current_section(environment: Any) -> str:
    runtime = get_runtime(environment)
    return report_section(runtime.stats.summary(), live_verdicts(environment), get_gate(environment).error)


def _on_quitting(environment: Any, **_kw: Any) -> None:
    """After fourfold's own quitting listener: the LLM block into the ``--html`` file Locust just
    wrote, ``PREFIX_llm.csv`` beside Locust's CSV files."""
    options = environment.parsed_options
    runtime = find_runtime(environment)
    if options is None or runtime is None or runtime.is_worker:
        return
    html_file = getattr(options, "html_file", None)
    try:
        if html_file and os.path.isfile(html_file):
            with open(html_file, encoding="utf-8") as fh:
                page = fh.read()
            with open(html_file, "w", encoding="utf-8") as fh:
                fh.write(inject(page, current_section(environment)))
        prefix = getattr(options, "csv_prefix", None)
        if prefix:
            with open(f"{prefix}_llm.csv", "w", encoding="utf-8") as fh:
                fh.write(csv_text(table_rows(runtime.stats.summary())))
    except OSError as exc:
        log.error("fourfold: the LLM metrics were not added to Locust's report files: %s",
                  exc.strerror or exc)


def register(environment: Any) -> None:
    """The quitting listener (files) and, with a web UI, the ``/stats/report`` hook."""
    environment.events.quitting.add_listener(_on_quitting)
    web_ui = getattr(environment, "web_ui", None)
    if web_ui is None:
        return

    base = (getattr(environment.parsed_options, "web_base_path", "") or "").rstrip("/")

    @web_ui.app.after_request
    def _extend_report(response: Response) -> Response:
        if request.path == f"{base}/stats/report" and response.status_code == 200:
            try:
                response.set_data(inject(response.get_data(as_text=True), current_section(environment)))
            except Exception:  # noqa: BLE001 - never break Locust's own report
                log.exception("fourfold: adding the LLM metrics to Locust's report failed")
        return response


__all__ = ["SECTION_ID", "inject", "register", "report_section"]
