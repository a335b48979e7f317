"""Every simulator fault, met by fourfold's real client: one sensible class each, no crash, no hang,
one record per request the target received.

Unit-level: each fault alone against ``client.stream.send`` (all three dialects, streaming and
not). Acceptance: a headless locust run against the simulator with every fault kind, 20 % of
requests in total.
"""

from __future__ import annotations

import collections
import json
import time

import gevent
import pytest

from fourfold.client.dialects import RequestOptions, get_dialect
from fourfold.client.stream import StreamLimits, send
from fourfold.levels.base import make_client
from fourfold.levels.options import Settings
from fourfold.measure.record import ERROR_CLASSES, RequestRecord
from fourfold.targets.launch import start_simulator
from fourfold.targets.sim.fault_spec import FAULT_KINDS
from fourfold.targets.sim.faults import FAULT_HEADER
from fourfold.workloads.items import Item
from tests.conftest import only_run_dir, preflight_requests, read_jsonl, run_locust
from tests.integration.test_durability import sim_metrics

pytestmark = pytest.mark.integration

READ_TIMEOUT_S, MAX_RESPONSE_S, STALL_S = 1.0, 2.0, 2.0
# fault -> the class fourfold gives it (a streamed request; --ignore-eos, so a length finish is ok)
EXPECTED = {
    "mid_stream_disconnect": "interrupted",
    "malformed_json": "malformed_stream",
    "invalid_utf8": "malformed_stream",
    "missing_done": "ok",          # the finish reason came, then a clean end: complete (no_terminal_event)
    "http_429": "rate_limited",
    "http_500": "http_5xx",
    "http_503": "http_5xx",
    "slow_headers": "ttft_timeout",
    "stall": "read_timeout",
    "huge_chunk": "too_large",
    "wrong_content_type": "malformed_stream",
    "endless": "too_large",
    "": "ok",
}
# where the class differs: Triton has no terminal event to miss; a non-streamed answer is one body
EXCEPTIONS = {
    ("anthropic", True, ""): "truncated",       # the Messages API has no ignore_eos: max_tokens cuts it
    ("anthropic", False, ""): "truncated",
    ("anthropic", True, "missing_done"): "truncated",   # its message_delta said max_tokens
    ("openai", False, "missing_done"): "malformed_stream",
    ("anthropic", False, "missing_done"): "malformed_stream",
    ("triton", False, "missing_done"): "malformed_stream",
    ("openai", False, "stall"): "ttft_timeout",
    ("anthropic", False, "stall"): "ttft_timeout",
    ("triton", False, "stall"): "ttft_timeout",
    ("openai", False, "endless"): "ttft_timeout",
    ("anthropic", False, "endless"): "ttft_timeout",
    ("triton", False, "endless"): "ttft_timeout",
}
SIM_FAULT_ARGS = ["--fault", f"stall_s={STALL_S}", "--fault", f"slow_headers_s={STALL_S}"]
ITEM = Item(id="sky", messages=({"role": "user", "content": "Why is the sky blue?"},), max_tokens=12)
assert set(EXPECTED) == {*FAULT_KINDS, ""} and set(EXPECTED.values()) <= set(ERROR_CLASSES)


@pytest.fixture(scope="module")
def sim():
    with start_simulator("flat", extra_args=SIM_FAULT_ARGS) as process:
        yield process


def _one_case(sim, dialect_name: str, stream: bool, kind: str) -> str:
    """Send one request that meets ``kind``; return "" when fourfold did the right thing, else why not."""
    dialect = get_dialect(dialect_name)
    client = make_client(Settings(read_timeout_s=READ_TIMEOUT_S), sim.url)
    request = dialect.build(ITEM, RequestOptions(stream=stream, ignore_eos=True))
    if kind:
        request.headers[FAULT_HEADER] = kind       # this request meets exactly this fault
    t0 = time.monotonic()
    record = send(client, dialect, request, RequestRecord(), StreamLimits(max_duration_s=MAX_RESPONSE_S))
    elapsed_s = time.monotonic() - t0
    client.close()
    want = EXCEPTIONS.get((dialect_name, stream, kind), EXPECTED[kind])
    problems = []
    if record.error_class != want:
        problems.append(f"class {record.error_class} ({record.error_detail[:100]}), expected {want}")
    if elapsed_s > max(READ_TIMEOUT_S, MAX_RESPONSE_S) + 2.0:
        problems.append(f"took {elapsed_s:.1f} s")                       # no hang past the limits
    if record.status and record.plan.get("fault", "") != kind:          # headers name the fault
        problems.append(f"plan header {record.plan}")
    if kind == "http_429" and record.extra.get("retry_after_s") != 1.0:
        problems.append("Retry-After not kept")
    if kind == "invalid_utf8" and "\ufffd" not in record.text:          # text kept, bad bytes replaced
        problems.append(f"text {record.text[:60]!r}")
    return "; ".join(problems)


