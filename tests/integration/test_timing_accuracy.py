"""fourfold's TTFT and ITL against the simulator's planned token times, for every dialect.

At low load the client must see each token when the simulator planned to send it: the plan
(``x-fourfold-plan-detail: 1``) gives every token's send time relative to the moment the request
was admitted, on the same host's CLOCK_MONOTONIC, so the comparison leaves out nothing but the
client's own receive delay.
"""

from __future__ import annotations

import functools
import statistics

import pytest

from fourfold.client.dialects import RequestOptions, get_dialect
from fourfold.client.factory import make_http_client
from fourfold.client.stream import send
from fourfold.measure.record import RequestRecord
from fourfold.targets.launch import start_simulator
from fourfold.workloads.items import Item
from tests.integration.corewait import core_wait

pytestmark = [pytest.mark.integration, pytest.mark.timing]
ITEM = Item(id="qa-brief", messages=({"role": "user", "content": "Briefly explain quantum annealing."},))


@pytest.fixture(scope="module")
def flat_sim():
    with start_simulator("flat", seed=5) as sim:
        yield sim.url


@pytest.mark.parametrize("dialect_name", ["openai", "anthropic", "triton", "responses"])
def test_measured_ttft_and_itl_match_the_plan(flat_sim, dialect_name):
    dialect = get_dialect(dialect_name)
    ttft_lag, ttft_err, itl_err = [], [], []
    clean = joined = 0
    with make_http_client(flat_sim) as client, core_wait() as wait:
        for i in range(12):
            request = dialect.build(ITEM, RequestOptions(max_tokens=30))
            request.headers["x-fourfold-plan-detail"] = "1"
            record = send(client, dialect, request, RequestRecord())
            assert record.error_class in ("ok", "truncated"), record.error_detail
            planned = record.plan["offsets_ms"]
            offsets = record.chunk_offsets_ms
            assert record.output_tokens == len(planned) == 30
            assert record.content_chunks == len(offsets) <= 30
            if record.content_chunks < 30:   # two tokens read at once (this process waited for a core):
                joined += 1                  # one stamp for both, by design; its gaps no longer pair
                continue                     # with the plan's, so another request is measured instead
            if i == 0:
                continue                         # the first request also opens the connection
            admitted_ms = (record.plan["t0_monotonic_s"] - record.sent_mono_s) * 1000
            ttft_lag.append(offsets[0] - (admitted_ms + planned[0]))
            ttft_err.append(offsets[0] - planned[0])
            itl_err += [abs((b - a) - (pb - pa)) for a, b, pa, pb
                        in zip(offsets, offsets[1:], planned, planned[1:])]
            clean += 1
            if clean == 5:
                break
    assert clean == 5, f"only {clean} of {i + 1} requests had each token read alone ({joined} did not)"
    # receive delay of the first token: never negative (beyond clock rounding), small
    # (the typical figures, plus what this machine typically added to a wake-up meanwhile: the
    # simulator sends each token when its process is woken; ~0.1 ms even beside hogs, more in a
    # slow spell of the VM, when every process is late)
    late_ms = wait.quantile_ms(0.5)
    print(f"\nmedian ITL error {statistics.median(itl_err):.2f} ms, wake-ups late {late_ms:.2f} ms (p50)")
    assert min(ttft_lag) > -0.5
    assert statistics.median(ttft_lag) < 5.0 + late_ms
    # end to end (request transit + admission included): the 50 ms plan, within a few ms
    assert 0 < statistics.median(ttft_err) < 8.0 + late_ms
    assert statistics.median(itl_err) < 2.0 + late_ms, (statistics.median(itl_err), late_ms)


@pytest.fixture(scope="module")
def thinking_sim():
    overrides = ["reasoning_share=1", "reasoning_tokens=20", "reasoning_tokens_jitter=0"]
    with start_simulator("thinking", seed=5, extra_args=[a for o in overrides for a in ("--set", o)]) as sim:
        yield sim.url


