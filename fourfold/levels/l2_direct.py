"""Gateway overhead (``--direct-host``): the same closed loop through the gateway and straight to the
backend behind it, interleaved request by request.

With ``--direct-host URL`` each closed-loop user sends every item twice in a row: once through
``--host`` (the gateway: record variant ``gateway``, its scenario as without the option, ``ladder@8``)
and once straight to URL (variant ``direct``, scenario ``ladder@8@direct``). Users of even index start
a pair with the gateway, odd ones with the direct path, so at every moment about half of a step's
users are on each path: both arms see the same items, the same backend load, its drift and the
machine's. The ladder, its knee and the connection rows stay the gateway's (``ladder@8``); the direct
arm's rows are beside them (``ladder@8@direct``, no ladder of their own).

The reports drop the ``@direct`` suffix (:func:`fourfold.reports.load.base_scenario`), so
``fourfold compare RUN`` compares the two arms step by step, direct the baseline: Δ = gateway -
direct is the gateway's overhead, with the interval of two arms of one run
(:mod:`fourfold.reports.overhead`). ``summary.json``'s ``l2.overhead`` has, per step, each arm's
requests and TTFT / E2E p50 and p95 from the run's histograms, and gateway minus direct (the point
estimates; the interval is the report's).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from fourfold.levels.base import make_client
from fourfold.levels.ladder import parse_step_scenario
from fourfold.levels.options import Settings
from fourfold.measure.record import RequestRecord

GATEWAY, DIRECT = "gateway", "direct"
DIRECT_SUFFIX = f"@{DIRECT}"
# (summary key, LLMStats histogram, quantile): the figures each step compares
FIGURES = (("ttft_p50_ms", "ttft_ms", "p50"), ("ttft_p95_ms", "ttft_ms", "p95"),
           ("e2e_p50_ms", "e2e_ms", "p50"), ("e2e_p95_ms", "e2e_ms", "p95"))


class DirectArm:
    """A user's second path: its own client to ``--direct-host`` and the alternation of the pairs."""

    def __init__(self, settings: Settings, url: str, user_index: int) -> None:
        self.url = url
        self.client = make_client(settings, url)
        self._direct_first = user_index % 2 == 1
        self._item: Any = None            # the pair's item, sent once on each path

    def send(self, user: Any, scenario: str) -> RequestRecord:
        """Send the next request of the current pair through ``user`` (a closed-loop GatewayBase)."""
        first = self._item is None
        if first:
            self._item = user.next_item()
        item = self._item
        direct = first == self._direct_first
        if not first:
            self._item = None
        user.variant = DIRECT if direct else GATEWAY
        if not direct:
            return user.send_item(item, scenario=scenario)
        gateway_client, user.client = user.client, self.client
        try:
            return user.send_item(item, scenario=scenario + DIRECT_SUFFIX)
        finally:
            user.client = gateway_client

    def close(self) -> None:
        self.client.close()


def arm_of(scenario: str) -> tuple[str, str]:
    """``"ladder@8@direct"`` -> ("ladder@8", "direct"); ``"ladder@8"`` -> ("ladder@8", "gateway")."""
    if scenario.endswith(DIRECT_SUFFIX):
        return scenario[: -len(DIRECT_SUFFIX)], DIRECT
    return scenario, GATEWAY


def overhead_report(groups: Iterable[dict[str, Any]], direct_host: str) -> dict[str, Any] | None:
    """``summary.json``'s ``l2.overhead`` from LLMStats group summaries: per ladder step with both arms,
    each arm's requests and figures and the overhead (gateway - direct); None when no step has both."""
    arms: dict[str, dict[str, dict[str, Any]]] = {}
    for group in groups:
        scenario, arm = arm_of(str(group.get("scenario", "")))
        arms.setdefault(scenario, {})[arm] = group
    steps = []
    for scenario, pair in arms.items():
        if set(pair) != {GATEWAY, DIRECT}:
            continue
        parsed = parse_step_scenario(scenario)
        row: dict[str, Any] = {"scenario": scenario, "users": parsed[1] if parsed else None,
                               "requests": {arm: pair[arm]["requests"] for arm in (GATEWAY, DIRECT)},
                               "failures": {arm: pair[arm]["failures"] for arm in (GATEWAY, DIRECT)}}
        for key, hist, quantile in FIGURES:
            values = {arm: pair[arm][hist][quantile] if pair[arm][hist]["count"] else None
                      for arm in (GATEWAY, DIRECT)}
            gateway, direct = values[GATEWAY], values[DIRECT]
            values["overhead"] = (round(gateway - direct, 3)
                                  if gateway is not None and direct is not None else None)
            row[key] = values
        steps.append(row)
    if not steps:
        return None
    steps.sort(key=lambda row: (row["users"] is None, row["users"] or 0, row["scenario"]))
    return {"direct_host": direct_host, "steps": steps}


def format_overhead(block: dict[str, Any]) -> list[str]:
    """The ``l2.overhead`` block as console lines: one per step, gateway - direct in ms."""
    lines = [f"L2 gateway overhead, gateway - direct ({block['direct_host']}) in ms (CIs: fourfold compare)",
             f"{'step':>14} {'reqs gw/direct':>15} {'TTFT p50':>9} {'p95':>8} {'E2E p50':>9} {'p95':>8}"]
    for row in block["steps"]:
        step = f"{row['users']} users" if row["users"] is not None else row["scenario"]
        counts = f"{row['requests'][GATEWAY]}/{row['requests'][DIRECT]}"
        cells = [_ms(row[key]["overhead"]) for key, _, _ in FIGURES]
        lines.append(f"{step:>14} {counts:>15} {cells[0]:>9} {cells[1]:>8} {cells[2]:>9} {cells[3]:>8}")
    return lines


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:+.1f}"


__all__ = ["DIRECT", "GATEWAY", "DirectArm", "arm_of", "format_overhead", "overhead_report"]
