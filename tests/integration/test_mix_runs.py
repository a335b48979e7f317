"""``--mix`` through real locust processes against the embedded simulator (issue 34, part 2).

Three tenants weighted 0.6 / 0.3 / 0.1, each with its own API key read from an environment variable
(``key_env``). The simulator's per-key rate limit (``--sim-key-rate-limit``) is set between the
rates tenants a and b send (closed loop, think time 0.5 s: about 31 requests a second in all, so a
sends ~19/s and b ~9/s against a limit of 13/s): a is throttled (429s in its row), b and c are not.
Shares are checked against the weights within 3 points, the fairness figure against its formula,
the keys against every file of the run directory and of the report.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from fourfold.measure.mixstats import jain_index
from fourfold.reports.load import group_samples, load_run
from tests.conftest import REPO, locust_env, only_run_dir, read_jsonl, run_distributed, run_locust

pytestmark = pytest.mark.integration

KEYS = {"KEY_A": "sk-mix-tenant-a-5f4e3d2c1b", "KEY_B": "sk-mix-tenant-b-0a9b8c7d6e",
        "KEY_C": "sk-mix-tenant-c-1122334455"}
ORG_SECRET = "org-secret-b-77aa88bb99"          # a secret header value of tenant b
WEIGHTS = {"a": 0.6, "b": 0.3, "c": 0.1}
MIX_TOML = f"""
[[tenant]]
name = "a"
weight = 6
key_env = "KEY_A"

[[tenant]]
name = "b"
weight = 3
key_env = "KEY_B"
model = "lora-b"
headers = {{ "X-Org-Token" = "{ORG_SECRET}" }}