@pytest.mark.parametrize("dialect_name", ["openai", "anthropic", "responses"])
def test_ttfo_is_the_planned_answer_start_at_64_streams(thinking_sim, dialect_name):
    """64 reasoning streams at once (20 reasoning tokens, then the answer, 10 ms apart): each
    record's TTFO is its first answer chunk, received when the simulator planned to send the first
    answer token (``answer_ms`` after it admitted the request): within 1 ms in the median on a quiet
    machine; beside two busy loops within the 5 ms the first token's receive delay is held to above.

    A stream whose first read held its answer too (the process did not run for the 150 ms of
    reasoning: twice in fresh-clone CI beside two hogs, and once 44 of 64 streams) cannot be
    measured: such streams are counted, and when more than half of them were, the 64 are sent again
    (up to three times; a client that joins reads itself misses on every try)."""
    import gevent
    from gevent.pool import Pool

    dialect = get_dialect(dialect_name)

    def one(records: list[RequestRecord], _: int) -> None:
        with make_http_client(thinking_sim) as client:
            request = dialect.build(ITEM, RequestOptions(max_tokens=30))
            request.headers["x-fourfold-plan-detail"] = "1"
            records.append(send(client, dialect, request, RequestRecord()))

    for _ in range(3):
        records: list[RequestRecord] = []
        pool = Pool(64)
        with gevent.Timeout(60):
            pool.map(functools.partial(one, records), range(64))
        lags, joined = _answer_lags(records, dialect_name)
        if joined <= 32 and len(lags) >= 16:
            break
    assert joined <= 32, f"{joined} of 64 streams read their whole reasoning in their first read"
    assert len(lags) >= 16, f"only {len(lags)} of 64 streams read their first answer token alone"
    print(f"{dialect_name}: TTFO - planned answer start, ms: median {statistics.median(lags):.3f}, "
          f"max {max(lags):.3f} over {len(lags)} streams; {joined} joined")
    # 1 ms on a quiet machine (docs/benchmarks.md); beside two busy loops the simulator itself sends late
    # (it waits for a core too): 1.7 ms in the median in 1 of 12 runs, 2.96 ms (every stream 0.6 to 4.4 ms)
    # in one CI run; the bound of test_measured_ttft_and_itl_match_the_plan's receive delay
    assert min(lags) > -0.5 and abs(statistics.median(lags)) < 5.0, sorted(lags)


def _answer_lags(records: list[RequestRecord], dialect_name: str) -> tuple[list[float], int]:
    """Each measurable stream's TTFO minus its planned answer start (ms), and how many streams were
    joined (the first read held the answer: TTFO == TTFT)."""
    lags, joined = [], 0
    for record in records:
        assert record.error_class == "truncated", record.error_detail          # max_tokens: "length"
        assert (record.reasoning_tokens, record.reasoning_tokens_source) == \
            ((20, "chunks") if dialect_name == "anthropic" else (20, "usage"))
        assert record.plan["reasoning_tokens"] == 20
        if record.ttfo_ms == record.ttft_ms:
            joined += 1
            continue
        assert record.ttfo_ms > record.ttft_ms + 150
        first = record.reasoning_chunks                 # the first answer chunk (reasoning reads may merge)
        assert 0 < first <= 20 and record.ttfo_ms == record.chunk_offsets_ms[first]
        # a read is stamped when its last byte arrived: the first answer token's own stamp only when its
        # read held no later token (~10 ms after the reasoning's last read, not ~20: the process waited)
        if record.chunk_offsets_ms[first] - record.chunk_offsets_ms[first - 1] >= 15:
            continue
        admitted_ms = (record.plan["t0_monotonic_s"] - record.sent_mono_s) * 1000
        lags.append(record.ttfo_ms - (admitted_ms + record.plan["answer_ms"]))
    return lags, joined
