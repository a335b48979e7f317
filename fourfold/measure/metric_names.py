"""The metric registry: every metric's name, unit, definition, and where it is shown (pure).

:data:`METRICS` lists each number fourfold reports once, with the names vLLM's ``bench serve``
and AIPerf give the same quantity. What reads it:

- ``docs/metrics.md``: its table is :func:`markdown_table` (``python -m
  fourfold.measure.metric_names`` prints it; ``tests/unit/test_metrics_doc.py`` fails when the
  page and the code differ);
- the report's footnote (:mod:`fourfold.reports.glossary`): the metrics the report shows;
- the SLO grammar (:mod:`measure.slo`): which names are latencies, rates, throughputs, quality;
- :func:`summary_value`: a metric's value in a summary.json block by its SLO/report name
  (``ttft_p95`` is ``block["ttft_ms"]["p95"]``), for the SLO gate, the web UI table and the
  summary-vs-report test.

Names: a *distribution* (``ttft_ms``) is shown by statistic as ``<short>_<stat>`` where
``short`` drops a trailing ``_ms`` (``ttft_p95``, ``similarity_mean``); every other metric by
its name. ``where`` says where each is shown: ``summary`` (each ``level:scenario`` group and
the Aggregated total of summary.json, the web UI and the SLO gate), ``quality`` (summary.json's
``quality`` block, after ``fourfold score``), ``report`` (``fourfold compare``: its rows, and
the counts of each group). ``report`` names the report's rows or
:class:`fourfold.reports.compare.GroupSample` fields that show the metric.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

__all__ = ["BEGIN_MARK", "END_MARK", "METRICS", "SUMMARY_STATS", "MetricDef", "by_name", "markdown_table",
           "names_where", "resolve", "summary_value", "with_table"]

Kind = Literal["distribution", "count", "ratio", "rate", "time"]
SUMMARY_STATS = ("count", "mean", "min", "max", "p50", "p90", "p95", "p99")
UNIT_TEXT = {"ratio": "fraction (report: %)"}


@dataclass(frozen=True)
class MetricDef:
    name: str
    unit: str                   # ms, s, tokens, tok/s, req/s, requests, cos, rounds, fraction
    kind: Kind
    definition: str
    vllm: str = "–"
    aiperf: str = "–"
    where: tuple[str, ...] = ("summary",)
    report: tuple[str, ...] = ()
    stats: tuple[str, ...] = ()     # a distribution's statistics in summary.json

    @property
    def short(self) -> str:
        return self.name.removesuffix("_ms")


def _d(name: str, unit: str, definition: str, vllm: str = "–", aiperf: str = "–", *,
       where: tuple[str, ...] = ("summary",), report: tuple[str, ...] = (),
       stats: tuple[str, ...] = SUMMARY_STATS) -> MetricDef:
    return MetricDef(name, unit, "distribution", definition, vllm, aiperf, where, report, stats)


def _n(name: str, kind: Kind, unit: str, definition: str, vllm: str = "–", aiperf: str = "–", *,
       where: tuple[str, ...] = ("summary",), report: bool = False) -> MetricDef:
    return MetricDef(name, unit, kind, definition, vllm, aiperf, (*where, "report") if report else where,
                     (name,) if report else ())


_REPORTED = ("summary", "report")

METRICS: tuple[MetricDef, ...] = (
    # per request, ok requests only (queue_ms: every request); summary.json: count, mean, min, max, p50..p99
    _d("ttft_ms", "ms", "request sent → first received chunk carrying output text or reasoning (a role-only "
       "chunk does not count)", "TTFT", "TTFT", where=_REPORTED, report=("ttft_p50", "ttft_p95", "ttft_p99")),
    _d("ttfb_ms", "ms", "request sent → response headers", "–", "HTTP waiting"),
    _d("itl_ms", "ms", "gap between consecutive content chunks (network reads that carried ≥ 1 text delta), "
       "pooled over the requests", "ITL", "inter-chunk latency", where=_REPORTED,
       report=("itl_p50", "itl_p95", "itl_p99")),
    _d("tpot_ms", "ms", "(e2e − ttft) / (output_tokens − 1) per request (none below 2 tokens)", "TPOT", "ITL",
       where=_REPORTED, report=("tpot_p50",)),
    _d("e2e_ms", "ms", "request sent → last received chunk (the one carrying the terminal event)", "E2EL",
       "request latency", where=_REPORTED, report=("e2e_p50", "e2e_p95", "e2e_p99")),
    _d("queue_ms", "ms", "open loop: intended arrival → send (client queueing), every request",
       "client queue time"),
    _d("output_tokens", "tokens", "the server's usage when it reports one, else the number of content deltas "
       "(counted as estimated)", "output len", "OSL"),
    _d("request_tps", "tok/s", "1000 / tpot_ms: one request's decode speed", "–", "output token throughput per user"),
    # counts over measured requests (warm-up and cancelled ones are in no statistic)
    _n("requests", "count", "requests", "measured requests (not warm-up, not cancelled)", report=True),
    _n("ok", "count", "requests", "requests whose error class is not a failure (ok, truncated)", report=True),
    _n("failures", "count", "requests", "requests that failed: connect error, timeout, HTTP 4xx/5xx, 429, context "
       "length, malformed or interrupted stream, too large, client error", "failed", "error requests", report=True),
    _n("interrupted", "count", "requests", "the stream broke (error class interrupted), or after 2xx headers it ended "
       "without its terminal event ([DONE], message_stop) or with a failure", report=True),
    _n("stalls", "count", "gaps", "content-chunk gaps above the stall threshold (--stall-ms, 150 ms), in any request"),
    _n("requests_with_stall", "count", "requests", "requests with at least one stall (a content-chunk gap above "
       "--stall-ms)", report=True),
    _n("good", "count", "requests", "ok requests meeting every per-request SLO (the goodput limits)", report=True),
    _n("output_tokens_total", "count", "tokens", "output tokens of every request, failed streams too (they used "
       "the server)", report=True),
    _n("output_tokens_estimated", "count", "requests", "requests with output whose count is not the server's usage"),
    _n("conn_reused", "count", "requests", "requests sent on an already-open connection", report=True),
    _n("conn_new", "count", "requests", "requests that opened a new connection"),
    _n("conn_known", "count", "requests", "requests where it is known whether the connection was reused "
       "(conn_reused + conn_new)", where=(), report=True),
    _n("conn_reconnects", "count", "requests", "requests whose pooled keep-alive connection the server had closed "
       "while idle, so they opened a new one"),
    _n("wall_s", "time", "s", "first send → last end (start + e2e, else the last known offset) over the requests",
       report=True),
    # per second of wall time
    _n("output_tps", "rate", "tok/s", "output_tokens_total / wall_s", "output throughput", "output token throughput",
       report=True),
    _n("request_rps", "rate", "req/s", "requests / wall_s", "request throughput", "request throughput"),
    _n("goodput_rps", "rate", "req/s", "good / wall_s", "goodput", "goodput", report=True),
    # shares of requests
    _n("error_rate", "ratio", "fraction", "failures / requests", report=True),
    _n("interruption_rate", "ratio", "fraction", "interrupted / requests", report=True),
    _n("stall_rate", "ratio", "fraction", "requests_with_stall / requests", report=True),
    _n("conn_reuse", "ratio", "fraction", "conn_reused / conn_known", report=True),
    _n("goodput_ratio", "ratio", "fraction", "good / requests"),
    # after the run: fourfold score (summary.json "quality" block) and the comparison's own
    _d("similarity", "cos", "cosine(MiniLM(answer), MiniLM(reference)) per scored answer", where=("quality", "report"),
       report=("similarity_mean", "similarity_p5"), stats=("mean", "p5", "p50")),
    _n("structure_compliance", "ratio", "fraction", "answers delivering the requested number of items / answers "
       "asked for a number", where=("quality",), report=True),
    _d("groundedness", "cos", "L3: max cosine(MiniLM(answer), MiniLM(retrieved chunk)) per scored answer",
       where=("report",), report=("groundedness_mean",), stats=()),
    _n("ttft_structured_penalty", "time", "ms", "mean TTFT of structured prompts (\"in three points\") − mean TTFT "
       "of plain ones", where=(), report=True),
    _n("sessions", "count", "sessions", "L4: ended sessions (the record that ends one says so)", where=(), report=True),
    _n("sessions_completed", "count", "sessions", "L4: sessions whose answers covered every goal fact", where=(),
       report=True),
    _n("session_completion", "ratio", "fraction", "L4: sessions_completed / sessions", where=(), report=True),
    _n("session_rounds", "count", "rounds", "L4: user turns per ended session (mean)", where=(), report=True),
    _n("recall_at_k", "ratio", "fraction", "L3: |first k retrieved ∩ gold| / |gold| per request (mean)", where=(),
       report=True),
    _n("precision_at_k", "ratio", "fraction", "L3: |first k retrieved ∩ gold| / k per request (mean)", where=(),
       report=True),
)

_BY_NAME = {m.name: m for m in METRICS}


def by_name(name: str) -> MetricDef:
    """The metric called ``name``; KeyError listing the known names when there is none."""
    try:
        return _BY_NAME[name]
    except KeyError:
        raise KeyError(f"no metric {name!r}; known: {', '.join(_BY_NAME)}") from None


def names_where(where: str, kind: Kind | None = None, unit: str | None = None) -> tuple[MetricDef, ...]:
    """The metrics shown in ``where`` (optionally of one kind and unit), in registry order."""
    return tuple(m for m in METRICS if where in m.where and (kind is None or m.kind == kind)
                 and (unit is None or m.unit == unit))


def resolve(key: str) -> tuple[MetricDef, str | None] | None:
    """``"error_rate"`` -> (error_rate, None); ``"ttft_p95"`` -> (ttft_ms, "p95"); None if unknown."""
    if key in _BY_NAME:
        return _BY_NAME[key], None
    short, _, stat = key.rpartition("_")
    for metric in METRICS:
        if metric.kind == "distribution" and metric.short == short and (stat in metric.stats or
                                                                         key in metric.report):
            return metric, stat
    return None


def summary_value(block: dict[str, Any], key: str) -> Any:
    """The value of ``key`` in one summary.json block (a group, the total, a quality block): the
    block's own key when it has one (``similarity_mean`` in the quality block), else a
    distribution's statistic (``ttft_p95`` -> ``block["ttft_ms"]["p95"]``); None when absent."""
    if key in block:
        return block[key]
    found = resolve(key)
    if found is None or found[1] is None:
        return None
    metric, stat = found
    values = block.get(metric.name)
    return values.get(stat) if isinstance(values, dict) else None


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def markdown_table() -> str:
    """The table of docs/metrics.md: one row per metric of :data:`METRICS`."""
    lines = ["| fourfold | unit | definition | vLLM `bench serve` | AIPerf | shown in |",
             "|---|---|---|---|---|---|"]
    for m in METRICS:
        shown = ", ".join(m.where)
        if m.stats:
            shown = shown.replace("summary", f"summary ({', '.join(m.stats)})", 1).replace(
                "quality", f"quality ({', '.join(m.stats)})", 1)
        if m.report and m.report != (m.name,):
            shown += f" ({', '.join(f'`{r}`' for r in m.report)})"
        lines.append(f"| `{m.name}` | {UNIT_TEXT.get(m.kind, m.unit)} | {_cell(m.definition)} | {m.vllm} | "
                     f"{m.aiperf} | {shown} |")
    return "\n".join(lines) + "\n"


BEGIN_MARK = "<!-- metrics table: generated by python -m fourfold.measure.metric_names --write docs/metrics.md -->"
END_MARK = "<!-- end of the generated metrics table -->"


def with_table(page: str) -> str:
    """``page`` with the text between BEGIN_MARK and END_MARK replaced by :func:`markdown_table`
    (ValueError when the marks are missing)."""
    begin, end = page.find(BEGIN_MARK), page.find(END_MARK)
    if begin < 0 or end < begin:
        raise ValueError(f"the page has no {BEGIN_MARK!r} ... {END_MARK!r} block")
    return page[:begin + len(BEGIN_MARK)] + "\n" + markdown_table() + page[end:]


def main(argv: list[str] | None = None) -> int:
    """Print the table, or with ``--write PAGE`` put it into the page's generated block."""
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["--write"] and len(args) == 2:
        path = Path(args[1])
        path.write_text(with_table(path.read_text(encoding="utf-8")), encoding="utf-8")
        return 0
    if args:
        print("usage: python -m fourfold.measure.metric_names [--write docs/metrics.md]", file=sys.stderr)
        return 2
    print(markdown_table(), end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
