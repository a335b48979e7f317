"""The over-saturation detector (fourfold/gates/saturation.py) is a claim: on healthy steps it stays
quiet (400 seeds per kind of noise, each judged every second as the ladder and the sweep do: not one
alarm) and it fires on a growing queue (every seed). The single-series behaviour (reasons, windows,
Little's law between steps) is in tests/unit/test_saturation.py."""

from __future__ import annotations

import pytest

from tests.calibration.latency import fires, series


@pytest.mark.parametrize("noise", [{"sigma": 0.5}, {"sigma": 1.0}, {"sigma": 0.5, "ar": 0.5},
                                   {"sigma": 0.5, "ar": 0.7}, {"sigma": 0.3, "rate": 5.0}])
def test_a_flat_noisy_step_never_fires(noise):
    """400 steps per kind of noise, each judged 6 times: not one alarm (measured: 0 in 1,000 per kind;
    a queue that wanders x7 within a second, AR 0.9, fires in about 0.2 % of steps)."""
    alarms = sum(fires(series(seed, **noise)) for seed in range(400))
    assert alarms == 0


def test_a_longer_hold_with_heavy_noise_never_fires():
    assert sum(fires(series(seed, hold=20.0, sigma=1.0), hold=20.0) for seed in range(200)) == 0


def test_a_growing_queue_fires_on_every_seed():
    """Latency 100 ms + 50 ms per second (an open loop 5 % over capacity with 1 s answers): every seed."""
    assert all(fires(series(seed, growth_ms_s=50.0)) for seed in range(100))
