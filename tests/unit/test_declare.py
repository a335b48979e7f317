"""Options declared once (fourfold.levels.declare): Locust's parser, the start form and the typed
settings all come from the settings fields' declarations, and every rule names its flag."""

from __future__ import annotations

import dataclasses
import math
import re
from typing import Any

import pytest
from locust.argument_parser import get_empty_argument_parser

from fourfold.errors import OptionError
from fourfold.levels import l2_options, l3_rag, l4_options, options
from fourfold.levels.declare import GROUPS, check_number, declared, option, read_options
from fourfold.levels.l2_options import GatewaySettings
from fourfold.levels.l3_rag import RagOptions
from fourfold.levels.l4_options import SessionSettings
from fourfold.levels.options import Settings

SETTINGS = (Settings, GatewaySettings, SessionSettings, RagOptions)


def parser_with_every_option() -> Any:
    parser = get_empty_argument_parser()
    options.register(parser)                  # the common options and L4's
    l2_options.register(parser)
    l3_rag.register_options(parser)           # L3 adds its own
    return parser


@pytest.mark.parametrize("cls", SETTINGS, ids=lambda c: c.__name__)
def test_every_field_is_an_option_in_a_known_group(cls: type) -> None:
    fields = {f.name for f in dataclasses.fields(cls)}
    assert {item.name for item, _ in declared(cls)} == fields
    assert {opt.group for _, opt in declared(cls)} <= set(GROUPS)


def test_flags_and_parsed_names_are_unique_across_the_settings() -> None:
    flags = [opt.flag for cls in SETTINGS for _, opt in declared(cls)]
    names = [opt.parsed_name for cls in SETTINGS for _, opt in declared(cls)]
    assert len(flags) == len(set(flags)) and len(names) == len(set(names))


def test_the_parser_built_from_the_declarations_gives_the_default_settings() -> None:
    parsed = parser_with_every_option().parse_args([])
    assert Settings.from_options(parsed) == Settings()
    assert GatewaySettings.from_options(parsed) == GatewaySettings()
    assert SessionSettings.from_options(parsed) == SessionSettings()
    assert RagOptions(**read_options(RagOptions, parsed)) == RagOptions()
    assert Settings.from_options(None) == Settings()


def test_each_declaration_reads_its_flag_into_its_field() -> None:
    parsed = parser_with_every_option().parse_args([
        "--read-timeout", "5", "--no-stream", "--max-tokens", "64", "--header", "X-A: 1",
        "--header-public", "X-V: 2", "--dataset-column", "prompt=q", "--metrics-url", "http://a/m",
        "--metrics-url", "http://b/m,http://a/m", "--no-record-text", "--rag-top-k", "5",
        "--ladder", "2,4", "--arrival-rate", "7", "--ab-split", "50/50", "--ab-host", "http://b/"])
    settings = Settings.from_options(parsed)
    assert (settings.read_timeout_s, settings.stream, settings.max_tokens, settings.record_text) == \
        (5.0, False, 64, False)
    assert settings.headers == (("X-A", "1"),) and settings.public_headers == (("X-V", "2"),)
    assert settings.dataset_columns == (("prompt", "q"),) and settings.rag_top_k == 5
    assert settings.metrics_url == "http://a/m,http://b/m"
    gateway = GatewaySettings.from_options(parsed)
    assert gateway.ladder == (2, 4) and gateway.arrivals.rate_rps == 7.0
    session = SessionSettings.from_options(parsed)
    assert session.ab_share_a == 0.5 and session.ab_host == "http://b"


def test_the_start_form_shows_what_the_declarations_say() -> None:
    shown = set(parser_with_every_option().args_included_in_web_ui)
    for cls in SETTINGS:
        for _, opt in declared(cls):
            expected = opt.web_ui and cls is not SessionSettings     # L4 shows its own for L4 only
            assert (opt.parsed_name in shown) is expected, opt.flag
    assert "headers" not in shown and "junit" not in shown and "api_key" in shown


def test_secrets_stay_out_of_repr() -> None:
    text = repr(Settings(api_key="sk-123", headers=(("X-Key", "v-456"),)))
    assert "sk-123" not in text and "v-456" not in text


def test_the_secrets_the_start_form_guards_are_the_declared_secrets_it_shows() -> None:
    shown = parser_with_every_option().args_included_in_web_ui
    assert options.SECRET_OPTIONS == {"api_key", "history"}          # a history URL may hold a password
    assert all(shown[name].is_secret for name in options.SECRET_OPTIONS)          # a password field
    assert {name for name, arg in shown.items() if arg.is_secret} == options.SECRET_OPTIONS
    meta = options.redacted(Settings(api_key="sk-123", headers=(("X-Key", "v-456"),),
                                     history="postgresql://team:pw-789@db/fourfold"))
    assert meta["api_key"] == "***" and meta["headers"] == [["X-Key", "***"]] and meta["history"] == "***"


RULED = [(cls, item.name, opt.flag, opt.rule) for cls in SETTINGS for item, opt in declared(cls)
         if opt.rule is not None]


@pytest.mark.parametrize(("cls", "name", "flag", "rule"), RULED, ids=[r[2] for r in RULED])
def test_every_rule_refuses_a_bad_number_and_names_its_flag(cls: type, name: str, flag: str,
                                                            rule: str) -> None:
    for bad in (math.nan, math.inf, -1):
        with pytest.raises(OptionError, match=f"^{re.escape(flag)} must be a number {re.escape(rule)}, got"):
            cls(**{name: bad})


def test_the_rules_cover_the_numbers_a_run_reads() -> None:
    assert len(RULED) >= 20
    assert {"--read-timeout", "--mirror-share", "--max-in-flight", "--think-scale"} <= {r[2] for r in RULED}


def test_check_number_and_option_refuse_what_they_should() -> None:
    check_number("--x", 0.5, "within [0, 1]")
    with pytest.raises(OptionError, match="--x must be a number > 0, got True"):
        check_number("--x", True, "> 0")
    with pytest.raises(ValueError, match="unknown settings group"):
        option(1, "--x", "nowhere", help="")
    with pytest.raises(ValueError, match="unknown rule"):
        option(1, "--x", "target", help="", rule="odd")
    with pytest.raises(TypeError, match="immutable"):
        option([], "--x", "target", help="")


def test_l4_shows_its_own_options_by_their_parsed_names() -> None:
    assert l4_options.L4_DESTS == ("think_scale", "patience_scale", "sessions_per_user", "tool_latency_ms",
                                   "agent_max_rounds", "ab_split", "ab_host", "ab_profile", "ab_seed")
