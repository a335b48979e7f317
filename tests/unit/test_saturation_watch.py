"""The series --stop-on-saturation judges (fourfold/levels/l2_saturation.py): which records it keeps,
the figures of a step and the requests in flight counted from records (pure: no Locust runner)."""

from __future__ import annotations

import pytest

from fourfold.levels.l2_saturation import SaturationWatch, in_flight_samples, step_figures, stopped_lines
from fourfold.measure.record import RequestRecord


def _record(scenario: str, started_at: float, ttft_ms: float = 50.0, **kw) -> RequestRecord:
    values = {"e2e_ms": 240.0, "output_tokens": 20, **kw}
    return RequestRecord(level="l2", scenario=scenario, dialect="openai-chat", endpoint="/v1/chat",
                         item_id="x", request_id="r", started_at=started_at, ttft_ms=ttft_ms,
                         **values)


def test_only_ladder_and_sweep_steps_are_kept_never_the_probe():
    watch = SaturationWatch()
    watch.on_record(_record("ladder@8", 100.0))
    assert watch.series == {}                      # off until a test asks for verdicts
    watch.reset(True)
    for scenario in ("ladder@8", "sweep@12/s", "probe", "ladder@8@direct", "closed", "h1@8"):
        watch.on_record(_record(scenario, 100.0))
    watch.on_record(_record("ladder@8", 101.0, warmup=True))
    watch.on_record(_record("ladder@8", 101.0, error_class="http_5xx", ttft_ms=None))
    assert sorted(watch.series) == ["h1@8", "ladder@8", "sweep@12/s"]
    assert list(watch.series["ladder@8"]) == [(100.0, 50.0, 100.24, 20)]
    assert watch.bases(8) == ["h1", "ladder"] and watch.bases(16) == []


def test_an_open_loop_point_starts_at_its_intended_arrival():
    watch = SaturationWatch()
    watch.reset(True)
    watch.on_record(_record("sweep@12/s", 100.0, ttft_ms=60.0, queue_ms=500.0))
    assert list(watch.series["sweep@12/s"]) == [(99.5, 560.0, 100.24, 20)]


def test_step_figures_and_requests_in_flight():
    points = [(10.0 + i, 50.0 + i, 10.5 + i, 20) for i in range(10)]      # one a second, 0.5 s each
    figures = step_figures(points, 10.0, 5.0, users=4)
    # ended within [10, 15]: 10.5 ... 14.5 (5 requests, 100 tokens / 5 s); arrived: 10 ... 15 (p50 of 50..55)
    assert (figures.users, figures.requests, figures.output_tps) == (4, 5, 20.0)
    assert figures.ttft_p50_ms == pytest.approx(52.5)
    growing = [(float(i), 0.0, 100.0, 1) for i in range(5)]          # none ends: 1, 2, 3, 4, 5 in flight
    assert in_flight_samples(growing, 0.0) == [(0.0, 1.0), (1.0, 2.0), (2.0, 3.0), (3.0, 4.0), (4.0, 5.0)]
    assert [n for _, n in in_flight_samples(points, 10.0)] == [1.0] * 10


def test_the_stopped_line():
    assert stopped_lines(None) == []
    line, = stopped_lines({"base": "ladder", "step": 8, "at_s": 8.0, "in_step_s": 3.0,
                           "reason": "past saturation"})
    assert line == ("L2 ladder 'ladder' stopped early at 8 users, 3 s into the step (8 s into the run; "
                    "--stop-on-saturation): past saturation")
