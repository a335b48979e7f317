"""Inputs whose extremes used to spin a loop, overflow a timer or hang start-up (fourfold#32 item 3)
are one line naming the option, the file and line, or the tokenizer, before anything starts."""

from __future__ import annotations

import itertools
import json
import random
import re
from argparse import Namespace

import pytest

from fourfold.errors import DatasetError, OptionError
from fourfold.levels.arrivals import ArrivalProcess, arrivals_until
from fourfold.levels.declare import check_number, within
from fourfold.levels.l2_options import GatewaySettings
from fourfold.levels.l4_options import SessionSettings
from fourfold.levels.options import Settings
from fourfold.workloads.synthetic import _draw, _exact, parse_synthetic, sample_lengths
from fourfold.workloads.tokenizer import load_tokenizer
from fourfold.workloads.trace import parse_trace


def test_a_range_rule_names_the_flag_and_the_range():
    rule = within(0.5, 4)
    assert rule == "within [0.5, 4]" and within(0.5, 4) == rule
    check_number("--x", 0.5, rule)
    check_number("--x", 4, rule)
    for bad in (0.49, 4.01, float("nan"), float("inf"), True):
        message = f"--x must be a number within [0.5, 4], got {bad!r}"
        with pytest.raises(OptionError, match=re.escape(message)):
            check_number("--x", bad, rule)


@pytest.mark.parametrize("cls, field, value, flag", [
    (GatewaySettings, "arrival_rate", 1e12, "--arrival-rate"),       # sub-nanosecond gaps
    (GatewaySettings, "arrival_rate", 1e-9, "--arrival-rate"),
    (GatewaySettings, "burstiness", 1e-9, "--burstiness"),           # gamma gaps of 0 and 1e300
    (GatewaySettings, "max_in_flight", 10**9, "--max-in-flight"),
    (GatewaySettings, "ladder_hold_s", 1e300, "--ladder-hold-s"),
    (Settings, "sample_interval_s", 1e-12, "--sample-interval"),     # a sampler loop that never sleeps
    (Settings, "trace_speed", 1e300, "--trace-speed"),
    (Settings, "read_timeout_s", 1e300, "--read-timeout"),
    (Settings, "max_tokens", 10**30, "--max-tokens"),
    (SessionSettings, "think_scale", 1e300, "--think-scale"),
])
def test_extreme_option_values_are_refused_naming_the_flag(cls, field, value, flag):
    with pytest.raises(OptionError, match=f"^{re.escape(flag)} must be a number within "):
        cls(**{field: value})


def test_the_widest_accepted_values_still_make_settings():
    gateway = GatewaySettings.from_options(Namespace(arrival_rate=100000.0, burstiness=0.01,
                                           max_in_flight=100000))
    assert gateway.arrivals == ArrivalProcess("poisson", 100000.0, 0.01)


def test_arrivals_until_counts_what_fell_due_and_is_bounded_when_far_behind():
    tenth = itertools.repeat(0.1)
    assert arrivals_until(tenth, 0, 1_000_000_000, 10.0) == 10                 # 0.1 ... 1.0 s
    assert arrivals_until(iter([0.1, 0.1]), 0, 10**9, 10.0) == 2                # a trace share ends
    assert arrivals_until(iter([2.0]), 0, 10**9, 10.0) == 0
    # 1e5/s, an hour behind: 3.6e8 arrivals, 1,000 counted one by one, the rest from the rate
    assert arrivals_until(itertools.repeat(1e-5), 0, 3600 * 10**9, 1e5, limit=1000) == pytest.approx(3.6e8,
                          rel=1e-6)


@pytest.mark.parametrize("spec, message", [
    ("input=100±" + "9" * 400, "the mean and the SD must each be at most 10,000,000 tokens"),
    ("input=20000000", "the mean and the SD must each be at most 10,000,000 tokens"),
    ("input=1000000,n=1000", "n x (input mean + SD) is 1,000,000,000 tokens, more than 20,000,000"),
    ("input=1000±5000000,n=100", "n x (input mean + SD) is 500,100,000 tokens"),
    ("input=128000,n=157", "n x (input mean + SD) is 20,096,000 tokens"),
])
def test_synthetic_lengths_that_would_hang_start_up_are_refused(spec, message):
    with pytest.raises(OptionError, match=re.escape(message)):
        parse_synthetic(spec)


def test_a_wide_spread_is_clipped_to_the_longest_prompt():
    rng = random.Random(3)
    draws = [_draw(rng, 10, 9e6) for _ in range(2000)]
    assert max(draws) == 10**7 and min(draws) < 0       # clipped above here, at 1 by sample_lengths
    spec = parse_synthetic("input=10±9000000,n=2,seed=2")
    assert all(1 <= n <= 10**7 for n, _ in sample_lengths(spec))


class _OneToken:
    """A tokenizer double that counts any text as one token (the hang the issue found)."""
    name = "one"

    def count(self, text: str) -> int:
        return 1 if text else 0

    def offsets(self, text: str) -> list[tuple[int, int]]:
        return [(0, len(text))] if text else []


def test_a_tokenizer_that_never_counts_more_is_an_error_not_a_hang():
    with pytest.raises(OptionError, match=r"^--tokenizer: it counts 1 tokens in a text of [\d,]+ characters "
                                          r"written for 50"):
        _exact("", iter(itertools.cycle(["word"])), 50, _OneToken())


def test_a_tokenizer_json_that_loads_but_counts_all_as_one_token_is_refused(tmp_path):
    tokenizers = pytest.importorskip("tokenizers")
    backend = tokenizers.Tokenizer(tokenizers.models.WordLevel({"[UNK]": 0}, unk_token="[UNK]"))
    path = tmp_path / "tokenizer.json"
    path.write_text(backend.to_str())
    with pytest.raises(OptionError, match=re.escape(f"--tokenizer {path}: counts 1 tokens in a test sentence "
                                                    f"and 1 in it four times over")):
        load_tokenizer(path)


@pytest.mark.parametrize("entry, message", [
    ({"timestamp": 1e16, "input_length": 5}, "'timestamp' must be a number of milliseconds in [0, 1e+15]"),
    ({"timestamp": 0, "input_length": 10**9}, "'input_length' must be an integer in [1, 2000000]"),
    ({"timestamp": 0, "input_length": 5, "output_length": 10**12},
     "'output_length' must be an integer in [1, 2000000]"),
])
def test_trace_entries_that_would_overflow_or_hang_are_refused(tmp_path, entry, message):
    path = tmp_path / "trace.jsonl"
    path.write_text(json.dumps({"timestamp": 0, "input_length": 5}) + "\n" + json.dumps(entry) + "\n")
    with pytest.raises(DatasetError, match=re.escape(f"{path}:2: not a trace entry: {message}")):
        parse_trace(path)
