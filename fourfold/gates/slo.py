"""SLO gates: parse a spec, judge a run's summary against it (pure: no Locust, no files).

A spec is a list of clauses separated by commas, semicolons or newlines::

    ttft_p95<=450ms, ttft_p99<=1400ms, interruption_rate<0.5%, similarity_mean>=0.75

    clause  = metric ["@" scope] op number [unit]
    op      = <=  <  >=  >          (also ≤ ≥)
    scope   = a level:scenario ("l1:saturation"); without one the clause judges the Aggregated row

Metrics (the names of docs/metrics.md; thresholds are stored in the canonical unit):

- latency ``{ttft,ttfb,itl,tpot,e2e,queue}_{p50,p90,p95,p99,mean,min,max}``: ``ms`` (default) or ``s``;
- rates ``error_rate``, ``interruption_rate``, ``stall_rate``, ``conn_reuse``, ``goodput_ratio``:
  ``%`` or a fraction in [0, 1];
- throughput ``output_tps`` (tokens/s), ``request_rps``, ``goodput_rps`` (requests/s): no unit;
- quality floors ``similarity_mean``, ``similarity_p5``, ``similarity_p50``, ``char_f1_mean``,
  ``structure_compliance``, the ceilings ``fact_error_rate`` (L3) and ``low_confidence_share``: read
  from the summary's ``quality`` block, which ``fourfold score`` adds after the run; ``%`` or a fraction.
- server telemetry ``gpu_util_{mean,max}``, ``gpu_mem_bw_util_{mean,max}``, ``kv_cache_usage_{mean,max}``:
  read from the summary's ``server_metrics`` block (L1's sampler, once per ``--sample-interval``); ``%`` or a
  fraction, stored as a fraction like the rates. When both the target's /metrics (``server.``) and nvidia-smi
  (``nvidia_smi.``) give one, the larger value is judged (the busier reading: a ceiling is not met by the
  quieter source). Run-wide: no ``@scope``.

:func:`evaluate` gives one :class:`Verdict` per clause. A value that is missing (no requests, no
ok request, nothing scored) is never a pass: the status says why. In a live run quality clauses
are ``skipped`` (scoring happens after the run: ``fourfold check`` judges them); ``fourfold
check`` on an unscored run reports them ``not_scored``, which fails the gate.
"""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from fourfold.errors import SLOSpecError
from fourfold.measure.metric_names import TELEMETRY_CANONICAL, names_where
from fourfold.measure.metrics import SLO_METRICS
from fourfold.measure.record import FAILURE_CLASSES

# the names a clause may use, from the metric registry (measure.metric_names): the latencies,
# shares and per-second rates of summary.json's groups, and the quality block's scores
LATENCY_BASES = tuple(m.short for m in names_where("summary", "distribution", "ms"))
LATENCY_STATS = ("p50", "p90", "p95", "p99", "mean", "min", "max")
RATE_METRICS = tuple(m.name for m in names_where("summary", "ratio"))
THROUGHPUT_METRICS = {m.name: m.unit for m in names_where("summary", "rate")}
QUALITY_METRICS = tuple(f"{m.short}_{stat}" if m.kind == "distribution" else m.name
                        for m in names_where("quality") if m.kind != "count" for stat in (m.stats or ("",)))
TELEMETRY_METRICS = {f"{short}_{stat}": (canonical, stat) for short, canonical in TELEMETRY_CANONICAL.items()
                     for stat in ("mean", "max")}      # SLO name -> (sampler's canonical name, statistic)
# summary.json's cost block (measure.cost): the run's figures, each in its own unit (prices are options)
COST_METRICS = {m.name: m.unit for m in names_where("cost") if not m.name.startswith("price_")}
TELEMETRY_SOURCES = ("server", "nvidia_smi")          # the sampler's row prefixes: --metrics-url, nvidia-smi
CLASS_RATE_METRICS = tuple(f"error_rate.{name}" for name in sorted(FAILURE_CLASSES))   # one class's share
LOWER_QUALITY = ("fact_error_rate", "low_confidence_share")     # bad answers' shares: a ceiling, not a floor
AGGREGATED = "Aggregated"
PASS_EXIT_CODE, MISS_EXIT_CODE = 0, 3

