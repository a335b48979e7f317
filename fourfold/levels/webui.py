"""The "LLM" tab in Locust's web UI, its CSV, a live SLO tab and a charts page.

``register(environment)`` (called from the ``init`` listener when ``environment.web_ui`` exists:
the local runner or the master) sets Locust's extension points (the web UI's template arguments,
through :mod:`fourfold.adapters.locust`):

- ``extended_tabs`` / ``extended_tables``: a tab "LLM" (key ``llm``, URL ``/?tab=llm``) with one
  row per level:scenario and an Aggregated row: TTFT p50/p95/p99, ITL p50/p99, TPOT p50, E2E
  p50/p95/p99, stream rhythm (jitter p50 and pulse frequency, 0 = smooth: summary.json's
  ``jitter_ms`` p50 and ``pulse_hz``), output tokens/s, stall, interruption and error rates,
  connection reuse and goodput; a tab "LLM SLO" (key ``slo``, ``/?tab=slo``) with the ``--slo``
  verdicts on the data so far; a tab "LLM level" (key ``level``, ``/?tab=level``) with the level's panels.
  The rows reach the page as ``extended_stats`` appended to ``/stats/requests`` (an
  ``after_request`` hook), so they refresh with Locust's own table. On the master they are the
  workers' merged stats (workers report every 3 s).
- ``extended_csv_files``: ``./fourfold/llm.csv`` (the same table, unrounded, rates as fractions)
  and a link to ``./fourfold/charts``.
- routes on ``web_ui.app``: ``/fourfold/llm.csv``, ``/fourfold/llm.json`` (rows and verdicts),
  ``/fourfold/charts`` (a self-contained page, :mod:`fourfold.levels.webui_page`) and
  ``/fourfold/charts.json``: the per-second series of ``LLMStats.series()`` (output tokens,
  finished and failed requests, stalls) and TTFT p50/p95/p99 over a sliding window, computed
  every ``SAMPLE_INTERVAL_S`` from the difference of the cumulative histograms; which optional
  charts have a series (``shown``) and one colour per L3 stage (``stage_colors``, as in levels.json).

The frontend camel-cases every key of ``/stats/requests`` (``ttft_p50`` -> ``ttftP50``), so the
tab's rows and table structure use camelCase keys; the CSV keeps snake_case.
"""

from __future__ import annotations

import csv
import io
import json
import logging
import re
import time
from collections import deque
from collections.abc import Iterable
from typing import Any

import gevent
from flask import Response, request

from fourfold.adapters.flask import drop_form_fields
from fourfold.adapters.locust import add_web_ui_tabs, hide_secret_defaults_in_start_form
from fourfold.gates.slo import Verdict
from fourfold.levels.livequality import QUALITY_COLUMNS, QUALITY_TAB_KEY, live_block, quality_stats
from fourfold.levels.options import SECRET_OPTIONS
from fourfold.levels.runtime import find_runtime, get_runtime, live_blocks
from fourfold.levels.slogate import get_gate, live_verdicts
from fourfold.levels.state import state_of
from fourfold.levels.webui_page import CHARTS_HTML
from fourfold.levels.webui_panels import has_series, panel_rows, series_columns, stage_colors, stage_means
from fourfold.measure.histogram import LogHistogram
from fourfold.measure.metric_names import summary_value
from fourfold.measure.stats import TOTAL_LEVEL

log = logging.getLogger("fourfold")
TAB_KEY, SLO_TAB_KEY, LEVEL_TAB_KEY = "llm", "slo", "level"
SAMPLE_INTERVAL_S, WINDOW_S, MAX_POINTS = 2.0, 10.0, 1800
MASTER_LAG_S = 4          # workers report every 3 s: the master's last seconds are incomplete

