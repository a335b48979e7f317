"""The metric registry: every metric's name, unit, definition, and where it is shown (pure).

:data:`METRICS` lists each number fourfold reports once, with the names vLLM's ``bench serve``
and AIPerf give the same quantity. What reads it:

- ``docs/metrics.md``: its table is :func:`markdown_table` (``python -m fourfold.measure.metric_names`` prints
  it; ``tests/unit/test_metrics_doc.py`` fails when the page and the code differ);
- the report's footnote (:mod:`fourfold.reports.glossary`): the metrics the report shows;
- the SLO grammar (:mod:`gates.slo`): which names are latencies, rates, throughputs, quality;
- :func:`summary_value`: a metric's value in a summary.json block by its SLO/report name (``ttft_p95`` is
  ``block["ttft_ms"]["p95"]``), for the SLO gate, the web UI table and the summary-vs-report test.

Names: a *distribution* (``ttft_ms``) is shown by statistic as ``<short>_<stat>`` where
``short`` drops a trailing ``_ms`` (``ttft_p95``, ``similarity_mean``); every other metric by
its name. A metric has one name everywhere; ``key`` is its key in a summary.json block only where
the block's own name already says it (the ``sessions`` block's ``ended`` is ``sessions_ended``).

``where`` says where each is shown (:data:`WHERE`): ``summary`` (each ``level:scenario`` group and the
Aggregated total of summary.json, the web UI and the SLO gate), ``sessions`` (L4: summary.json's ``sessions``
block, per A/B variant and in total), ``rag`` (L3: summary.json's ``rag`` block), ``embed`` (embeddings and
rerank: summary.json's ``embed`` block, per batch size), ``mix`` (``--mix``: summary.json's ``mix`` block, a
row per tenant and per model; the report's ``level:scenario#tenant`` groups), ``quality`` and
``quality.rag`` (summary.json's ``quality`` block per ``level:scenario`` and in total, and its ``rag`` part,
after ``fourfold score``), ``report`` (``fourfold compare``: its rows, and the counts of each group).
``report`` names the report's rows or :class:`fourfold.reports.compare.GroupSample` fields that show the
metric; a metric shown in a summary.json block and in the report is the same number in both
(``tests/integration/test_summary_vs_report.py`` compares every one, from this table).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from fourfold.measure.metric_defs import (
    METRICS,
    SUMMARY_STATS,
    TELEMETRY_CANONICAL,
    TELEMETRY_REPORTED,
    WHERE,
    Kind,
    MetricDef,
)

__all__ = ["BEGIN_MARK", "END_MARK", "METRICS", "NOT_METRICS", "SUMMARY_STATS", "TELEMETRY_CANONICAL",
           "WHERE", "MetricDef", "by_name", "in_block", "markdown_table", "names_where", "resolve",
           "summary_value", "with_table"]


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
    if key.startswith("error_rate."):         # the report's error_rate.<class> rows
        return _BY_NAME["error_class_rate"], None
    if key.startswith("telemetry."):          # the report's telemetry.<source>.<canonical>.<mean|max>
        series, _, stat = key.removeprefix("telemetry.").rpartition(".")
        canonical = series.partition(".")[2]
        for name, known in TELEMETRY_REPORTED.items():
            if known == canonical and stat in _BY_NAME[name].stats:
                return _BY_NAME[name], stat
        return None
    short, _, stat = key.rpartition("_")
    for metric in METRICS:
        if metric.kind == "distribution" and metric.short == short and (stat in metric.stats or
                                                                         key in metric.report):
            return metric, stat
    return None


def summary_value(block: dict[str, Any], key: str) -> Any:
    """The value of ``key`` in one summary.json block (a group, the total, a quality, sessions or
    rag block): the block's own key when it has one (``similarity_mean`` in the quality block),
    else the metric's ``key`` (``sessions_ended`` -> ``block["ended"]``), else a distribution's
    statistic (``ttft_p95`` -> ``block["ttft_ms"]["p95"]``); None when absent."""
    if key in block:
        return block[key]
    found = resolve(key)
    if found is None:
        return None
    metric, stat = found
    if stat is None:
        return block.get(metric.key) if metric.key else None
    values = block.get(metric.summary_key)
    return values.get(stat) if isinstance(values, dict) else None


# numbers in a summary.json block that are no metric: settings of the run, and the times wall_s spans
NOT_METRICS = {"summary": ("first_start_s", "last_end_s"), "rag": ("k",), "embed": ("batch",),
               "quality.rag": ("low_groundedness_threshold",)}


def in_block(block: dict[str, Any], where: str) -> tuple[dict[str, MetricDef], list[str]]:
    """The metrics a summary.json block shown in ``where`` holds, by their key in it, and the keys
    that hold a number or a distribution (a dict with a ``count``) but are no metric of ``where``
    (a new number must be registered here before it is shown)."""
    known = {m.summary_key: m for m in METRICS if where in m.where}
    found: dict[str, MetricDef] = {}
    unknown = []
    for key, value in block.items():
        hit = known.get(key) or (resolve(key) or (None,))[0]     # a distribution's statistic: its own key
        if hit is not None and where in hit.where:
            found[key] = hit
        elif key not in NOT_METRICS.get(where, ()) and (value is None or isinstance(value, (int, float))
                                                        or (isinstance(value, dict) and "count" in value)):
            unknown.append(key)
    return found, unknown


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def markdown_table() -> str:
    """The table of docs/metrics.md: one row per metric of :data:`METRICS`."""
    lines = ["| fourfold | unit | definition | vLLM `bench serve` | AIPerf | shown in |",
             "|---|---|---|---|---|---|"]
    for m in METRICS:
        unit = f"{m.unit} (report: %)" if m.kind == "ratio" and "report" in m.where else m.unit
        lines.append(f"| `{m.name}` | {unit} | {_cell(m.definition)} | {m.vllm} | {m.aiperf} | {_shown(m)} |")
    return "\n".join(lines) + "\n"


def _shown(m: MetricDef) -> str:
    """``summary (count, ...)``, ``sessions as `ended` ``, ``quality (mean, p5, p50; 4 decimals)``,
    ``report (`ttft_p50`, ...)``: where the metric is shown, and how."""
    parts = []
    for i, where in enumerate(m.where):
        if where == "report":
            named = m.report and m.report != (m.name,)
            parts.append("report" + (f" ({', '.join(f'`{r}`' for r in m.report)})" if named else ""))
            continue
        how = ", ".join(m.stats) if i == 0 else ""
        if m.decimals is not None:
            how += f"{'; ' if how else ''}{m.decimals} decimals"
        parts.append(where + (f" ({how})" if how else "") + (f" as `{m.key}`" if m.key else ""))
    if not parts and m.name in TELEMETRY_REPORTED:     # server telemetry: summary.json's server_metrics
        rows = f"report (`telemetry.<source>.{TELEMETRY_REPORTED[m.name]}.{{mean,max}}`)"
        slo = ", --slo (" + ", ".join(f"`{m.short}_{stat}`" for stat in m.stats) + ")"
        parts.append("server_metrics, " + rows + (slo if m.name in TELEMETRY_CANONICAL else ""))
    return ", ".join(parts)


BEGIN_MARK = ("<!-- metrics table: generated by python -m fourfold.measure.metric_names --write "
              "docs/metrics.md -->")
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