[[tenant]]
name = "c"
weight = 1
key_env = "KEY_C"
public_headers = {{ "X-Team" = "research" }}
"""
COMMON = ["--headless", "--ladder", "off", "-u", "20", "-r", "20", "--sim-profile", "flat",
          "--max-tokens", "10", "--ignore-eos", "--think-time-s", "0.5", "--exit-code-on-error", "0"]


def _run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *args: str) -> tuple[str, dict, list[dict], Path]:
    for name, value in KEYS.items():
        monkeypatch.setenv(name, value)
    mix = tmp_path / "mix.toml"
    mix.write_text(MIX_TOML)
    proc = run_locust(["-f", str(REPO / "locustfiles" / "l2_gateway.py"), *COMMON, "--mix", str(mix), *args],
                      tmp_path, timeout=90)
    out = proc.stdout + proc.stderr
    run = only_run_dir(tmp_path)
    assert proc.returncode == 0, out[-4000:]
    return out, json.loads((run / "summary.json").read_text()), _measured(run), run


def _measured(run: Path) -> list[dict]:
    records = read_jsonl(run / "records.jsonl")
    return [r for r in records if not r["warmup"] and r["error_class"] != "cancelled"]


def _assert_no_secret(out: str, *folders: Path) -> None:
    secrets = [*KEYS.values(), ORG_SECRET]
    assert not [s for s in secrets if s in out]
    for folder in folders:
        for path in folder.rglob("*"):
            if path.is_file() and path.suffix in (".json", ".jsonl", ".md", ".html", ".csv"):
                text = path.read_text(errors="replace")
                assert not [s for s in secrets if s in text], f"a key leaked into {path}"


def test_a_weighted_mix_gives_per_tenant_rows_and_the_throttled_tenant_shows(tmp_path, monkeypatch):
    out, summary, records, run = _run(tmp_path, monkeypatch, "-t", "10s", "--mix-sticky", "request",
                                      "--sim-key-rate-limit", "13")
    mix = summary["mix"]
    rows = {t["name"]: t for t in mix["tenants"]}
    by_tenant = {name: [r for r in records if r["tenant"] == name] for name in WEIGHTS}
    assert sum(map(len, by_tenant.values())) == len(records) == mix["requests"] > 200
    for name, weight in WEIGHTS.items():
        row = rows[name]
        assert row["weight"] == pytest.approx(weight)
        assert row["requests"] == len(by_tenant[name])
        assert abs(row["share"] - weight) <= 0.03, (name, row["share"])
        assert row["rate_limited"] == sum(r["status"] == 429 for r in by_tenant[name])
        # the simulator's 429 names Retry-After (whole seconds, at least 1): each one is counted
        assert row["retry_after"] == row["rate_limited"] <= row["retry_after_s"]
        assert row["ok"] + row["failures"] == row["requests"]
    # the gateway throttles a (its key sends ~19/s against 13/s), never b or c
    assert rows["a"]["rate_limited"] >= 20 and rows["b"]["rate_limited"] == rows["c"]["rate_limited"] == 0
    assert rows["a"]["goodput_share"] < 0.55 < 0.6 and rows["a"]["error_rate"] > 0.1
    ratios = [rows[n]["goodput_share"] / WEIGHTS[n] for n in WEIGHTS]
    assert mix["fairness"]["jain_index"] == pytest.approx(jain_index(ratios))
    assert mix["fairness"]["jain_index"] < 0.99
    # per model: a and c send --model, b its LoRA adapter
    models = {m["model"]: m for m in mix["models"]}
    assert models["fourfold-sim"]["tenants"] == ["a", "c"] and models["lora-b"]["tenants"] == ["b"]
    assert models["lora-b"]["requests"] == rows["b"]["requests"]
    assert models["fourfold-sim"]["requests"] == rows["a"]["requests"] + rows["c"]["requests"]
    meta = json.loads((run / "meta.json").read_text())
    assert [e["name"] for e in meta["mix"]["entries"]] == ["a", "b", "c"]
    assert meta["mix"]["entries"][2]["public_headers"] == [["X-Team", "research"]]
    # the report: every tenant has a group of its own, counted as summary.json counts it (no SLO given:
    # summary.json's good is every ok request, the report shows no goodput)
    samples = group_samples([load_run(run, cache=False)])
    for name in WEIGHTS:
        sample = samples[f"l2:closed#{name}"]
        assert (sample.requests, sample.ok) == (rows[name]["requests"], rows[name]["ok"])
    assert samples["l2:closed"].requests == len(records)
    report = tmp_path / "report"
    proc = subprocess.run([sys.executable, "-m", "fourfold", "compare", "--baseline", str(run),
                           "--candidate", str(run), "--out", str(report)], cwd=tmp_path, env=locust_env(),
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    text = (report / "report.md").read_text()
    assert all(f"### l2:closed#{name}" in text for name in WEIGHTS)
    # the traffic-mix section: each side's tenants (one run on both sides: the same figures twice)
    table = text.split("## Traffic mix", 1)[1].split("\n\n", 2)[1]         # the heading, its table
    lines = [line for line in table.splitlines() if "---" not in line][1:]
    cells = [line.split(" | ")[1:] for line in lines]
    assert len(lines) == 6 and cells[:3] == cells[3:], lines
    row_a = lines[0].split(" | ")
    assert row_a[1:4] == ["a", "60.0 %", str(rows["a"]["requests"])], row_a
    assert row_a[6:8] == [str(rows["a"]["rate_limited"]), f"{rows['a']['retry_after']} "
                          f"({rows['a']['retry_after_s']:g})"]
    assert row_a[8].rstrip(" |") == f"{mix['fairness']['jain_index']:.3f}"
    _assert_no_secret(out + proc.stdout + proc.stderr, run, report)


def test_sticky_per_user_keeps_each_user_on_one_tenant(tmp_path, monkeypatch):
    out, summary, records, run = _run(tmp_path, monkeypatch, "-t", "6s")
    tenants_of_user: dict[int, set[str]] = {}
    for record in records:
        tenants_of_user.setdefault(record["user_id"], set()).add(record["tenant"])
    assert len(tenants_of_user) == 20 and all(len(t) == 1 for t in tenants_of_user.values())
    users = [next(iter(t)) for t in tenants_of_user.values()]
    assert {n: users.count(n) for n in WEIGHTS} == {"a": 12, "b": 6, "c": 2}     # seed 0: the Weyl spread
    mix = summary["mix"]
    assert mix["sticky"] == "user"
    for row in mix["tenants"]:
        assert abs(row["share"] - WEIGHTS[row["name"]]) <= 0.03, row
        assert row["rate_limited"] == 0
    assert mix["fairness"]["jain_index"] > 0.99
    _assert_no_secret(out, run)


def test_a_master_counts_its_workers_tenants(tmp_path, monkeypatch):
    """Two workers: the master's mix block counts every worker's records (it needs no shipping of its
    own), and the run-wide user index spreads the users over the tenants as one process would."""
    for name, value in KEYS.items():
        monkeypatch.setenv(name, value)
    (tmp_path / "mix.toml").write_text(MIX_TOML)
    out = run_distributed(["-f", str(REPO / "locustfiles" / "l2_gateway.py"), *COMMON[1:],
                           "--mix", str(tmp_path / "mix.toml")], ["-t", "6s"], tmp_path)
    run = only_run_dir(tmp_path)
    summary = json.loads((run / "summary.json").read_text())
    records = _measured(run)
    rows = {t["name"]: t for t in summary["mix"]["tenants"]}
    assert summary["mix"]["requests"] == len(records) > 100
    for name in WEIGHTS:
        assert rows[name]["requests"] == sum(r["tenant"] == name for r in records)
    users: dict[int, str] = {r["user_id"]: r["tenant"] for r in records}
    assert {n: list(users.values()).count(n) for n in WEIGHTS} == {"a": 12, "b": 6, "c": 2}
    _assert_no_secret(out, run)
