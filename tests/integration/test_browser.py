"""Real headless Chromium opens the LLM tab of Locust's web UI and fourfold's charts page.

Chromium is Debian's ``chromium`` package (``.ci/run`` installs it when missing). The screenshots
land in ``test-artifacts/`` (git-ignored) for a human to look at.
"""

from __future__ import annotations

import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest

from tests.conftest import REPO, free_port
from tests.integration.webui_support import extended, finish, get_json, row, start_locust, wait_for

CHROMIUM = next((path for name in ("chromium", "chromium-browser", "google-chrome")
                 if (path := shutil.which(name))), None)
pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(CHROMIUM is None, reason="no chromium on PATH: .ci/run installs Debian's `chromium` "
                                                "package (apt-get install -y chromium)"),
]
ARTIFACTS = REPO / "test-artifacts"


class _Tables(HTMLParser):
    """Every <table> of a page as rows of cell texts."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: list[list[list[str]]] = []
        self._cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "table":
            self.tables.append([])
        elif tag == "tr" and self.tables:
            self.tables[-1].append([])
        elif tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._cell is not None and self.tables and self.tables[-1]:
            self.tables[-1][-1].append("".join(self._cell).strip())
            self._cell = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)


def chromium(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    assert CHROMIUM is not None
    cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
           "--hide-scrollbars", f"--user-data-dir={tmp_path / 'chromium-profile'}", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False)


def test_chromium_renders_the_llm_tab_and_the_charts(tmp_path, locustfile):
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    proc = start_locust(["-f", locustfile("l1_throughput.py"), "--web-host", "127.0.0.1", "--web-port", str(port),
                         "--autostart", "-u", "3", "-r", "3", "--run-time", "60s", "--sim-profile", "flat",
                         "--max-tokens", "16", "--slo", "ttft_p95<=5s"], tmp_path)
    try:
        def ready():
            total = row(extended(get_json(base + "/stats/requests"), "llm"), "Aggregated")
            charts = get_json(base + "/fourfold/charts.json")
            points = charts and any(v is not None for v in charts["ttft_window"]["p95"]) \
                and sum(charts["series"]["output_tokens"]) > 0
            return total if total and total["requests"] > 0 and points else None

        wait_for(ready, 40, what="LLM rows and a TTFT chart point")

        ARTIFACTS.mkdir(exist_ok=True)
        shot = ARTIFACTS / "webui_llm_tab.png"
        shot.unlink(missing_ok=True)
        page = chromium(tmp_path, "--window-size=1600,900", "--virtual-time-budget=5000", f"--screenshot={shot}",
                        "--dump-dom", f"{base}/?tab=llm")
        assert page.returncode == 0, page.stderr[-2000:]
        assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 10_000
        parser = _Tables()
        parser.feed(page.stdout)
        tables = [t for t in parser.tables if t and "TTFT p95 ms" in t[0]]
        assert len(tables) == 1, f"no LLM table in the page: {page.stdout[:2000]}"
        header, *body = (r for r in tables[0] if r)
        assert header[:6] == ["level:scenario", "requests", "failures", "TTFT p50 ms", "TTFT p95 ms", "TTFT p99 ms"]
        assert {"ITL p50 ms", "TPOT p50 ms", "E2E p99 ms", "output tok/s", "stall %", "interrupted %",
                "conn reuse %", "goodput req/s"} <= set(header)
        rows = {cells[0]: dict(zip(header, cells)) for cells in body}
        assert set(rows) == {"l1:saturation", "Aggregated"}
        rendered = rows["Aggregated"]
        assert int(rendered["requests"]) > 0 and rendered["failures"] == "0"
        assert 40.0 <= float(rendered["TTFT p50 ms"]) <= 300.0
        assert float(rendered["output tok/s"]) > 0 and float(rendered["conn reuse %"]) > 0

        charts = chromium(tmp_path, "--window-size=1200,900", "--virtual-time-budget=5000",
                          f"--screenshot={ARTIFACTS / 'webui_llm_charts.png'}", "--dump-dom",
                          f"{base}/fourfold/charts")
        assert charts.returncode == 0, charts.stderr[-2000:]
        for series in ("p50", "p95", "p99", "output tokens/s", "stalls"):
            assert f'data-series="{series}"' in charts.stdout, f"no {series} line drawn"
        assert '<option value="Aggregated">Aggregated</option>' in charts.stdout
        assert '<span id="note"></span>' in charts.stdout            # the page reached charts.json
    finally:
        out = finish(proc, terminate=True)
    assert proc.returncode == 0, out[-3000:]
