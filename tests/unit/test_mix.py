"""``--mix`` as pure code: the spec parsed and checked, the draws, the per-tenant block and Jain's
index, a tenant's group in reports, the simulator's per-key bucket, the web UI's rows, the secrets."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pandas as pd
import pytest

from fourfold.errors import OptionError
from fourfold.levels.options import Settings, redacted
from fourfold.levels.webui_panels import mix_rows
from fourfold.measure.mixstats import MixStats, jain_index, mix_block
from fourfold.measure.record import RequestRecord
from fourfold.reports.document import Side
from fourfold.reports.mixsection import mix_section, pool_mix
from fourfold.reports.tenants import is_tenant_group, tenant_groups, tenant_scenario
from fourfold.targets.sim.gateway import KeyRateLimit, api_key_of
from fourfold.workloads.mix import MixPicker, parse_mix

ENV = {"KEY_A": "sk-unit-a-123456", "KEY_B": "sk-unit-b-654321"}


def test_inline_spec_normalises_weights_and_reads_keys_from_the_environment():
    mix = parse_mix("a=6:key_env=KEY_A:model=lora-a, b=3:key_env=KEY_B:header=X-Org=acme, c=1", ENV)
    assert mix.names == ("a", "b", "c")
    assert [e.weight for e in mix.entries] == pytest.approx([0.6, 0.3, 0.1])
    a, b, c = mix.entries
    assert (a.model, a.api_key, b.model, c.api_key) == ("lora-a", "sk-unit-a-123456", "", "")
    assert a.request_headers() == {"Authorization": "Bearer sk-unit-a-123456"}
    assert b.request_headers("x-api-key") == {"X-Org": "acme", "x-api-key": "sk-unit-b-654321"}
    assert "sk-unit" not in repr(mix) and "acme" not in repr(mix)
    assert set(mix.secret_values()) == {"sk-unit-a-123456", "sk-unit-b-654321", "acme"}
    assert a.describe() == {"name": "a", "weight": 0.6, "model": "lora-a", "key_set": True, "headers": [],
                            "public_headers": []}


@pytest.mark.parametrize("suffix", ["toml", "json"])
def test_a_file_gives_the_same_mix(tmp_path, suffix):
    path = tmp_path / f"mix.{suffix}"
    entries = [{"name": "a", "weight": 0.75, "key_env": "KEY_A", "public_headers": {"X-Team": "r"}},
               {"name": "b", "weight": 0.25, "model": "m2"}]
    if suffix == "json":
        path.write_text(json.dumps({"tenants": entries}))
    else:
        path.write_text('[[tenant]]\nname = "a"\nweight = 0.75\nkey_env = "KEY_A"\n'
                        'public_headers = { "X-Team" = "r" }\n\n'
                        '[[tenant]]\nname = "b"\nweight = 0.25\nmodel = "m2"\n')
    mix = parse_mix(str(path), ENV)
    assert mix.weights() == {"a": 0.75, "b": 0.25}
    assert mix.entries[0].public_headers == (("X-Team", "r"),) and mix.public_values() == ("r",)
    assert mix.entries[1].model == "m2"


@pytest.mark.parametrize("spec, message", [
    ("a=0.5,a=0.5", "a come more than once"),
    ("a=0", "weight must be > 0"),
    ("a=-1", "weight must be > 0"),
    ("a=x", "is not a number"),
    ("a b=1", "the name must be"),
    ("a", "expected NAME=WEIGHT"),
    ("a=1:key_env=NOPE", "NOPE (key_env) is not set"),
    ("a=1:key=sk-x:key_env=KEY_A", "key or key_env, not both"),
    ("a=1:colour=red", "unknown field"),
    ("a=1:header=Bad Name=v", "no header name"),
    ("missing.toml", "no such file"),
])
def test_a_bad_spec_is_one_error_naming_the_flag(spec, message):
    with pytest.raises(OptionError, match="--mix") as info:
        parse_mix(spec, ENV)
    assert message in str(info.value)


def test_shares_follow_the_weights_per_request_and_per_user():
    mix = parse_mix("a=0.6,b=0.3,c=0.1", {})
    counts = dict.fromkeys(mix.names, 0)
    for user in range(20):
        picker = MixPicker(mix, "request", 0, user)
        for _ in range(15):
            counts[picker.next().name] += 1
    assert {n: round(c / 300, 2) for n, c in counts.items()} == {"a": 0.6, "b": 0.3, "c": 0.1}
    users = [MixPicker(mix, "user", 0, u).next().name for u in range(20)]
    assert {n: users.count(n) for n in mix.names} == {"a": 12, "b": 6, "c": 2}
    sticky = MixPicker(mix, "user", 3, 7)
    assert len({sticky.next().name for _ in range(10)}) == 1
    with pytest.raises(OptionError, match="--mix-sticky"):
        MixPicker(mix, "session", 0, 0)
    assert MixPicker.of(parse_mix("", {}), "user", 0, 0) is None


@pytest.mark.parametrize("values, expected", [([1, 1, 1], 1.0), ([1, 0, 0], 1 / 3), ([2, 1], 0.9),
                                              ([], None), ([0, 0], None)])
def test_jain_index(values, expected):
    assert jain_index(values) == (pytest.approx(expected) if expected is not None else None)


def _record(tenant: str, status: int = 200, ttft: float = 50.0, **kw) -> RequestRecord:
    ok = status == 200
    return RequestRecord(level="l2", scenario="closed", tenant=tenant, status=status, started_at=1000.0,
                         error_class="ok" if ok else "rate_limited", ttft_ms=ttft if ok else None,
                         e2e_ms=100.0 if ok else 1.0, output_tokens=10 if ok else 0, **kw)


def test_the_mix_block_counts_per_tenant_and_model_and_gives_the_fairness():
    stats = MixStats(150.0, {})
    for _ in range(6):
        stats.add(_record("a"))
    for status in (200, 200, 429, 429):
        stats.add(_record("b", status))
    stats.add(_record("b", 429, extra={"retry_after_s": 2.0}))      # a throttled answer asking 2 s
    stats.add(_record("b", 200, extra={"retry_after_s": 9.0}))      # not a throttled answer
    stats.add(_record("c", warmup=True))          # left out, as LLMStats leaves it out
    stats.add(_record(""))                        # not a mix request
    block = mix_block(stats, {"a": 0.5, "b": 0.4, "c": 0.1}, {"a": "m", "b": "lora", "c": "m"}, "request")
    rows = {t["name"]: t for t in block["tenants"]}
    assert block["requests"] == 12 and block["sticky"] == "request"
    assert (rows["a"]["requests"], rows["a"]["share"]) == (6, 0.5)
    assert rows["a"]["goodput_share"] == pytest.approx(6 / 9)
    assert (rows["b"]["rate_limited"], rows["b"]["ok"], rows["b"]["error_rate"]) == (3, 3, 0.5)
    assert (rows["b"]["retry_after"], rows["b"]["retry_after_s"], rows["a"]["retry_after"]) == (1, 2.0, 0)
    assert rows["c"]["requests"] == 0 and rows["c"]["goodput_share"] == 0.0
    assert rows["a"]["ttft_ms"]["p50"] == pytest.approx(50.0, rel=0.01)
    assert block["fairness"]["jain_index"] == pytest.approx(jain_index([6 / 9 / 0.5, 3 / 9 / 0.4, 0.0]))
    models = {m["model"]: m for m in block["models"]}
    assert models["m"]["tenants"] == ["a", "c"] and models["m"]["weight"] == 0.6
    assert models["lora"]["requests"] == 6 and models["lora"]["rate_limited"] == 3
    panel = {r["metric"]: r["value"] for r in mix_rows(block)}
    assert panel["tenant a: requests, share (weight)"] == "6, 50.00 % (50.00 %)"
    assert panel["tenant b: 429s"] == "3"
    assert panel["tenant b: Retry-After answers (s asked)"] == "1 (2.0)"
    assert panel["fairness (Jain, goodput share / weight)"] == f"{block['fairness']['jain_index']:.3f}"
    assert "model lora: 429s" in panel


def test_a_tenants_own_group_in_reports():
    assert tenant_scenario("closed", "", "a") == "closed#a"
    assert tenant_scenario("session@A", "A", "a") == "session#a@A"
    assert is_tenant_group("l2:closed#a") and not is_tenant_group("l2:closed")
    frame = pd.DataFrame({"tenant": pd.Categorical(["a", "", "b", "a"]), "x": [1, 2, 3, 4]})
    names = pd.Series(["l2:closed"] * 4)
    groups = {name: rows["x"].tolist() for name, rows in tenant_groups(frame, names)}
    assert groups == {"l2:closed#a": [1, 4], "l2:closed#b": [3]}
    assert tenant_groups(frame.assign(tenant=pd.Categorical([""] * 4)), names) == []


def test_the_simulators_bucket_per_key():
    assert api_key_of({"authorization": "Bearer sk-1"}) == "sk-1"
    assert api_key_of({"x-api-key": "k2"}) == "k2" and api_key_of({}) == ""
    limit = KeyRateLimit(2.0)                 # 2 a second, a burst of 2
    assert [limit.take("a", 0.0) for _ in range(3)] == [0.0, 0.0, pytest.approx(0.5)]
    assert limit.take("b", 0.0) == 0.0        # another key, its own bucket
    assert limit.take("a", 0.5) == 0.0 and limit.take("a", 0.5) > 0
    assert KeyRateLimit(0).take("a", 0.0) == 0.0


def test_a_mix_key_is_a_secret_of_the_run(monkeypatch):
    for name, value in ENV.items():
        monkeypatch.setenv(name, value)
    settings = Settings(mix="a=0.5:key_env=KEY_A:header=X-Org-Token=tok-secret-99, b=0.5:key_env=KEY_B")
    secrets = settings.secrets()
    assert secrets.scrub("key sk-unit-a-123456 and tok-secret-99") == "key *** and ***"
    assert "sk-unit" not in json.dumps(redacted(settings))
    inline = Settings(mix="a=1:key=sk-inline-abcdef")
    assert "sk-inline-abcdef" not in json.dumps(redacted(inline))
    with pytest.raises(OptionError, match="--mix"):
        Settings.from_options(type("Options", (), {"mix": "a=0"})())


def _tenant(name: str, weight: float, requests: int, good: int, limited: int = 0, asked: float = 0.0) -> dict:
    return {"name": name, "weight": weight, "requests": requests, "good": good, "rate_limited": limited,
            "retry_after": limited if asked else 0, "retry_after_s": asked}


def test_pooled_runs_sum_the_counts_and_take_the_shares_and_fairness_from_the_sums():
    first = {"tenants": [_tenant("a", 0.75, 30, 20, 10, 10.0), _tenant("b", 0.25, 10, 10)]}
    second = {"tenants": [_tenant("a", 0.75, 50, 50), _tenant("b", 0.25, 10, 10)]}
    pooled = pool_mix([first, second])
    rows = {t["name"]: t for t in pooled["tenants"]}
    assert (rows["a"]["requests"], rows["a"]["share"], rows["a"]["goodput_share"]) == (80, 0.8, 70 / 90)
    assert (rows["a"]["rate_limited"], rows["a"]["retry_after"], rows["a"]["retry_after_s"]) == (10, 10, 10.0)
    assert pooled["jain_index"] == pytest.approx(jain_index([70 / 90 / 0.75, 20 / 90 / 0.25]))
    assert pool_mix([])["jain_index"] is None


def test_the_report_section_shows_each_side_once_and_each_run_of_two_variants_once(tmp_path):
    mix = {"tenants": [_tenant("a", 0.5, 6, 6), _tenant("b", 0.5, 4, 2, 2, 3.0)]}
    run = SimpleNamespace(path=tmp_path / "r1", label="r1", summary={"mix": mix})
    plain = SimpleNamespace(path=tmp_path / "r2", label="r2", summary={"total": {}})
    section = mix_section([Side("base", [run]), Side("cand", [run, plain])])     # type: ignore[list-item]
    assert section is not None
    rows = [line for line in section.markdown.splitlines() if line.startswith("| ") and "---" not in line]
    jain = f"{jain_index([0.75 / 0.5, 0.25 / 0.5]):.3f}"
    assert rows[1:] == [f"| base | a | 50.0 % | 6 | 60.0 % | 75.0 % | 0 | 0 (0) | {jain} |",
                        "|  | b | 50.0 % | 4 | 40.0 % | 25.0 % | 2 | 2 (3) |  |",
                        f"| cand | a | 50.0 % | 6 | 60.0 % | 75.0 % | 0 | 0 (0) | {jain} |",
                        "|  | b | 50.0 % | 4 | 40.0 % | 25.0 % | 2 | 2 (3) |  |"]
    assert "<td>cand</td>" in section.html
    variants = [Side("r1 variant A", [run], variant="A"), Side("r1 variant B", [run], variant="B")]
    shown = mix_section(variants)                                                 # type: ignore[arg-type]
    assert shown is not None and shown.markdown.count("| r1 |") == 1 and shown.markdown.count(" | b | ") == 1
    assert mix_section([Side("x", [plain])]) is None                             # type: ignore[list-item]