Kind = Literal["latency", "rate", "throughput", "quality", "telemetry", "cost"]
Status = Literal["pass", "miss", "no_data", "not_scored", "skipped"]
FAILING: frozenset[str] = frozenset({"miss", "no_data", "not_scored"})

_OPS: dict[str, Callable[[float, float], bool]] = {
    "<=": operator.le, "<": operator.lt, ">=": operator.ge, ">": operator.gt}
_OP_ALIASES = {"≤": "<=", "≥": ">=", "=<": "<=", "=>": ">="}
_CLAUSE_RE = re.compile(
    r"^(?P<metric>[A-Za-z0-9_]+(?:\.[A-Za-z0-9_]+)?)\s*(?:@\s*(?P<scope>[^\s<>=≤≥]+))?\s*"
    r"(?P<op><=|>=|=<|=>|<|>|≤|≥)\s*"
    r"(?P<number>[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?)\s*(?P<unit>[A-Za-z%/]+)?$")
_SPLIT_RE = re.compile(r"[,;\n]")
# the per-request thresholds of goodput come from these statistics' upper bounds
_GOODPUT_STATS = ("p50", "p90", "p95", "p99", "max")


def metric_kind(metric: str) -> Kind | None:
    base, _, stat = metric.rpartition("_")
    if base in LATENCY_BASES and stat in LATENCY_STATS:
        return "latency"
    if metric in RATE_METRICS or metric in CLASS_RATE_METRICS:
        return "rate"
    if metric in THROUGHPUT_METRICS:
        return "throughput"
    if metric in QUALITY_METRICS:
        return "quality"
    if metric in TELEMETRY_METRICS:
        return "telemetry"
    if metric in COST_METRICS:
        return "cost"
    return None


def valid_metrics_text() -> str:
    """The metric names a spec may use, for error messages and --help."""
    return (f"latency {{{','.join(LATENCY_BASES)}}}_{{{','.join(LATENCY_STATS)}}} (ms or s); "
            f"rates {', '.join(RATE_METRICS)}, error_rate.<class> for a class of "
            f"{', '.join(sorted(FAILURE_CLASSES))} (% or a fraction); "
            f"throughput {', '.join(THROUGHPUT_METRICS)} (per second, no unit); "
            f"quality {', '.join(QUALITY_METRICS)} (% or a fraction, after `fourfold score`); "
            f"server telemetry {', '.join(TELEMETRY_METRICS)} (% or a fraction, no @scope); "
            f"cost {', '.join(COST_METRICS)} (USD, J, W: in the metric's unit, no @scope)")


def _num(value: float) -> str:
    return f"{round(value, 9):.12g}"


@dataclass(frozen=True)
class SLO:
    """One clause: ``metric [@scope] op threshold``; the threshold is in the canonical unit
    (ms for latency, a fraction for rates and quality, per second for throughput)."""

    metric: str
    op: str
    threshold: float
    scope: str = ""

    @property
    def kind(self) -> Kind:
        kind = metric_kind(self.metric)
        assert kind is not None
        return kind

    @property
    def target(self) -> str:
        """``scope`` or "Aggregated" ("server" for telemetry: the run's server, not a group of requests)."""
        kind = metric_kind(self.metric)
        return "server" if kind == "telemetry" else "run" if kind == "cost" else self.scope or AGGREGATED

    def format_value(self, value: float | None) -> str:
        if value is None:
            return "-"
        if self.kind == "latency":
            return f"{value:.1f} ms"
        if self.kind in ("rate", "telemetry"):
            return f"{100 * value:.2f} %"
        if self.kind == "throughput":
            return f"{value:.2f} {THROUGHPUT_METRICS[self.metric]}"
        if self.kind == "cost":
            return f"{value:.6g} {COST_METRICS[self.metric]}"
        return f"{value:.4f}"

    @property
    def label(self) -> str:
        """Human form, e.g. ``ttft_p95 <= 450 ms`` or ``interruption_rate < 0.5 %``."""
        scope = f"@{self.scope}" if self.scope else ""
        return f"{self.metric}{scope} {self.op} {self._threshold_text(' ')}"

    @property
    def clause(self) -> str:
        """Compact form that :func:`parse_spec` reads back to an equal SLO."""
        scope = f"@{self.scope}" if self.scope else ""
        return f"{self.metric}{scope}{self.op}{self._threshold_text('')}"

    def _threshold_text(self, sep: str) -> str:
        if self.kind == "latency":
            return f"{_num(self.threshold)}{sep}ms"
        if self.kind in ("rate", "telemetry"):
            return f"{_num(100 * self.threshold)}{sep}%"
        return _num(self.threshold)

    def met_by(self, value: float) -> bool:
        return _OPS[self.op](value, self.threshold)


