"""L2 aggregates and reports: connection facts, open-loop verdicts, settings, shipping."""

from __future__ import annotations

import re
from argparse import Namespace

import pytest

from fourfold.levels.arrivals import ArrivalProcess, GapStats
from fourfold.levels.l2_options import GatewaySettings
from fourfold.levels.l2_stats import (
    DispatcherReport,
    GatewayStats,
    base_of,
    connections_report,
    format_connections,
    format_open_loop,
    open_loop_report,
    quarter_means,
)
from fourfold.measure.record import RequestRecord

CONFIGURED = {"process": "poisson", "offered_rps": 20.0, "burstiness": 1.0, "max_in_flight": 8,
              "max_in_flight_policy": "wait"}


def rec(**kw) -> RequestRecord:
    base = dict(level="l2", scenario="h1", status=200, ttft_ms=50.0, e2e_ms=300.0, terminal=True,
                http_version="HTTP/1.1", conn_reused=True)
    base.update(kw)
    return RequestRecord(**base)


def test_gateway_stats_count_versions_connects_and_from_arrival_latency():
    stats = GatewayStats()
    stats.add(rec())
    stats.add(rec(conn_reused=False, connect_ms=0.4))
    stats.add(rec(scenario="h2", http_version="HTTP/2"))
    stats.add(rec(scenario="open", queue_ms=20.0), from_arrival=True)
    stats.add(rec(scenario="open", queue_ms=5.0, error_class="http_5xx", status=500), from_arrival=True)
    stats.add_retry_after_wait("h1", 1.5)
    h1 = stats.facts("h1")
    assert h1.http_versions == {"HTTP/1.1": 2} and h1.connect_ms.count == 1
    assert h1.retry_after_waits == 1 and h1.retry_after_wait_s == 1.5
    assert stats.facts("h2").http_versions == {"HTTP/2": 1}
    opened = stats.facts("open")
    assert opened.ttft_from_arrival_ms.count == 1            # failures stay out of latency
    assert opened.ttft_from_arrival_ms.max == pytest.approx(70.0, rel=0.01)
    assert opened.e2e_from_arrival_ms.max == pytest.approx(320.0, rel=0.01)


def test_wire_deltas_merge_exactly_on_the_master():
    worker, master = GatewayStats(), GatewayStats()
    worker.add(rec(conn_reused=False, connect_ms=1.0))
    worker.dispatchers.append(DispatcherReport(rate_rps=10.0, window_s=5.0, arrivals=50, sent=50,
                                               send_gaps=GapStats(2, 0.2, 0.025)))
    master.merge_wire(worker.take_wire())
    assert worker.scenarios == {} and worker.dispatchers == []       # shipped, then reset
    worker.add(rec())
    master.merge_wire(worker.take_wire())
    assert master.facts("h1").http_versions == {"HTTP/1.1": 2}
    assert master.facts("h1").connect_ms.count == 1
    assert master.dispatchers[0].arrivals == 50 and master.dispatchers[0].send_gaps.n == 2


def _group(scenario, **counts):
    return {"level": "l2", "scenario": scenario, "requests": 10, "conn_reused": 10, "conn_new": 0,
            "conn_reconnects": 0, **counts}


def test_connections_report_folds_ladder_steps_and_prints_one_line_each():
    stats = GatewayStats()
    for scenario in ("ladder@8", "ladder@16"):
        stats.add(rec(scenario=scenario, conn_reused=False, connect_ms=0.5))
    stats.add(rec(scenario="h2", http_version="HTTP/2"))
    groups = [_group("ladder@8", conn_reused=9, conn_new=1), _group("ladder@16", conn_reused=9, conn_new=1,
                                                                    conn_reconnects=1),
              _group("h2")]
    report = connections_report(groups, stats)
    assert list(report) == ["h2", "ladder"]
    ladder = report["ladder"]
    assert (ladder["requests"], ladder["conn_new"], ladder["conn_reconnects"]) == (20, 2, 1)
    assert ladder["conn_reuse"] == pytest.approx(0.9)
    assert ladder["http_versions"] == {"HTTP/1.1": 2}
    lines = format_connections(report)
    assert lines[0] == ("L2 connections h2: HTTP/2 100%; reuse 100.0% (0 new, 0 reconnects after an idle "
                        "close); no new connections")
    assert lines[1] == ("L2 connections ladder: HTTP/1.1 100%; reuse 90.0% (2 new, 1 reconnects after an "
                        "idle close); connect p50 0.50 ms, max 0.50 ms")
    assert base_of("ladder@32") == "ladder" and base_of("h1") == "h1"


def _dispatcher(**kw) -> DispatcherReport:
    base = dict(rate_rps=20.0, window_s=10.0, arrivals=200, sent=200, completed=196, in_flight_max=9,
                in_flight_at_stop=4, send_gaps=GapStats(199, 9.95, 1.0),
                scheduled_gaps=GapStats(200, 10.0, 1.0))
    base.update(kw)
    return DispatcherReport(**base)


def _open_group(queue_p99, e2e_mean_ms=200.0):
    return {"scenario": "open", "queue_ms": {"p50": 0.5, "p95": 1.0, "p99": queue_p99, "max": queue_p99},
            "e2e_ms": {"mean": e2e_mean_ms}}