def test_each_fault_alone_gets_its_class_in_every_dialect(sim):
    cases = [(d, stream, kind) for d in ("openai", "anthropic", "triton") for stream in (True, False)
             for kind in EXPECTED]
    # concurrently (~2 s, not ~30), except the 17 MiB answers: parsing six of them at once starves
    # this one process's other streams past their 1 s read timeout
    light = [case for case in cases if case[2] != "huge_chunk"]
    jobs = [gevent.spawn(_one_case, sim, *case) for case in light]
    gevent.joinall(jobs, raise_error=True)
    failures = {case: job.value for case, job in zip(light, jobs) if job.value}
    for case in (case for case in cases if case[2] == "huge_chunk"):
        failures[case] = _one_case(sim, *case)
    failures = {case: why for case, why in failures.items() if why}
    assert not failures, "\n".join(f"{case}: {why}" for case, why in failures.items())


def test_an_unknown_forced_fault_is_refused_with_the_valid_names(sim):
    client = make_client(Settings(read_timeout_s=READ_TIMEOUT_S), sim.url)
    response = client.post("/v1/chat/completions", json={"messages": [{"role": "user", "content": "hi"}]},
                           headers={FAULT_HEADER: "meteor_strike"})
    assert response.status_code == 400 and "mid_stream_disconnect" in response.text


def test_every_fault_at_20_percent_in_a_headless_run(tmp_path, locustfile):
    rate = 0.2 / len(FAULT_KINDS)
    fault_args = [a for kind in FAULT_KINDS for a in ("--fault", f"{kind}={rate:.6f}")] + SIM_FAULT_ARGS
    run_s = 12
    with start_simulator("flat", seed=7, extra_args=fault_args) as sim:
        t0 = time.monotonic()
        proc = run_locust(["-f", locustfile("l1_throughput.py"), "--headless", "-u", "8", "-r", "8",
                           "-t", f"{run_s}s", "--host", sim.url, "--max-tokens", "8", "--ignore-eos",
                           "--read-timeout", str(READ_TIMEOUT_S), "--max-response-s", str(MAX_RESPONSE_S),
                           "--metrics-url", "off", "--csv", str(tmp_path / "loc")], tmp_path, timeout=90)
        wall_s = time.monotonic() - t0
        metrics = sim_metrics(sim)
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]      # 0 crashes
    assert proc.returncode == 1, proc.stderr[-3000:]                # failures counted; the run went on
    assert wall_s < run_s + 25, wall_s                              # 0 hangs (start-up + shutdown slack)
    run = only_run_dir(tmp_path)
    records = read_jsonl(run / "records.jsonl")
    # one record per request received, none lost; beyond them only requests the stop cancelled before
    # the simulator read them (more of them when the machine is busy)
    unread = sum(1 for r in records if r["error_class"] == "cancelled" and not r["status"])
    received = metrics["fourfold_sim_received_total"] - preflight_requests(run)     # (no records)
    assert len(records) - unread <= received <= len(records), unread
    faults = {name.split('fault="')[1].rstrip('"}'): int(n) for name, n in metrics.items()
              if 'fault="' in name}
    assert set(faults) == set(FAULT_KINDS), faults                  # every kind happened
    assert all(r["error_class"] in ERROR_CLASSES for r in records)  # every request classified
    by_fault: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    for r in records:
        if r["error_class"] != "cancelled":
            by_fault[r["plan"].get("fault", "") if r["status"] else "slow_headers?"][r["error_class"]] += 1
    for fault, classes in by_fault.items():
        if fault == "slow_headers?":    # no headers, so no plan: a slow status line or a stall of the head
            assert set(classes) <= {"ttft_timeout"}, classes
            continue
        assert set(classes) == {EXPECTED[fault]}, (fault, classes)
    assert sum(by_fault["slow_headers?"].values()) <= faults["slow_headers"]
    summary = json.loads((run / "summary.json").read_text())
    measured = [r for r in records if not r["warmup"] and r["error_class"] != "cancelled"]
    assert summary["total"]["errors"] == \
        dict(sorted(collections.Counter(r["error_class"] for r in measured).items()))
    assert summary["records"] == len(records)
