"""SLO verdicts: a run's summary judged against parsed SLOs (pure: no Locust, no files).

:func:`evaluate` gives one :class:`~fourfold.gates.slo.Verdict` per SLO: the value measured in the
SLO's scope (a ``level:scenario`` group, or Aggregated), its status (pass, miss, no data, not
scored or skipped, with the reason), and :func:`exit_code` the process's exit status (3 when one
missed).
:mod:`fourfold.gates.slo` parses the specs.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable, Sequence
from typing import Any

from fourfold.gates.slo import (
    CLASS_RATE_METRICS,
    MISS_EXIT_CODE,
    PASS_EXIT_CODE,
    SLO,
    TELEMETRY_METRICS,
    TELEMETRY_SOURCES,
    Verdict,
    goodput_thresholds,
    to_spec,
)
from fourfold.measure.console import counted
from fourfold.measure.metric_names import summary_value

__all__ = ["class_rate", "evaluate", "exit_code", "summary_block"]


def _group(summary: dict[str, Any], scope: str) -> dict[str, Any] | None:
    if not scope:
        total = summary.get("total")
        return total if isinstance(total, dict) else None
    for group in summary.get("groups") or ():
        if f"{group.get('level')}:{group.get('scenario')}" == scope:
            return group
    return None


def _scopes(summary: dict[str, Any]) -> str:
    names = [f"{g.get('level')}:{g.get('scenario')}" for g in summary.get("groups") or ()]
    return ", ".join(names) or "none"


def _telemetry(slo: SLO, summary: dict[str, Any]) -> Verdict:
    """A telemetry clause against the ``server_metrics`` block (percent there, a fraction here)."""
    block = summary.get("server_metrics")
    canonical, stat = TELEMETRY_METRICS[slo.metric]
    if not isinstance(block, dict):
        return Verdict(slo, "no_data", reason="no server telemetry in this run: the sampler did not run "
                       "(an L1 run samples --metrics-url, default <host>/metrics, and nvidia-smi; "
                       "'off' disables)")
    metrics = block.get("metrics") or {}
    values = [stats[stat] for source in TELEMETRY_SOURCES
              if isinstance(stats := metrics.get(f"{source}.{canonical}"), dict) and stat in stats]
    if not values:
        urls = block.get("metrics_urls") or block.get("metrics_url") or []
        urls = [urls] if isinstance(urls, str) else urls
        errors = block.get("errors") or {}
        said = "; ".join(f"{k}: {v}" for k, v in errors.items()) if isinstance(errors, dict) else str(errors)
        smi = "nor did nvidia-smi" if block.get("nvidia_smi") else "no nvidia-smi on this machine"
        return Verdict(slo, "no_data", reason=f"no {canonical} sampled: /metrics "
                       f"({', '.join(urls) or 'none sampled'}) gave none, {smi}"
                       + (f" ({said})" if said else ""))
    bad = [v for v in values if isinstance(v, bool) or not isinstance(v, numbers.Real)]
    return _judge(slo, bad[0] if bad else max(values) / 100)      # _judge refuses a damaged value


def _measure(slo: SLO, summary: dict[str, Any], quality: str) -> Verdict:
    if slo.kind == "telemetry":
        return _telemetry(slo, summary)
    if slo.kind == "cost":
        value = (summary.get("cost") or {}).get(slo.metric)
        if value is None:
            return Verdict(slo, "no_data", reason=f"no {slo.metric}: give --price-per-hour or "
                           "--price-per-1m-input/--price-per-1m-output (energy: a power_w series from "
                           "--metrics-url or nvidia-smi)")
        return _judge(slo, value)
    if slo.kind == "quality":
        block = summary.get("quality")
        if not isinstance(block, dict):
            if quality == "skip":
                return Verdict(slo, "skipped", reason="quality is scored after the run: "
                               "run `fourfold score RUN_DIR`, then `fourfold check RUN_DIR`")
            return Verdict(slo, "not_scored", reason="not scored: summary.json has no \"quality\" block; "
                           "run `fourfold score RUN_DIR` first")
        scores = block.get("total") if not slo.scope else (block.get("by_scenario") or {}).get(slo.scope)
        if not isinstance(scores, dict):
            return Verdict(slo, "no_data", reason=f"no scored answers for {slo.scope}")
        value = summary_value(scores, slo.metric)
        if slo.metric.startswith("similarity"):
            return _similarity(slo, value, scores, block)
        if value is None:
            referenced = slo.metric.startswith(("similarity", "low_conf", "char_f1"))
            why = ("no scored answer had a reference answer" if referenced else
                   "no scored answer stated a labelled fact (L3 only; a corpus without `facts` is not "
                   "measured)"
                   if slo.metric.startswith("fact_") else
                   "no scored answer was judged for structure (answers that ask for no item count, and "
                   "answers forced to max_tokens by ignore_eos, are left out)")
            return Verdict(slo, "no_data", reason=f"{slo.metric} is empty: {why}")
        return _judge(slo, value)
    group = _group(summary, slo.scope)
    if group is None:
        return Verdict(slo, "no_data", reason=f"no requests for {slo.scope} in this run "
                       f"(level:scenario seen: {_scopes(summary)})")
    value = (class_rate(group, slo.metric) if slo.metric in CLASS_RATE_METRICS
             else summary_value(group, slo.metric))
    if value is None:
        return Verdict(slo, "no_data", reason=f"no value for {slo.metric} "
                       f"({group.get('requests', 0)} requests, {group.get('ok', 0)} ok)")
    return _judge(slo, value)


def _similarity(slo: SLO, value: Any, scores: dict[str, Any], block: dict[str, Any]) -> Verdict:
    """A similarity floor over the answers the model could read: unjudged (fails) when the
    low-confidence ones (mostly [UNK]) outnumber them; the verdict names the model and backend."""
    about: dict[str, Any] = block["embedder"] if isinstance(block.get("embedder"), dict) else {}
    scorer = (f"scored by {about.get('name') or block.get('model', '?')}, "
              f"backend {about.get('backend') or '?'}")
    low, judged = scores.get("low_confidence_n") or 0, scores.get("similarity_n") or 0
    if low and low > judged:
        return Verdict(slo, "no_data", reason=f"unjudged: {low} of {counted(low + judged, 'answer')} "
                       f"{'is' if low + judged == 1 else 'are'} low-confidence (mostly [UNK] "
                       f"to the embedding model; {scorer}): a quality floor cannot pass on them")
    if value is None:
        return Verdict(slo, "no_data",
                       reason=f"{slo.metric} is empty: no scored answer had a reference answer")
    low_note = f"; {counted(low, 'low-confidence answer')} left out" if low else ""
    verdict = _judge(slo, value)
    if verdict.status == "no_data":
        return verdict
    return Verdict(slo, verdict.status, verdict.measured, scorer + low_note)


def class_rate(group: dict[str, Any], metric: str) -> float | None:
    """``error_rate.<class>``: that class's failed requests / all requests of the group (its
    ``errors`` counts, as the report's per-class rows); None when the group has no request."""
    requests, errors = group.get("requests"), group.get("errors")
    if not isinstance(requests, numbers.Real) or not requests or not isinstance(errors, dict):
        return None
    count = errors.get(metric.removeprefix("error_rate."), 0)
    return float(count) / float(requests) if isinstance(count, numbers.Real) else None


