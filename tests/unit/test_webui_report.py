"""The LLM block of Locust's HTML report (pure): its table and SLO verdicts, and where it goes."""

from __future__ import annotations

from html.parser import HTMLParser

import pytest

from fourfold.gates.slo import parse_spec
from fourfold.gates.slo_verdict import evaluate
from fourfold.levels.webui import form_list_values
from fourfold.levels.webui_report import SECTION_ID, inject, report_section
from tests.unit.test_webui_rows import stats_with_records


class _Cells(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.rows: list[list[str]] = []
        self._in = False

    def handle_starttag(self, tag: str, attrs: object) -> None:
        if tag == "tr":
            self.rows.append([])
        self._in = tag in ("td", "th")

    def handle_endtag(self, tag: str) -> None:
        self._in = False

    def handle_data(self, data: str) -> None:
        if self._in:
            self.rows[-1].append(data)


def cells(html: str) -> list[list[str]]:
    parser = _Cells()
    parser.feed(html)
    return parser.rows


def test_report_section_rows_and_verdicts() -> None:
    summary = stats_with_records().summary()
    verdicts = evaluate(parse_spec("ttft_p95<=150ms"), summary, quality="skip")
    rows = cells(report_section(summary, verdicts))
    head = rows[0]
    assert head[:4] == ["level:scenario", "requests", "failures", "TTFT p50 ms"]
    assert {"ITL p99 ms", "E2E p95 ms", "output tok/s", "errors"} <= set(head)
    table = {r[0]: dict(zip(head, r, strict=False)) for r in rows[1:4]}
    assert list(table) == ["l1:chat", "l1:other", "Aggregated"]
    assert table["Aggregated"]["requests"] == "3" and table["Aggregated"]["failures"] == "1"
    assert table["l1:chat"]["errors"] == "http_5xx x1" and table["l1:other"].get("errors", "") == ""
    assert table["l1:other"]["TTFT p50 ms"] == f"{summary['groups'][1]['ttft_ms']['p50']:.1f}"
    assert table["Aggregated"]["output tok/s"] == f"{summary['total']['output_tps']:.1f}"
    assert rows[-1] == ["ttft_p95 <= 150 ms", "Aggregated", "200.0 ms", "miss"]


@pytest.mark.parametrize(("verdicts", "error", "says"), [
    ([], "", "no --slo given"),
    ([], "bad <clause>", "--slo is malformed: bad &lt;clause&gt;"),
])
def test_report_section_without_verdicts(verdicts: list, error: str, says: str) -> None:
    assert says in report_section(stats_with_records().summary(), verdicts, error)


@pytest.mark.parametrize(("page", "expected"), [
    ('<body><div id="root"></div><script>x</script></body>',
     '<body><div id="root"></div>\nS<script>x</script></body>'),
    ("<body><p>no root</p></body>", "<body><p>no root</p>S</body>"),
    ("no body", "no bodyS"),
    (f'<div id="root"></div><section id="{SECTION_ID}">old</section>',
     f'<div id="root"></div><section id="{SECTION_ID}">old</section>'),      # once only
])
def test_inject(page: str, expected: str) -> None:
    assert inject(page, "S") == expected


@pytest.mark.parametrize(("values", "expected"), [
    ([""], []),
    (["http://a/metrics"], ["http://a/metrics"]),
    (["http://a/metrics, http://b:9400/metrics"], ["http://a/metrics", "http://b:9400/metrics"]),
    (["x", "y,"], ["x", "y"]),
])
def test_form_list_values(values: list[str], expected: list[str]) -> None:
    assert form_list_values(values) == expected
