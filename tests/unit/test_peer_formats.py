"""Peers side by side: each peer's output read back into requests, and the error/ratio arithmetic."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.append(str(REPO / "benchmarks"))   # appended: benchmarks/fingerprint.py must not shadow the package

from peer_formats import (  # noqa: E402
    ITL_PER_GAP,
    ITL_PER_REQUEST,
    PeerRequest,
    add_ratios,
    cpu_at,
    drop_warmup,
    parse_aiperf,
    parse_guidellm,
    parse_vllm,
    ratio,
    ratio_text,
    render_table,
    steady_window,
    timing_errors,
    tokens_in_window,
    verdicts,
)

SAMPLES = REPO / "tests" / "recorded" / "peers"


def approx_list(values: list[float]) -> object:
    return pytest.approx(values, abs=1e-6)


def test_vllm_driver_output() -> None:
    requests = parse_vllm(json.loads((SAMPLES / "vllm_driver.json").read_text()))
    assert [r.warmup for r in requests] == [True, False]          # the failed request is left out
    measured = drop_warmup(requests, streams=2)
    assert [r.start_s for r in measured] == [1000.2]
    assert measured[0].gaps_ms == approx_list([10.0, 12.5, 8.5])
    ttft_err, itl_err = timing_errors(measured, planned_ttft_ms=50.0, itl_ms=10.0)
    assert ttft_err == approx_list([2.5])
    assert itl_err == approx_list([0.0, 2.5, 1.5])


def test_guidellm_report() -> None:
    requests = parse_guidellm(json.loads((SAMPLES / "guidellm_benchmarks.json").read_text()))
    assert [(r.start_s, r.complete) for r in requests] == [(1000.5, True), (1000.0, True), (1005.9, False)]
    first = requests[0]
    assert first.ttft_ms == pytest.approx(54.0)
    assert first.mean_itl_ms == pytest.approx(10.0)
    assert first.chunk_times_s() == approx_list([1000.554, 1000.564, 1000.574, 1000.584])   # evenly spaced
    assert requests[2].tokens == 2                                  # no usage: its iterations
    measured = drop_warmup(requests, streams=1)                     # no flags: the earliest start goes
    assert [r.start_s for r in measured] == [1000.5, 1005.9]
    ttft_err, itl_err = timing_errors(measured, 50.0, 10.0, basis=ITL_PER_REQUEST)
    assert ttft_err == approx_list([4.0])                           # the cut-off request has no error
    assert itl_err == approx_list([0.0])


def test_aiperf_profile_export() -> None:
    requests = parse_aiperf((SAMPLES / "aiperf_profile_export.jsonl").read_text())
    assert [r.start_s for r in requests] == [1000.5, 1000.6]        # warm-up phase and error left out
    assert requests[0].gaps_ms == (9.0, 12.0)
    assert requests[1].ttft_ms == pytest.approx(50.6)               # ns converted
    assert requests[1].gaps_ms == approx_list([10.0])
    ttft_err, itl_err = timing_errors(requests, 50.0, 10.0, basis=ITL_PER_GAP)
    assert ttft_err == approx_list([3.5, 0.6])
    assert itl_err == approx_list([1.0, 2.0, 0.0])
    assert tokens_in_window(requests, (1000.55, 1000.6)) == pytest.approx(3.0)


def test_tokens_in_window_shares_a_chunks_tokens() -> None:
    request = PeerRequest(start_s=10.0, ttft_ms=100.0, gaps_ms=(100.0, 100.0, 100.0), tokens=8)
    assert request.chunk_times_s() == approx_list([10.1, 10.2, 10.3, 10.4])
    assert tokens_in_window([request], (10.15, 10.35)) == pytest.approx(4.0)   # 2 of 4 chunks, 2 tokens each


def test_steady_window() -> None:
    requests = [PeerRequest(start_s=100.0, ttft_ms=50.0), PeerRequest(start_s=101.0, ttft_ms=50.0)]
    assert steady_window(requests, duration_s=15.0, warm_s=3.75) == (103.75, 114.0)


@pytest.mark.parametrize(("t", "expected"), [(-1.0, 1.0), (0.0, 1.0), (0.5, 1.5), (2.0, 2.0), (5.0, 2.0)])
def test_cpu_at_interpolates(t: float, expected: float) -> None:
    assert cpu_at([(0.0, 1.0), (1.0, 2.0), (3.0, 2.0)], t) == pytest.approx(expected)


@pytest.mark.parametrize(("value", "reference", "expected"),
                         [(3.0, 1.5, 2.0), (None, 1.0, None), (1.0, None, None), (1.0, 0.0, None)])
def test_ratio(value: float | None, reference: float | None, expected: float | None) -> None:
    assert ratio(value, reference) == expected


@pytest.mark.parametrize(("rel", "text"), [(0.0077, "0.0077x"), (0.43, "0.43x"), (1.0, "1x"), (1.46, "1.5x"),
                                           (9.9, "9.9x"), (9.96, "10x"), (140.4, "140x"), (1712.0, "1,712x")])
def test_ratio_text(rel: float, text: str) -> None:
    assert ratio_text(rel) == text


def point_rows(fourfold_p99: float) -> list[dict]:
    def make(client: str, p50: float, p99: float, cpu: float) -> dict:
        return {"client": client, "streams": 16, "itl_ms": 10.0, "ttft_err_p50_ms": p50,
                "ttft_err_p99_ms": p99, "itl_err_p50_ms": 0.5, "itl_err_p99_ms": 4.0,
                "cpu_ms_per_1k_tokens": cpu, "tokens_per_s": 3000.0, "requests": 64, "itl_basis": ITL_PER_GAP}
    return [make("raw-socket", 2.0, 8.0, 30.0), make("fourfold", 3.0, fourfold_p99, 75.0),
            make("vllm", 5.0, 20.0, 60.0)]


def test_add_ratios_and_verdicts() -> None:
    rows = point_rows(fourfold_p99=10.0)
    add_ratios(rows)
    assert rows[1]["ttft_err_p50_ms_vs_raw"] == pytest.approx(1.5)
    assert rows[2]["cpu_ms_per_1k_tokens_vs_raw"] == pytest.approx(2.0)
    assert rows[0]["tokens_per_s_vs_raw"] == pytest.approx(1.0)
    assert verdicts(rows) == [" 16 streams x 10 ms: fourfold TTFT error below every peer: yes"]
    assert verdicts(point_rows(fourfold_p99=25.0)) == [
        " 16 streams x 10 ms: fourfold TTFT error below every peer: no (not below: vllm p99)"]


def test_render_table() -> None:
    rows = point_rows(fourfold_p99=10.0)[:2]
    rows[1]["itl_basis"] = ITL_PER_REQUEST
    add_ratios(rows)
    assert render_table(rows).splitlines() == [
        "streams  ms/tok  client      TTFT err p50  TTFT err p99  ITL err p50  ITL err p99  CPU ms/1k tok"
        "       tok/s  requests",
        "     16      10  raw-socket          2.00          8.00         0.50         4.00           30.0"
        "       3,000        64",
        "     16      10  fourfold*    3.00 (1.5x)  10.00 (1.2x)    0.50 (1x)    4.00 (1x)    75.0 (2.5x)"
        "  3,000 (1x)        64",
    ]
    assert render_table(rows, markdown=True).splitlines()[2] == (
        "| 16 | 10 | raw-socket | 2.00 | 8.00 | 0.50 | 4.00 | 30.0 | 3,000 | 64 |")