def _judge(slo: SLO, value: Any) -> Verdict:
    """A verdict on one summary value; ValueError when it is no number (a damaged summary.json)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"{slo.metric} is {value!r}, not a number")
    if not math.isfinite(value):  # (only live statistics: summary.json holds no NaN, its reader refuses one)
        return Verdict(slo, "no_data", reason=f"{slo.metric} has no finite value yet")
    return Verdict(slo, "pass" if slo.met_by(float(value)) else "miss", float(value))


def evaluate(slos: Iterable[SLO], summary: dict[str, Any], *, quality: str = "require") -> list[Verdict]:
    """One verdict per SLO against a summary (summary.json's shape: ``total``, ``groups``,
    optional ``quality``). ``quality="skip"`` (a live run) skips quality clauses;
    ``"require"`` (``fourfold check``) fails them when the run was not scored."""
    if quality not in ("skip", "require"):
        raise ValueError(f"quality must be 'skip' or 'require', got {quality!r}")
    return [_measure(slo, summary, quality) for slo in slos]


def exit_code(verdicts: Iterable[Verdict]) -> int:
    """3 when any verdict failed (missed, no data, not scored), else 0."""
    return MISS_EXIT_CODE if any(v.failed for v in verdicts) else PASS_EXIT_CODE


def summary_block(slos: Sequence[SLO], verdicts: Sequence[Verdict]) -> dict[str, Any]:
    """The ``slo`` block of summary.json."""
    failed = [v for v in verdicts if v.failed]
    return {"spec": to_spec(slos), "passed": not failed, "failed": len(failed),
            "exit_code": exit_code(verdicts), "goodput_ms": goodput_thresholds(slos),
            "verdicts": [v.to_dict() for v in verdicts]}