# (csv key, tab title, kind): kind says how the tab shows it (ms, pct, num, hz, int, text)
COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("name", "level:scenario", "text"),
    ("requests", "requests", "int"),
    ("failures", "failures", "int"),
    ("ttft_p50_ms", "TTFT p50 ms", "ms"),
    ("ttft_p95_ms", "TTFT p95 ms", "ms"),
    ("ttft_p99_ms", "TTFT p99 ms", "ms"),
    ("ttfo_p50_ms", "TTFO p50 ms", "ms"),        # the first answer token (reasoning left out)
    ("ttfo_p95_ms", "TTFO p95 ms", "ms"),
    ("itl_p50_ms", "ITL p50 ms", "ms"),
    ("itl_p99_ms", "ITL p99 ms", "ms"),
    ("itl_token_p50_ms", "ITL/token p50 ms", "ms"),    # a chunk of k tokens: k gaps of gap / k
    ("multi_token_chunk_share", "multi-token chunks %", "pct"),
    ("tpot_p50_ms", "TPOT p50 ms", "ms"),
    ("e2e_p50_ms", "E2E p50 ms", "ms"),
    ("e2e_p95_ms", "E2E p95 ms", "ms"),
    ("e2e_p99_ms", "E2E p99 ms", "ms"),
    ("jitter_p50_ms", "jitter p50 ms", "ms"),
    ("pulse_hz", "pulse Hz", "hz"),
    ("output_tps", "output tok/s", "num"),
    ("stall_rate", "stall %", "pct"),
    ("interruption_rate", "interrupted %", "pct"),
    ("error_rate", "failed %", "pct"),
    ("conn_reuse", "conn reuse %", "pct"),
    ("reasoning_share", "reasoned %", "pct"),
    ("cache_hit_share", "prefix cache hit %", "pct"),
    ("token_discrepancy_share", "token count mismatch %", "pct"),
    ("tool_call_valid_share", "tool calls valid %", "pct"),
    ("goodput_rps", "goodput req/s", "num"),
)
_PERCENTILE_KEY = re.compile(r"^([a-z0-9_]+)_(p\d+)_ms$")
SLO_COLUMNS = (("slo", "SLO"), ("scope", "scope"), ("measured", "measured"), ("verdict", "verdict"))
LEVEL_COLUMNS = (("panel", "panel"), ("metric", "metric"), ("value", "value"))


# ---- pure: rows ----
def camel(key: str) -> str:
    """``ttft_p50_ms`` -> ``ttftP50Ms`` (what Locust's frontend does to every JSON key)."""
    return re.sub(r"_([a-z0-9])", lambda m: m.group(1).upper(), key)


def group_row(group: dict[str, Any]) -> dict[str, Any]:
    """One GroupStats summary as a flat row keyed like COLUMNS (unrounded; rates as fractions)."""
    name = f"{group['level']}:{group['scenario']}" if group.get("scenario") else str(group["level"])
    row: dict[str, Any] = {"name": name}
    for key, _, _ in COLUMNS[1:]:
        row[key] = summary_value(group, _PERCENTILE_KEY.sub(r"\1_\2", key))   # ttft_p50_ms -> ttft_p50
    return row


def table_rows(summary: dict[str, Any]) -> list[dict[str, Any]]:
    """Rows for the tab and the CSV: one per level:scenario, then Aggregated."""
    return [group_row(g) for g in summary.get("groups", [])] + [group_row(summary["total"])]


def _show(value: Any, kind: str) -> Any:
    if value is None:
        return ""
    if kind == "ms":
        return f"{value:.1f}"
    if kind == "pct":
        return f"{100 * value:.2f}"
    if kind == "num":
        return f"{value:.1f}"
    if kind == "hz":
        return f"{value:.2f}"
    return value


