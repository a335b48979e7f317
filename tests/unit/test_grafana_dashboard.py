"""The Grafana dashboard shipped in the wheel (fourfold/data/grafana/fourfold.json, docs/prometheus.md): every
query names only series fourfold exports (fourfold.measure.promexport.FAMILIES) and only labels they
carry; the Prometheus datasource is an import input (``${DS_PROMETHEUS}``); level and scenario are
template variables the queries use."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest

from fourfold.data import bundled
from fourfold.measure.promexport import FAMILIES

DASHBOARD = bundled("grafana", "fourfold.json")
METRIC = re.compile(r"\bfourfold_[a-z0-9_]+")
MATCHER = re.compile(r"([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)\s*\"")
GROUPING = re.compile(r"\b(?:by|without)\s*\(([^)]*)\)")
LABELS = {"level", "scenario", "variant", "class", "status", "le", "k", "outcome"}
SUFFIXES = ("_bucket", "_sum", "_count")


def dashboard() -> dict[str, Any]:
    return json.loads(DASHBOARD.read_text(encoding="utf-8"))


def queries(board: dict[str, Any]) -> Iterator[str]:
    """Every PromQL expression: the panels' targets and the template variables' queries."""
    for panel in board["panels"]:
        for target in panel.get("targets", []):
            yield target["expr"]
    for variable in board["templating"]["list"]:
        query = variable.get("query")
        yield query["query"] if isinstance(query, dict) else query


def family_of(name: str) -> str:
    """The family a series name belongs to: a histogram's ``_bucket``/``_sum``/``_count`` stripped."""
    if name in FAMILIES:
        return name
    for suffix in SUFFIXES:
        base = name.removesuffix(suffix)
        if base != name and FAMILIES.get(base, ("",))[0] == "histogram":
            return base
    raise AssertionError(f"{name} is no series fourfold exports (measure/promexport.py FAMILIES)")


def test_the_dashboard_is_package_data() -> None:
    assert DASHBOARD.is_file()


def test_every_query_names_an_exported_series() -> None:
    names = [name for expr in queries(dashboard()) for name in METRIC.findall(expr)]
    assert names
    families = {family_of(name) for name in names}
    for latency in ("fourfold_ttft_seconds", "fourfold_itl_seconds", "fourfold_tpot_seconds",
                    "fourfold_e2e_seconds"):
        assert latency in families
    assert {"fourfold_output_tokens_total", "fourfold_requests_total", "fourfold_stalls_total"} <= families
    for expr in queries(dashboard()):
        for name in METRIC.findall(expr):
            if name.endswith("_bucket"):
                assert "histogram_quantile(" in expr and "rate(" in expr, expr


def test_every_label_a_query_uses_is_one_fourfold_exports() -> None:
    for expr in queries(dashboard()):
        used = set(MATCHER.findall(expr))
        for group in GROUPING.findall(expr):
            used |= {label.strip() for label in group.split(",") if label.strip()}
        assert used <= LABELS, (expr, used - LABELS)


def test_a_made_up_series_is_caught() -> None:
    with pytest.raises(AssertionError):
        family_of("fourfold_made_up_total")
    with pytest.raises(AssertionError):
        family_of("fourfold_requests_total_bucket")     # a counter has no buckets


def test_the_datasource_is_an_import_input_and_level_and_scenario_are_variables() -> None:
    board = dashboard()
    assert [i["name"] for i in board["__inputs"]] == ["DS_PROMETHEUS"]
    assert board["__inputs"][0]["pluginId"] == "prometheus"
    for panel in board["panels"]:
        assert panel["datasource"]["uid"] == "${DS_PROMETHEUS}"
        assert all(t["datasource"]["uid"] == "${DS_PROMETHEUS}" for t in panel["targets"])
    variables = {v["name"]: v for v in board["templating"]["list"]}
    assert {"level", "scenario"} <= set(variables)
    assert all(v["datasource"]["uid"] == "${DS_PROMETHEUS}" for v in variables.values())
    selected = [expr for expr in queries(board)
                if 'level=~"$level"' in expr and 'scenario=~"$scenario"' in expr]
    assert len(selected) >= 8
    ids = [panel["id"] for panel in board["panels"]]
    assert len(ids) == len(set(ids))