def test_open_loop_report_when_the_generator_keeps_up():
    stats = GatewayStats()
    report = open_loop_report([_dispatcher()], _open_group(2.0), stats.facts("open"), CONFIGURED)
    assert report["scheduled_rps"] == pytest.approx(20.0) and report["sent_rps"] == pytest.approx(20.0)
    assert report["completed_rps"] == pytest.approx(19.6)
    assert report["generator_kept_up"] and report["target_kept_up"] and report["warnings"] == []
    assert format_open_loop(report)[-1] == "  ok: the load generator kept up with the offered rate"


def test_open_loop_report_says_when_the_generator_falls_behind():
    stats = GatewayStats()
    behind = _dispatcher(arrivals=300, sent=80, completed=76, waited=220)
    report = open_loop_report([behind], _open_group(4200.0), stats.facts("open"), CONFIGURED)
    assert not report["generator_kept_up"]
    assert report["sent_rps"] == pytest.approx(8.0) and report["scheduled_rps"] == pytest.approx(30.0)
    assert report["warnings"] == [
        "the load generator could NOT keep up with the offered rate: sent 80 of 300 scheduled arrivals "
        "(27%); 220 arrivals waited for a free slot (--max-in-flight 8 reached); "
        "client queue p99 4200 ms > 100 ms. Latency is still counted from each intended arrival (queue_ms)."]
    assert format_open_loop(report)[-1].startswith("  WARNING: the load generator could NOT keep up")


@pytest.mark.parametrize(("kw", "queue_p99", "fragment"), [
    ({"dropped": 3}, 1.0, "dropped 3 arrivals at --max-in-flight 8"),
    ({}, 150.0, "client queue p99 150 ms > 100 ms"),
    ({"waited": 1}, 1.0, "1 arrivals waited for a free slot"),
])
def test_each_sign_of_falling_behind_is_named(kw, queue_p99, fragment):
    report = open_loop_report([_dispatcher(**kw)], _open_group(queue_p99), GatewayStats().facts("open"),
                              CONFIGURED)
    assert not report["generator_kept_up"] and fragment in report["warnings"][0]


def test_open_loop_report_says_when_the_target_falls_behind():
    steady = open_loop_report([_dispatcher(in_flight_q2=4.0, in_flight_q4=5.5)], _open_group(1.0),
                              GatewayStats().facts("open"), CONFIGURED)
    assert steady["target_kept_up"]
    report = open_loop_report([_dispatcher(completed=120, in_flight_q2=30.0, in_flight_q4=80.0)],
                              _open_group(1.0), GatewayStats().facts("open"), CONFIGURED)
    assert report["generator_kept_up"] and not report["target_kept_up"]
    assert report["warnings"] == ["the target fell behind: requests in flight kept growing (mean 30.0 in the "
                                  "second quarter of the run, 80.0 in the last); completed 120 of 200 sent"]


def test_arrivals_cut_by_the_stop_are_not_a_lag():
    cut = _dispatcher(sent=185, completed=180, unstarted_at_stop=15)
    report = open_loop_report([cut], _open_group(1.0), GatewayStats().facts("open"), CONFIGURED)
    assert report["generator_kept_up"]
    assert "; 15 cut by the stop before sending" in format_open_loop(report)[1]


def test_quarter_means():
    samples = [(0.5, 1), (1.5, 2), (2.5, 10), (3.5, 4), (3.9, 6), (4.0, 8)]
    assert quarter_means(samples, 4.0) == (2.0, 6.0)
    assert quarter_means([], 4.0) == (0.0, 0.0)


def test_dispatcher_rates_add_across_workers():
    reports = [_dispatcher(rate_rps=10.0, arrivals=100, sent=100, completed=100),
               _dispatcher(rate_rps=10.0, window_s=9.0, arrivals=90, sent=90, completed=90)]
    report = open_loop_report(reports, _open_group(1.0), GatewayStats().facts("open"), CONFIGURED)
    assert report["dispatchers"] == 2 and report["arrivals"] == 190
    assert report["scheduled_rps"] == pytest.approx(20.0)
    assert DispatcherReport.from_dict(reports[1].to_dict()) == reports[1]


def test_gateway_settings_from_options_and_errors():
    settings = GatewaySettings.from_options(Namespace(ladder="4,8", ladder_hold_s=3, arrival_process="gamma",
                                                      arrival_rate=12, burstiness=0.5, max_in_flight=None))
    assert settings.ladder == (4, 8) and settings.ladder_hold_s == 3.0
    assert settings.arrivals == ArrivalProcess("gamma", 12.0, 0.5)
    assert settings.max_in_flight == 256                       # None: the default
    assert GatewaySettings.from_options(None) == GatewaySettings()
    assert GatewaySettings.from_options(Namespace(ladder="off")).ladder == ()
    for bad, message in ((Namespace(ladder="8,4"), "steps must increase"),
                         (Namespace(arrival_rate=0),
                          "--arrival-rate must be a number within [0.001, 100000]"),
                         (Namespace(max_in_flight=0), "--max-in-flight must be a number within [1, 100000]"),
                         (Namespace(max_in_flight_policy="block"), "must be one of wait, drop")):
        with pytest.raises(ValueError, match=re.escape(message)):
            GatewaySettings.from_options(bad)
