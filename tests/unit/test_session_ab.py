"""Sticky A/B assignment (pure): proportions, stickiness, split parsing."""

from __future__ import annotations

import pytest

from fourfold.levels.l4_ab import SplitError, assign_variant, bucket, parse_split


@pytest.mark.parametrize(("text", "share"), [
    ("0.95", 0.95), ("95/5", 0.95), ("50/50", 0.5), ("95%", 0.95), ("1/3", 0.25), ("0", 0.0), ("1", 1.0),
    (0.2, 0.2),
])
def test_parse_split(text, share):
    assert parse_split(text) == pytest.approx(share)


@pytest.mark.parametrize("text", ["half", "1.5", "-1/2", "0/0", "150%"])
def test_bad_splits_say_what_is_accepted(text):
    with pytest.raises(SplitError, match="--ab-split"):
        parse_split(text)


def test_a_thousand_users_split_fifty_fifty_within_three_percent_and_never_switch():
    keys = [f"u{i}" for i in range(1000)]
    first = {key: assign_variant(key, 0.5) for key in keys}
    share_b = sum(v == "B" for v in first.values()) / len(keys)
    assert 0.47 <= share_b <= 0.53
    for _ in range(3):                       # every later look-up (any process: a pure hash) agrees
        assert {key: assign_variant(key, 0.5) for key in reversed(keys)} == first
    assert set(first.values()) == {"A", "B"}


def test_ninety_five_five_and_the_seed():
    keys = [f"w1-u{i}" for i in range(1000)]
    share_a = sum(assign_variant(k, parse_split("95/5")) == "A" for k in keys) / len(keys)
    assert 0.92 <= share_a <= 0.98
    reseeded = [assign_variant(k, 0.5, seed=7) for k in keys]
    assert reseeded != [assign_variant(k, 0.5, seed=0) for k in keys]          # users reshuffled...
    assert 0.47 <= reseeded.count("B") / len(keys) <= 0.53                       # ...same proportions
    assert all(assign_variant(k, 1.0) == "A" and assign_variant(k, 0.0) == "B" for k in keys[:50])
    assert all(0.0 <= bucket(k) < 1.0 for k in keys)