def ui_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows as the tab shows them: camelCase keys, ms to 0.1, rates in percent."""
    return [{camel(key): _show(row.get(key), kind) for key, _, kind in COLUMNS} for row in rows]


def slo_rows(verdicts: list[Verdict], error: str = "") -> list[dict[str, Any]]:
    if error:
        return [{"slo": "--slo is malformed", "scope": "", "measured": "", "verdict": error}]
    if not verdicts:
        return [{"slo": "no --slo given", "scope": "", "measured": "", "verdict": ""}]
    return [{"slo": v.slo.label, "scope": v.slo.target, "measured": v.slo.format_value(v.measured),
             "verdict": v.status if not v.reason else f"{v.status}: {v.reason}"} for v in verdicts]


def csv_text(rows: list[dict[str, Any]]) -> str:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=[key for key, _, _ in COLUMNS], lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: "" if v is None else v for k, v in row.items()})
    return out.getvalue()


def histogram_delta(now: LogHistogram, before: LogHistogram | None) -> LogHistogram:
    """The samples added to a cumulative histogram between two snapshots (``now - before``);
    min/max are the bucket representatives of the lowest and highest non-empty bucket."""
    if before is None or before.count == 0:
        return now.copy()
    buckets = {k: n - before.buckets.get(k, 0) for k, n in now.buckets.items()}
    buckets = {k: n for k, n in buckets.items() if n > 0}
    zero = max(0, now.zero_count - before.zero_count)
    count = sum(buckets.values()) + zero
    wire: dict[str, Any] = {"a": now.alpha, "n": count, "s": max(0.0, now.sum - before.sum),
                            "b": buckets, "z": zero}
    if count:
        lo = 0.0 if zero else now.representative(min(buckets))
        hi = now.representative(max(buckets)) if buckets else 0.0
        wire["lo"], wire["hi"] = lo, hi
    return LogHistogram.from_wire(wire)


def trim_series(series: dict[str, list[Any]], before_s: int) -> dict[str, list[Any]]:
    """The columns of a per-second series for the seconds before ``before_s`` only."""
    keep = sum(1 for t_s in series.get("t_s", ()) if t_s < before_s)
    return {name: values[:keep] for name, values in series.items()}


class TTFTWindow:
    """TTFT p50/p95/p99 per key over a sliding window, from cumulative histograms sampled at
    intervals (a master's data arrive as the workers report, every 3 s: the window smooths that)."""

    def __init__(self, window_s: float = WINDOW_S, max_points: int = MAX_POINTS) -> None:
        self.window_s = window_s
        self.snapshots: deque[tuple[float, dict[str, LogHistogram]]] = deque()
        self.points: deque[tuple[float, dict[str, tuple[float | None, ...]]]] = deque(maxlen=max_points)

    def sample(self, now_s: float, hists: dict[str, LogHistogram]) -> None:
        while len(self.snapshots) > 1 and self.snapshots[1][0] <= now_s - self.window_s:
            self.snapshots.popleft()
        base = self.snapshots[0][1] if self.snapshots else {}
        point: dict[str, tuple[float | None, ...]] = {}
        for key, hist in hists.items():
            window = histogram_delta(hist, base.get(key))
            point[key] = (*window.quantiles((0.50, 0.95, 0.99)), float(window.count))
        self.points.append((now_s, point))
        self.snapshots.append((now_s, {key: hist.copy() for key, hist in hists.items()}))

    def columns(self, key: str) -> dict[str, list[Any]]:
        cols: dict[str, list[Any]] = {"t_s": [], "p50": [], "p95": [], "p99": [], "n": []}
        for t_s, point in self.points:
            p50, p95, p99, n = point.get(key, (None, None, None, 0.0))
            cols["t_s"].append(round(t_s, 3))
            for name, value in (("p50", p50), ("p95", p95), ("p99", p99)):
                cols[name].append(None if not n or value is None else round(value, 2))
            cols["n"].append(int(n or 0))
        return cols


def ttft_histograms(stats: Any) -> dict[str, LogHistogram]:
    """``{"l1:saturation": hist, ..., "Aggregated": merged}`` of an LLMStats' TTFT histograms."""
    hists: dict[str, LogHistogram] = {}
    total = LogHistogram(stats.alpha)
    for (level, scenario), group in sorted(stats.groups.items()):
        hist = group.hists["ttft_ms"]
        hists[f"{level}:{scenario}" if scenario else level] = hist
        total.merge(hist)
    hists[TOTAL_LEVEL] = total
    return hists


# ---- the shell: Locust's web UI ----
class LLMWebUI:
    def __init__(self, environment: Any) -> None:
        self.environment = environment
        self.window = TTFTWindow()
        self._greenlet: gevent.Greenlet | None = None
        self.test_seen = 0                  # the runtime's test count the window belongs to
        self.test_started_s: float | None = None
        self.telemetry: list[dict[str, Any]] = []   # the sampler's rows of this test (kept after its stop)
        self.stage_points: deque[dict[str, Any]] = deque(maxlen=MAX_POINTS)   # L3 stage means by time
        self.stage_names: list[str] = []     # every stage seen, in the order first seen (its colour)

    @property
    def stats(self) -> Any:
        return get_runtime(self.environment).stats

    def rows(self) -> list[dict[str, Any]]:
        return table_rows(self.stats.summary())

    def extended_stats(self) -> list[dict[str, Any]]:
        gate = get_gate(self.environment)
        rows = self.rows()
        return [{"key": TAB_KEY, "data": ui_rows(rows)},
                {"key": SLO_TAB_KEY, "data": slo_rows(live_verdicts(self.environment), gate.error)},
                {"key": LEVEL_TAB_KEY, "data": self.levels(rows)["panels"]}]

    def levels(self, rows: list[dict[str, Any]] | None = None) -> dict[str, Any]:
        """``/fourfold/levels.json``: the loaded level's blocks so far (on a master: merged from the
        workers), from the functions that write them into summary.json, and the panels' rows."""
        runtime = get_runtime(self.environment)
        total = (rows if rows is not None else self.rows())[-1]
        blocks = live_blocks(self.environment)
        means = stage_means(blocks.get("rag") or {})
        return {"level": runtime.level, "test": runtime.tests, "finished": runtime.finished,
                "state": getattr(self.environment.runner, "state", ""), "blocks": blocks, "stream": total,
                "stage_means_ms": means, "stage_colors": self._stage_colors(means),
                "panels": panel_rows(blocks, total)}

    def charts_data(self, key: str) -> dict[str, Any]:
        stats = self.stats
        keys = [f"{lv}:{sc}" if sc else lv for lv, sc in sorted(stats.groups)] + [TOTAL_LEVEL]
        key = key if key in keys else TOTAL_LEVEL
        if key == TOTAL_LEVEL:
            series = stats.series()
        else:
            level, _, scenario = key.partition(":")
            series = stats.series(level, scenario)
        runner = self.environment.runner
        state = getattr(runner, "state", "")
        if state in ("spawning", "running"):   # leave out the seconds still filling up
            series = trim_series(series, int(time.time()) - (MASTER_LAG_S if self._is_master() else 0))
        telemetry, stages = series_columns(self.telemetry), series_columns(list(self.stage_points))
        return {"keys": keys, "key": key, "state": state, "t0_s": self.test_started_s,
                "window_s": self.window.window_s, "stall_threshold_ms": stats.stall_threshold_ms,
                "note": "merged from the workers' reports (every 3 s)" if self._is_master() else "",
                "series": series, "ttft_window": self.window.columns(key),
                "telemetry": telemetry, "stages": stages,
                "shown": {"telemetry": has_series(telemetry), "stages": has_series(stages)},
                "stage_colors": self._stage_colors(stages)}

    def _stage_colors(self, names: Iterable[str]) -> dict[str, str]:
        """The colours of every stage seen so far, ``names`` added (a new stage goes last, so a colour
        never changes): one per stage on the whole page, levels.json and charts.json alike."""
        self.stage_names += [name for name in names if name != "t_s" and name not in self.stage_names]
        return stage_colors(self.stage_names)

    def _sample_levels(self, now_s: float) -> None:
        """Each sample: the sampler's rows so far, and the L3 stage means (from the live rag block)."""
        runtime = get_runtime(self.environment)
        if runtime.sampler is not None:
            self.telemetry = runtime.sampler.series()
        rag = live_blocks(self.environment).get("rag") if runtime.extras.has_blocks else None
        means = stage_means(rag or {})
        if any(v is not None for v in means.values()):
            self.stage_points.append({"t_s": round(now_s, 3), **means})
            self._stage_colors(means)          # stages take their colours in the block's order

    def _is_master(self) -> bool:
        return bool(getattr(find_runtime(self.environment), "is_master", False))

    def _sample_forever(self) -> None:
        last_count = 0
        while True:
            gevent.sleep(SAMPLE_INTERVAL_S)
            try:
                if not self._follow_test():
                    continue
                hists = ttft_histograms(self.stats)
                count = hists[TOTAL_LEVEL].count
                running = getattr(self.environment.runner, "state", "") in ("spawning", "running")
                if running or count != last_count:
                    self.window.sample(time.time(), hists)
                    self._sample_levels(time.time())
                    last_count = count
            except Exception:  # noqa: BLE001 - a chart sample must never end the run
                log.exception("fourfold: sampling the TTFT window for the charts failed")

    def _follow_test(self) -> bool:
        """A new test (the runtime's statistics are new): a new window, its axis from the test's
        start. False before the first test: nothing to sample yet."""
        runtime = get_runtime(self.environment)
        if runtime.tests != self.test_seen:
            self.test_seen = runtime.tests
            self.window = TTFTWindow(self.window.window_s)
            self.telemetry, self.stage_points = [], deque(maxlen=MAX_POINTS)
            self.test_started_s = runtime.started_at or time.time()
        return self.test_seen > 0

    def start(self) -> None:
        if self._greenlet is None:
            self._greenlet = gevent.spawn(self._sample_forever)


def _protect_secrets(web_ui: Any, base: str) -> None:
    """Keep ``--api-key`` (or ``FOURFOLD_API_KEY``) out of the page: Locust puts every option's
    value into the HTML of the start form, secrets too (a password field, but in the page source).
    The form shows the field empty; submitted empty, the key given at start-up stays in force."""

    hide_secret_defaults_in_start_form(web_ui)

    @web_ui.app.before_request
    def _keep_secrets_given_at_start() -> None:
        if request.method == "POST" and request.path == f"{base}/swarm":
            form = request.form
            empty = {name for name in SECRET_OPTIONS if name in form and not form.get(name)}
            if empty:
                drop_form_fields(empty)


def form_list_values(values: list[str]) -> list[str]:
    """A repeatable option's values as the start form sends them (one field, comma-separated)."""
    return [part.strip() for value in values for part in value.split(",") if part.strip()]


def _read_list_options(web_ui: Any, base: str) -> None:
    """Locust's ``/swarm`` converts a list-valued option by the type of its current elements, and an
    empty list (``--metrics-url`` not given) reads as a list of ints: any value, even the empty field
    the browser always sends, is then a 500. Read those fields here, as strings, before Locust does."""

    @web_ui.app.before_request
    def _list_options_as_strings() -> None:
        options = web_ui.environment.parsed_options
        if request.method != "POST" or request.path != f"{base}/swarm" or options is None:
            return
        form = request.form
        lists = {name for name in form
                 if name != "user_classes" and isinstance(getattr(options, name, None), list)}
        for name in lists:
            setattr(options, name, form_list_values(form.getlist(name)))
        if lists:
            drop_form_fields(lists)


def register(environment: Any) -> LLMWebUI | None:
    """Add the LLM tab, the SLO tab, the CSV and the charts page to ``environment.web_ui``."""
    web_ui = getattr(environment, "web_ui", None)
    if web_ui is None or state_of(environment).get(LLMWebUI) is not None:
        return state_of(environment).get(LLMWebUI)

    ui = state_of(environment).put(LLMWebUI(environment))
    structure = [{"key": camel(key), "title": title} for key, title, _ in COLUMNS]

    add_web_ui_tabs(
        web_ui,
        tabs=[{"title": "LLM", "key": TAB_KEY}, {"title": "LLM SLO", "key": SLO_TAB_KEY},
              {"title": "LLM level", "key": LEVEL_TAB_KEY}, {"title": "LLM quality", "key": QUALITY_TAB_KEY}],
        tables=[{"key": TAB_KEY, "structure": structure},
                {"key": SLO_TAB_KEY, "structure": [{"key": k, "title": t} for k, t in SLO_COLUMNS]},
                {"key": LEVEL_TAB_KEY, "structure": [{"key": k, "title": t} for k, t in LEVEL_COLUMNS]},
                {"key": QUALITY_TAB_KEY, "structure": [{"key": k, "title": t} for k, t in QUALITY_COLUMNS]}],
        csv_files=[{"href": "./fourfold/llm.csv", "title": "Download LLM metrics CSV (fourfold)"},
                   {"href": "./fourfold/charts", "title": "LLM charts over time (fourfold)"}])
    base = (getattr(environment.parsed_options, "web_base_path", "") or "").rstrip("/")
    app, auth = web_ui.app, web_ui.auth_required_if_enabled
    _protect_secrets(web_ui, base)
    _read_list_options(web_ui, base)

    @app.after_request
    def _extend_request_stats(response: Response) -> Response:
        if request.path == f"{base}/stats/requests" and response.status_code == 200 and response.is_json:
            try:
                data = json.loads(response.get_data())
                data["extended_stats"] = ui.extended_stats() + quality_stats(environment)
                response.set_data(json.dumps(data))
            except Exception:  # noqa: BLE001 - never break Locust's own table
                log.exception("fourfold: adding the LLM rows to /stats/requests failed")
        return response

    def llm_csv() -> Response:
        return Response(csv_text(ui.rows()), mimetype="text/csv",
                        headers={"Content-Disposition": "attachment; filename=fourfold_llm.csv"})

    def llm_json() -> Response:
        gate = get_gate(environment)
        body = {"rows": ui.rows(), "slo": [v.to_dict() for v in live_verdicts(environment)],
                "slo_error": gate.error, "quality_live": live_block(environment)}
        return Response(json.dumps(body), mimetype="application/json")

    def levels_json() -> Response:
        return Response(json.dumps(ui.levels()), mimetype="application/json")

    def charts() -> Response:
        return Response(CHARTS_HTML, mimetype="text/html")

    def charts_json() -> Response:
        return Response(json.dumps(ui.charts_data(request.args.get("key", ""))), mimetype="application/json")

    for path, view in (("llm.csv", llm_csv), ("llm.json", llm_json), ("charts", charts),
                       ("charts.json", charts_json), ("levels.json", levels_json)):
        app.add_url_rule(f"{base}/fourfold/{path}", endpoint=f"fourfold_{view.__name__}",
                         view_func=auth(view))
    ui.start()
    log.info("fourfold: LLM tab at /?tab=%s, charts at %s/fourfold/charts", TAB_KEY, base)
    return ui


__all__ = ["COLUMNS", "LLMWebUI", "TTFTWindow", "csv_text", "histogram_delta", "register", "table_rows",
           "ui_rows"]