@dataclass(frozen=True)
class Verdict:
    slo: SLO
    status: Status
    measured: float | None = None
    reason: str = ""

    @property
    def failed(self) -> bool:
        return self.status in FAILING

    @property
    def message(self) -> str:
        """One line naming the SLO, the measured value and what went wrong."""
        measured = self.slo.format_value(self.measured)
        note = f" ({self.reason})" if self.reason else ""
        if self.status == "pass":
            return f"{self.slo.label} met at {self.slo.target}: measured {measured}{note}"
        if self.status == "miss":
            return f"{self.slo.label} missed at {self.slo.target}: measured {measured}{note}"
        return f"{self.slo.label} at {self.slo.target}: {self.reason}"

    def to_dict(self) -> dict[str, Any]:
        return {"slo": self.slo.clause, "metric": self.slo.metric, "scope": self.slo.target,
                "op": self.slo.op, "threshold": self.slo.threshold, "measured": self.measured,
                "status": self.status, "passed": self.status == "pass", "reason": self.reason}


# ---- parsing ----
def parse_clause(text: str, *, where: str = "--slo") -> SLO:
    """One clause (``ttft_p95<=450ms``) -> SLO; a malformed one raises SLOSpecError naming it."""
    clause = text.strip()
    match = _CLAUSE_RE.match(clause)
    if match is None:
        raise SLOSpecError(f"{where}: cannot read {clause!r}: expected METRIC[@level:scenario] OP "
                           f"NUMBER[UNIT], e.g. 'ttft_p95<=450ms' or 'interruption_rate<0.5%'")
    metric, scope = match["metric"].lower(), match["scope"] or ""
    op = _OP_ALIASES.get(match["op"], match["op"])
    return make_slo(metric, op, float(match["number"]), (match["unit"] or "").lower(), scope,
                    where=f"{where}: {clause!r}")


def make_slo(metric: str, op: str, number: float, unit: str = "", scope: str = "", *,
             where: str = "--slo") -> SLO:
    """Validate one SLO's parts and convert the threshold to the canonical unit."""
    kind = metric_kind(metric)
    if kind is None:
        raise SLOSpecError(f"{where}: unknown metric {metric!r}; valid metrics: {valid_metrics_text()}")
    if op not in _OPS:
        raise SLOSpecError(f"{where}: unknown comparison {op!r}; use <=, <, >= or >")
    if not math.isfinite(number) or number < 0:
        raise SLOSpecError(f"{where}: the threshold must be a finite number >= 0, got {number!r}")
    if scope and (":" not in scope or scope.startswith(":")):
        raise SLOSpecError(f"{where}: scope {scope!r} should be level:scenario, e.g. l1:saturation")
    if kind == "latency":
        if unit not in ("", "ms", "s"):
            raise SLOSpecError(f"{where}: {metric} is a latency: give ms or s, not {unit!r}")
        threshold = number * 1000 if unit == "s" else number
    elif kind in ("rate", "quality", "telemetry"):
        if kind == "telemetry" and scope:
            raise SLOSpecError(f"{where}: {metric} is measured on the server for the whole run; "
                               f"drop @{scope}")
        if unit == "%":
            threshold = number / 100
        elif unit:
            raise SLOSpecError(f"{where}: {metric} is a fraction: give % or a number in [0, 1], not {unit!r}")
        else:
            threshold = number
        if threshold > 1:
            raise SLOSpecError(f"{where}: {metric} is a fraction in [0, 1], got {number!r} "
                               f"(did you mean {_num(number)}%?)")
    elif kind == "cost":
        if scope:
            raise SLOSpecError(f"{where}: {metric} is the whole run's; drop @{scope}")
        if unit and unit != COST_METRICS[metric].lower():
            raise SLOSpecError(f"{where}: {metric} is in {COST_METRICS[metric]}: give that or no unit, "
                               f"not {unit!r}")
        threshold = number
    else:
        if unit and unit != THROUGHPUT_METRICS[metric].lower():     # pulse_hz<2hz: its own unit is fine
            raise SLOSpecError(f"{where}: {metric} is per second and takes no unit, got {unit!r}")
        threshold = number
    return SLO(metric, op, float(threshold), scope)


