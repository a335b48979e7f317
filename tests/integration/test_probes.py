"""The article's verification probes against the simulator's baseline and candidate profiles."""

from __future__ import annotations

import json

import pytest

from fourfold.gates.probe import (
    PROMPT_B,
    classify_feature,
    feature_probe,
    inflection_probe,
    token_probe,
    welch_interval,
)
from fourfold.targets.launch import start_simulator
from tests.conftest import REPO

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def sims():
    with start_simulator("baseline", seed=3) as baseline, start_simulator("candidate", seed=3) as candidate:
        yield baseline.url, candidate.url


def _profile(name: str) -> dict:
    data = json.loads((REPO / "fourfold" / "targets" / "profiles" / f"{name}.json").read_text())
    if "extends" in data:
        return {**_profile(data["extends"]), **data}
    return data


def test_inflection_separates_baseline_from_candidate(sims):
    baseline, candidate = inflection_probe(sims, n=30, pause_ms=5)
    assert baseline.failures == candidate.failures == 0
    # baseline pays the orchestrator (58 +/- 12 ms) on the structured prompt; candidate does not
    assert 35 < baseline.delta.mean < 80 and not baseline.within_threshold
    assert abs(candidate.delta.mean) < 8 and candidate.delta.low < 0 < candidate.delta.high
    assert candidate.delta.high < baseline.delta.low            # non-overlapping intervals


def test_token_probe_reports_the_planned_input_token_difference(sims):
    rows = token_probe(sims)
    planned = (_profile("candidate")["orchestrator_input_tokens"]
               - _profile("baseline")["orchestrator_input_tokens"])
    assert planned == -15
    assert rows[0].input_delta == 0 and rows[1].input_delta == planned
    assert rows[0].output_tokens == rows[1].output_tokens > 0     # same reference answer, usage reported


def test_token_probe_on_two_prompts_of_one_target(sims):
    rows = token_probe(sims[:1], ["Briefly explain quantum annealing.", PROMPT_B])
    # the baseline adds its orchestrator tokens to the structured prompt only
    words_a, words_b = (len("Briefly explain quantum annealing .".split()),
                        len("Explain quantum annealing in three points .".split()))
    assert rows[1].input_delta == (words_b - words_a) + 15


def test_feature_probe(sims):
    known = _profile("candidate")["beta_features"][0]
    baseline, candidate = feature_probe(sims, ("anthropic-beta", known))
    assert (baseline.status, baseline.verdict) == (400, "not enabled")
    assert (candidate.status, candidate.verdict) == (200, "enabled")


@pytest.mark.parametrize(("status", "body", "verdict"), [
    (200, "", "enabled"),
    (400, '{"error": "Unknown beta feature: x"}', "not enabled"),
    (400, '{"error": "max_tokens must be positive"}', "inconclusive"),
    (500, "boom", "inconclusive"),
])
def test_classify_feature(status, body, verdict):
    assert classify_feature(status, body) == verdict


def test_welch_interval():
    interval = welch_interval([10.0, 12.0, 11.0, 13.0], [20.0, 22.0, 21.0, 23.0])
    assert interval.mean == 10.0 and interval.low < 10.0 < interval.high
    assert welch_interval([1.0, 1.0], [1.0, 1.0]).contains_only_within(0.1)
