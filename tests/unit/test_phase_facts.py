"""Request phases without a network (issue 34, part 3): ConnFacts' phases from its stamps, the HTTP/2
transport's from httpcore's trace events, L2's per-kind histograms through the worker -> master wire."""

from __future__ import annotations

import numpy as np
import pandas as pd

from fourfold.client.h2client import _Trace, connection_facts
from fourfold.client.transport import ConnFacts
from fourfold.levels.l2_stats import GatewayStats, ScenarioFacts, phases_report
from fourfold.measure.record import RequestRecord
from fourfold.reports.phaserows import phase_means

MS = 1_000_000


def test_a_new_connection_s_phases_from_its_stamps():
    facts = ConnFacts(reused=False, connect_ms=3.0, t_start_ns=100 * MS, dns_ms=0.5, tcp_ms=1.0, tls_ms=1.5,
                      t_sent_ns=104 * MS, t_head_ns=150 * MS)
    assert facts.phases() == {"dns_ms": 0.5, "tcp_ms": 1.0, "tls_ms": 1.5, "send_ms": 1.0, "wait_ms": 46.0}


def test_a_reused_connection_has_only_the_send_and_the_wait():
    facts = ConnFacts(reused=True, connect_ms=None, t_start_ns=10 * MS, t_sent_ns=10 * MS + 200_000,
                      t_head_ns=30 * MS)
    assert facts.phases() == {"send_ms": 0.2, "wait_ms": 19.8}
    assert ConnFacts(reused=True, connect_ms=None, t_start_ns=0).phases() == {}      # nothing was sent


def test_http2_phases_from_the_trace_events():
    trace = _Trace()
    at = {"connection.connect_tcp.started": 0, "connection.connect_tcp.complete": 2 * MS,
          "connection.start_tls.started": 2 * MS, "connection.start_tls.complete": 5 * MS,
          "send_request_body.complete": 6 * MS, "receive_response_headers.complete": 26 * MS}
    trace.at.update(at)
    facts = connection_facts(trace, 0, "HTTP/2", had_idle=False)
    assert facts.connect_ms == 5.0 and facts.tcp_ms == 2.0 and facts.tls_ms == 3.0 and facts.dns_ms is None
    assert facts.phases() == {"tcp_ms": 2.0, "tls_ms": 3.0, "send_ms": 1.0, "wait_ms": 20.0}
    trace("http2.send_request_headers.started", {})                 # the protocol prefix is dropped
    assert "send_request_headers.started" in trace.at


def test_l2_keeps_each_phase_by_connection_kind_across_the_wire():
    worker = GatewayStats()
    for reused, extra in ((False, {"dns_ms": 0.4, "tcp_ms": 0.6, "send_ms": 0.1, "wait_ms": 40.0}),
                          (True, {"send_ms": 0.2, "wait_ms": 41.0}),
                          (True, {"send_ms": 0.3, "wait_ms": 42.0})):
        worker.add(RequestRecord(scenario="ladder@4", conn_reused=reused, extra=extra))
    master = GatewayStats()
    master.merge_wire(worker.take_wire())
    report = phases_report(master.scenarios["ladder@4"])
    assert report["new"]["dns_ms"]["count"] == 1 and report["reused"]["wait_ms"]["count"] == 2
    assert abs(report["reused"]["wait_ms"]["mean"] - 41.5) < 1e-9 and "dns_ms" not in report["reused"]
    assert ScenarioFacts.from_wire({"c": {}, "ta": {}, "ea": {}}).phases == {}     # an older worker's wire


def test_the_stacked_bars_means_by_connection_kind():
    frame = pd.DataFrame({"conn_reused": [0.0, 1.0, 1.0, np.nan], "dns_ms": [2.0, np.nan, np.nan, np.nan],
                          "wait_ms": [10.0, 20.0, 30.0, 99.0]})
    assert phase_means(frame) == {"new": {"dns_ms": 2.0, "wait_ms": 10.0}, "reused": {"wait_ms": 25.0}}