def parse_spec(text: str, *, where: str = "--slo") -> list[SLO]:
    """``"ttft_p95<=450ms, e2e_p99<=1400ms"`` -> [SLO, SLO]. Empty clauses are skipped; an empty
    spec, a malformed clause or the same metric/scope/comparison twice raise SLOSpecError."""
    slos = [parse_clause(part, where=where) for part in _SPLIT_RE.split(text) if part.strip()]
    if not slos:
        raise SLOSpecError(f"{where}: the SLO spec is empty; e.g. 'ttft_p95<=450ms,interruption_rate<0.5%'")
    return check_unique(slos, where=where)


def check_unique(slos: Sequence[SLO], *, where: str) -> list[SLO]:
    seen: set[tuple[str, str, str]] = set()
    for slo in slos:
        key = (slo.metric, slo.scope, slo.op)
        if key in seen:
            raise SLOSpecError(f"{where}: {slo.metric}{'@' + slo.scope if slo.scope else ''} {slo.op} "
                               "is given twice; keep one")
        seen.add(key)
    return list(slos)


def parse_table(data: dict[str, Any], *, where: str) -> list[SLO]:
    """The ``[slo]`` table of an SLO file (see gates.gate): ``metric = "<= 450 ms"`` or a bare
    number (the metric's natural direction: <= for latencies and rates of bad events, >= for
    throughput, quality, conn_reuse and goodput), and sub-tables ``["level:scenario"]``."""
    slos: list[SLO] = []
    for key, value in data.items():
        if isinstance(value, dict):
            for metric, inner in value.items():
                if isinstance(inner, dict):
                    raise SLOSpecError(f"{where}: [slo.{key!r}.{metric}] nests too deep; "
                                       "use [slo] and [slo.\"level:scenario\"] tables")
                slos.append(_table_entry(str(metric), inner, scope=str(key), where=where))
        else:
            slos.append(_table_entry(str(key), value, scope="", where=where))
    if not slos:
        raise SLOSpecError(f"{where}: the [slo] table is empty")
    return check_unique(slos, where=where)


def _table_entry(metric: str, value: Any, *, scope: str, where: str) -> SLO:
    name = f"{metric}@{scope}" if scope else metric
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise SLOSpecError(f"{where}: {name} = {value!r}: expected a string like \"<= 450 ms\" or a number")
    if isinstance(value, str):
        return parse_clause(f"{name} {value}", where=where)
    kind = metric_kind(metric.lower())
    higher_is_better = (kind in ("throughput", "quality") and metric.lower() not in LOWER_QUALITY) or \
        metric in ("conn_reuse", "goodput_ratio")
    higher_is_better = higher_is_better and metric.lower() != "pulse_hz"     # a pulse frequency is a ceiling
    return make_slo(metric.lower(), ">=" if higher_is_better else "<=", float(value), "", scope,
                    where=f"{where}: {name}")


def to_spec(slos: Iterable[SLO]) -> str:
    """The inline spec of ``slos`` (``parse_spec(to_spec(s)) == s``)."""
    return ",".join(slo.clause for slo in slos)


def goodput_thresholds(slos: Iterable[SLO]) -> dict[str, float]:
    """Per-request limits for goodput (measure.stats ``slo_ms``): for each latency metric the
    tightest upper bound (``<``/``<=``) the spec puts on its percentiles or max, at any scope.
    A request is "good" when it is ok and within every limit (``itl_ms``: its largest gap)."""
    limits: dict[str, float] = {}
    for slo in slos:
        if slo.kind != "latency" or slo.op not in ("<", "<="):
            continue
        base, _, stat = slo.metric.rpartition("_")
        name = f"{base}_ms"
        if stat in _GOODPUT_STATS and name in SLO_METRICS:
            limits[name] = min(limits.get(name, math.inf), slo.threshold)
    return limits


__all__ = ["AGGREGATED", "SLO", "SLOSpecError", "Verdict", "goodput_thresholds", "make_slo", "metric_kind",
           "parse_clause", "parse_spec", "parse_table", "to_spec", "valid_metrics_text"]
