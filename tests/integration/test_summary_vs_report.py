"""Real runs, two outputs: summary.json (aggregated live by measure.stats, levels.l4_stats,
measure.rag, and by fourfold score after the run) and the comparison report of the same run
directory (built by fourfold compare's own API, reports.load.load_run and
reports.report.build_report) agree on every metric both show.

The metrics come from the registry (measure.metric_names). Each block of summary.json is a *view*
(its ``where`` in the registry) that meets one side and group of the report:

- ``summary``: each ``level:scenario`` group; an A/B group (``session@A``) meets the side of
  variant A, group ``l4:session``;
- ``sessions``: the L4 block per variant (the side of that variant) and its total (the whole run);
- ``rag``: the L3 block (the run's L3 group);
- ``mix``: each ``--mix`` tenant's row (the tenant's own group, ``level:scenario#tenant``);
- ``quality`` / ``quality.rag``: after ``fourfold score``, the quality block of each group, and
  its L3 part (the L3 group).

The report side is the run against a side with no runs, so every row shows the run's own value
(against a run of the same items, per-item rows show item-balanced paired means instead). Counts,
rates and times agree exactly (the report's percentages are the summary's fractions times 100),
percentiles within the histogram's alpha (summary.json buckets them, the report takes them
exactly), a value summary.json rounds (the quality blocks: 4 decimals) within that rounding. A
report row or count that the registry does not know, a number in a block that the registry does
not know, or a metric shown by both and not compared fails the test.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from fourfold.measure.metric_names import METRICS, WHERE, MetricDef, in_block, resolve, summary_value
from fourfold.reports.compare import DISCREPANCY_ROWS, REASONING_ROWS, TOKEN_ROWS, TOOL_ROWS, GroupSample
from fourfold.reports.load import RunData, base_scenario, load_run, run_variants
from fourfold.reports.report import Side, build_report
from tests.conftest import REPO, only_run_dir, run_locust

pytestmark = pytest.mark.integration

# the candidate profile pulses (about half of the answers pause ~200 ms every 20 tokens: stalls);
# the goodput SLO splits the requests (TTFT ~70 ms)
SLO = "ttft_p50<=72ms,e2e_p99<=30s"
SCORES_DECIMALS = 6                 # scores.jsonl keeps each score to 6 decimals
# without a per-request SLO summary.json counts every ok request as good; the report shows no goodput
GOODPUT = {"good", "goodput_rps"}
# single numbers summary.json reads off a histogram (the median stream's pulse frequency): within alpha
FROM_HISTOGRAM = {"pulse_hz"}


def locustfile(name: str) -> str:
    return str(REPO / "locustfiles" / name)


def _run(base: Path, args: list[str]) -> tuple[Path, dict[str, Any]]:
    proc = run_locust(args, base)
    run = only_run_dir(base)
    summary = json.loads((run / "summary.json").read_text())
    expected = summary.get("slo", {}).get("exit_code", 0)
    assert proc.returncode == expected, (proc.stdout + proc.stderr)[-3000:]
    return run, summary


@pytest.fixture(scope="module")
def l1_run(tmp_path_factory):
    base = tmp_path_factory.mktemp("l1")
    # the candidate, reasoning before half of its answers, two tokens an event (per-token ITL, and the
    # client's count of deltas half the server's)
    profile = base / "reasoning-candidate.json"
    profile.write_text(json.dumps({"extends": "candidate", "reasoning_share": 0.5, "reasoning_tokens": 12,
                                   "reasoning_tokens_jitter": 3, "tokens_per_event": 2}))
    return _run(base, [
        "-f", locustfile("l1_throughput.py"), "--headless", "-u", "6", "-r", "6", "-t", "10s",
        "--sim-profile", str(profile), "--no-ignore-eos", "--slo", SLO,   # whole answers: compliance judged
        "--price-per-hour", "4", "--price-per-1m-input", "0.5", "--price-per-1m-output", "2"])  # cost


@pytest.fixture(scope="module")
def l4_ab_run(tmp_path_factory):
    # every bundled script once, split A/B (B: the candidate profile, fewer rounds); stepwise: one
    # goal fact per answer, so the scripts with more facts than turns end at max_turns. The run ends
    # when every user has finished its session (~6 s here); -t only bounds it
    return _run(tmp_path_factory.mktemp("l4"), [
        "-f", locustfile("l4_session.py"), "--headless", "-u", "34", "-r", "34", "-t", "20s",
        "--ab-split", "50/50", "--sim-profile", "stepwise", "--patience-scale", "0", "--think-scale", "0",
        "--sessions-per-user", "1"])


@pytest.fixture(scope="module")
def l3_run(tmp_path_factory):
    return _run(tmp_path_factory.mktemp("l3"), [
        "-f", locustfile("l3_rag.py"), "--headless", "-u", "6", "-r", "6", "-t", "5s"])


@pytest.fixture(scope="module")
def mix_run(tmp_path_factory):
    # three tenants, one throttled by the simulator's per-key limit (429s in its row)
    mp = pytest.MonkeyPatch()
    for name in "abc":
        mp.setenv(f"FOURFOLD_TEST_MIX_KEY_{name}", f"sk-mix-summary-vs-report-{name}")
    try:
        return _run(tmp_path_factory.mktemp("mix"), [
            "-f", locustfile("l2_gateway.py"), "--headless", "--ladder", "off", "-u", "12", "-r", "12",
            "-t", "6s", "--sim-profile", "flat", "--max-tokens", "10", "--ignore-eos",
            "--think-time-s", "0.3",
            "--mix", "a=0.6:key_env=FOURFOLD_TEST_MIX_KEY_a,"
            "b=0.3:model=lora-b:key_env=FOURFOLD_TEST_MIX_KEY_b,"
            "c=0.1:key_env=FOURFOLD_TEST_MIX_KEY_c",
            "--mix-sticky", "request", "--sim-key-rate-limit", "10", "--slo", SLO,
            "--exit-code-on-error", "0"])          # (the 429s are the point)
    finally:
        mp.undo()


# ---- views: a summary.json block and the report's value of the same requests ----
@dataclass
class View:
    where: str                      # the block's name in the registry (measure.metric_names.WHERE)
    name: str                       # which block, for messages
    block: dict[str, Any]
    sample: GroupSample             # the report side's group
    rows: dict[str, float | None]   # the report's rows of that group: metric key -> the side's value


def _report_side(data: RunData,
                 variant: str | None) -> tuple[dict[str, GroupSample], dict[str, dict[str, Any]]]:
    """The report of ``data`` (one variant when given) against nothing: its groups and rows."""
    report = build_report(Side("run", [data], variant), [Side("nothing", [])])
    rows: dict[str, dict[str, Any]] = {}
    for row in report.comparisons[0].rows:
        assert row.candidate is None and not row.paired, row
        rows.setdefault(row.group, {})[row.metric] = row.baseline
    return report.baseline.groups, rows


def views(summary: dict[str, Any], data: RunData) -> list[View]:
    variants = run_variants(data)
    sides = {v: _report_side(data, v) for v in (None, *variants)}

    def view(where: str, name: str, block: dict[str, Any], variant: str | None, group: str) -> View:
        groups, rows = sides[variant]
        assert group in groups, f"{name}: the report has no group {group} ({sorted(groups)})"
        return View(where, name, block, groups[group], rows.get(group, {}))

    def group_view(where: str, group: str, block: dict[str, Any]) -> View:
        level, _, scenario = group.partition(":")
        variant = scenario.rpartition("@")[2] if "@" in scenario else None
        variant = variant if variant in variants else None
        name = group if where == "summary" else f"{where}[{group}]"
        return view(where, name, block, variant, f"{level}:{base_scenario(scenario, variant or '')}")

    def only_group(level: str, variant: str | None) -> str:
        names = [g for g in sides[variant][0] if g.startswith(f"{level}:")]
        assert len(names) == 1, names
        return names[0]

    out = [group_view("summary", f"{g['level']}:{g['scenario']}", g) for g in summary["groups"]]
    sessions = summary.get("sessions")
    if sessions:
        out += [view("sessions", f"sessions[{v}]", block, v, only_group("l4", v))
                for v, block in sessions["by_variant"].items()]
        out.append(view("sessions", "sessions[total]", sessions["total"], None, only_group("l4", None)))
    if "rag" in summary:
        out.append(view("rag", "rag", summary["rag"], None, only_group("l3", None)))
    if summary.get("cost"):
        out.append(view("cost", "cost", summary["cost"], None, only_group(summary["level"], None)))
    out += [view("embed", f"embed[{scenario}]", block, None, f"embed:{scenario}")
            for scenario, block in (summary.get("embed") or {}).items()]
    for row in (summary.get("mix") or {}).get("tenants", []):
        own = [g for g in sides[None][0] if g.endswith(f"#{row['name']}")]
        assert len(own) == 1, own
        out.append(view("mix", f"mix[{row['name']}]", row, None, own[0]))
    quality = summary.get("quality")
    if quality:
        out += [group_view("quality", name, block) for name, block in quality["by_scenario"].items()]
        if "rag" in quality:
            out.append(view("quality.rag", "quality.rag", quality["rag"], None, only_group("l3", None)))
    return out


def _sample_numbers() -> set[str]:
    return {f.name for f in dataclasses.fields(GroupSample)
            if f.type in ("int", "float", "int | None", "float | None")}


def _agree(metric: MetricDef, shown: str, summary: float, report: float, alpha: float) -> bool:
    scale = 100.0 if metric.kind == "ratio" else 1.0  # a fraction in summary.json, % in the report rows
    if metric.decimals is not None:                   # summary.json rounds it; the report reads scores.jsonl
        return abs(scale * summary - report) <= scale * (0.5 * 10 ** -metric.decimals
                                                         + 0.5 * 10 ** -SCORES_DECIMALS + 1e-12)
    if metric.kind == "distribution" or metric.name in FROM_HISTOGRAM:
        return abs(summary - report) <= alpha * abs(report) + 1e-9
    if metric.kind == "ratio":
        return report == pytest.approx(scale * summary, rel=1e-12, abs=1e-12)
    return summary == report                              # counts, rates, times and means: exactly


def compare(summary: dict[str, Any], data: RunData) -> dict[str, dict[str, tuple[float, float]]]:
    """Every metric of every view that both sides show, compared; ``{view name: {metric:
    (summary.json, report)}}`` of the values shown (a metric neither shows is left out)."""
    alpha = summary["histogram_alpha"]
    sample_numbers = _sample_numbers()
    not_in_report = set() if summary.get("slo_ms") else GOODPUT
    out: dict[str, dict[str, tuple[float, float]]] = {}
    for v in views(summary, data):
        compared: dict[str, tuple[float, float]] = {}
        checked: set[str] = set()
        for metric in METRICS:
            if v.where not in metric.where or "report" not in metric.where:
                continue
            for shown in metric.report:
                theirs = v.rows[shown] if shown in v.rows else getattr(v.sample, shown, None)
                if isinstance(theirs, np.ndarray):      # a sample's per-request values, not a figure shown
                    theirs = None
                ours = summary_value(v.block, shown)
                checked.add(shown)
                if shown in not_in_report and v.where == "summary":
                    assert theirs is None and ours is not None, f"{v.name} {shown}: {ours!r} vs {theirs!r}"
                    continue
                if ((shown in REASONING_ROWS and not v.sample.requests_reasoning)
                        or (shown in TOKEN_ROWS and not v.sample.multi_token_chunks)
                        or (shown in DISCREPANCY_ROWS and not v.sample.tokens_discrepant)
                        or (shown in TOOL_ROWS and not v.sample.tool_calls)
                        or (shown == "output_tps" and v.sample.inputs_total)):    # embeddings: none
                    assert theirs is None, f"{v.name} {shown}: a row the report shows only where it applies"
                    continue          # (e.g. the reasoning rows: only where an answer reasoned)
                if ours is None and theirs is None:
                    continue
                assert ours is not None and theirs is not None, (
                    f"{v.name} {shown}: summary.json {ours!r}, report {theirs!r}: "
                    "one shows it, the other not")
                assert _agree(metric, shown, ours, theirs, alpha), (
                    f"{v.name} {shown} ({metric.kind}): summary.json {ours!r} vs report {theirs!r}")
                compared[shown] = (ours, theirs)
        # anything the report shows that this block also has must have been compared above
        shown_by_report = set(v.rows) | {n for n in sample_numbers if getattr(v.sample, n) is not None}
        for key in shown_by_report:
            assert resolve(key) is not None, \
                f"the report shows {key!r}, which measure.metric_names does not define"
            if summary_value(v.block, key) is not None:
                assert key in checked, f"{key} is in {v.name} and in the report but was not compared"
        # and every number of the block is a registered metric of it (the quality block's counts
        # of scored answers are fourfold score's bookkeeping: not in the registry, not in the report)
        if v.where != "quality":
            _, unknown = in_block(v.block, v.where)
            assert not unknown, \
                f"{v.name}: numbers measure.metric_names does not define for {v.where!r}: {unknown}"
        out[v.name] = compared
    return out


def shared(where: str) -> set[str]:
    """The names the registry says summary.json's ``where`` blocks and the report both show."""
    return {n for m in METRICS if where in m.where and "report" in m.where for n in m.report}


def _load(run: Path) -> RunData:
    return load_run(run, cache=False)


# ---- the runs ----
def test_l1_every_group_metric_agrees(l1_run):
    run, summary = l1_run
    result = compare(summary, _load(run))
    assert list(result) == ["l1:saturation", "cost"]
    compared = result["l1:saturation"]
    # the run exercised what it is meant to: stalls, a goodput split, percentiles, every shared count
    assert 0 < compared["requests_with_stall"][0] < compared["requests"][0]
    assert 0 < compared["good"][0] < compared["ok"][0]
    assert compared["ttft_p50"][0] > 0 and compared["itl_p99"][0] > 150      # the pauses are in the ITL tail
    # half the answers reasoned (~12 tokens at the candidate's 15 ms ITL) and the prefix cache was asked
    assert 0.3 < compared["reasoning_share"][0] < 0.7 and compared["reasoning_p50"][0] > 100
    assert compared["ttfo_p50"][0] > compared["ttft_p50"][0] and compared["cache_input_tokens"][0] > 0
    # two tokens an event: per-token ITL about half the chunks', the client counted half the tokens
    assert compared["multi_token_chunk_share"][0] > 0.8
    assert compared["token_count_ratio"][0] == pytest.approx(2, rel=0.1)
    assert set(compared) == shared("summary") - set(TOOL_ROWS) and len(shared("summary")) >= 20
    # the cost block: its prices over the run, the simulated GPU's power (telemetry) over its tokens
    cost = result["cost"]
    assert set(cost) == shared("cost")
    assert cost["cost_per_1m_output"][0] > 2 and cost["joules_per_token"][0] > 0


def test_l4_sessions_agree_per_variant_and_in_total(l4_ab_run):
    run, summary = l4_ab_run
    result = compare(summary, _load(run))
    assert sorted(result) == ["l4:session@A", "l4:session@B", "sessions[A]", "sessions[B]", "sessions[total]"]
    for name in ("l4:session@A", "l4:session@B"):
        # no SLO: no goodput; no reasoning: no reasoning rows; reads may merge events (34 users): the
        # per-token rows may show
        optional = {*TOKEN_ROWS, *DISCREPANCY_ROWS, *TOOL_ROWS}
        expected = shared("summary") - GOODPUT - set(REASONING_ROWS) - optional
        assert set(result[name]) - optional == expected, name
    for name in ("sessions[A]", "sessions[B]", "sessions[total]"):    # (scripted sessions: no tool calls)
        assert set(result[name]) == shared("sessions") - {"tool_calls_per_session"}, name
    a, b, total = (result[f"sessions[{v}]"] for v in ("A", "B", "total"))
    assert a["sessions_ended"][0] + b["sessions_ended"][0] == total["sessions_ended"][0] == 34
    for block in (a, b):                   # some scripts run out of turns: completion is a real rate
        assert 0 < block["completion_rate"][0] < 1 and block["rounds_mean"][0] > 1
    assert b["rounds_mean"][0] < a["rounds_mean"][0]        # the candidate states more of the goal per answer


def test_l3_rag_block_agrees(l3_run):
    run, summary = l3_run
    result = compare(summary, _load(run))
    assert sorted(result) == ["l3:rag", "rag"]
    # the reference RAG service reports no prefix cache: no cache_hit_share on either side; the per-token
    # rows show where its events carried several tokens
    optional = {*TOKEN_ROWS, *DISCREPANCY_ROWS, *TOOL_ROWS}
    expected = shared("summary") - GOODPUT - set(REASONING_ROWS) - {"cache_hit_share"} - optional
    assert set(result["l3:rag"]) - optional == expected
    rag = result["rag"]
    assert set(rag) == shared("rag")
    assert rag["requests"][0] >= 30 and 0 < rag["recall_at_k"][0] < 1 and 0 < rag["precision_at_k"][0] < 1


@pytest.fixture(scope="module")
def embed_run(tmp_path_factory):
    base = tmp_path_factory.mktemp("embed")
    profile = base / "embed.json"
    profile.write_text(json.dumps({"extends": "flat", "embed_ms": 5, "embed_ms_per_input": 2}))
    return _run(base, ["-f", locustfile("embeddings.py"), "--headless", "-u", "2", "-r", "2", "-t", "4s",
                       "--sim-profile", str(profile), "--embed-batch", "1,8"])


def test_embed_block_agrees(embed_run):
    run, summary = embed_run
    result = compare(summary, _load(run))
    for scenario in ("embeddings@b1", "embeddings@b8"):
        assert set(result[f"embed[{scenario}]"]) == shared("embed"), scenario
        assert result[f"embed[{scenario}]"]["inputs_per_s"][0] > 0


def test_mix_tenants_agree_with_their_groups(mix_run):
    run, summary = mix_run
    result = compare(summary, _load(run))
    assert set(result) == {"l2:closed", "mix[a]", "mix[b]", "mix[c]"}
    for name in "abc":
        assert set(result[f"mix[{name}]"]) == shared("mix"), name
    assert result["mix[a]"]["error_rate"][0] > 0            # the throttled tenant: its 429s
    assert result["mix[b]"]["error_rate"][0] == result["mix[c]"]["error_rate"][0] == 0
    assert sum(result[f"mix[{n}]"]["requests"][0] for n in "abc") == result["l2:closed"]["requests"][0]


def test_every_block_of_summary_json_is_covered_by_a_run_here():
    blocks = set(WHERE) - {"report"}
    covered = {"summary", "sessions", "rag", "embed", "cost", "mix", "quality", "quality.rag"}  # its tests
    assert blocks == covered, f"a block of summary.json no test here compares: {sorted(blocks - covered)}"


# ---- after fourfold score: the quality blocks (the real MiniLM model) ----
@pytest.fixture(scope="module")
def minilm():
    from fourfold.fingerprint.embedder import MiniLMEmbedder

    embedder = MiniLMEmbedder()
    embedder.load()
    return embedder


@pytest.mark.slow
def test_quality_blocks_agree_after_scoring(l1_run, l4_ab_run, l3_run, minilm, tmp_path):
    from fourfold.fingerprint.runscore import score_run

    results = {}
    for name, (run, _) in {"l1": l1_run, "l4": l4_ab_run, "l3": l3_run}.items():
        copy = tmp_path / name
        shutil.copytree(run, copy)         # the other tests' runs stay unscored
        score_run(copy, minilm, progress=False)
        summary = json.loads((copy / "summary.json").read_text())
        results[name] = compare(summary, _load(copy))
    quality = {f"{run}/{view}": values for run, result in results.items() for view, values in result.items()
               if view.startswith("quality[")}
    # every group's answers were scored; the bundled prompts ask some for a number of items
    assert set(quality) == {"l1/quality[l1:saturation]", "l3/quality[l3:rag]", "l4/quality[l4:session@A]",
                            "l4/quality[l4:session@B]"}
    assert all({"similarity_mean", "similarity_p5"} <= set(values) for values in quality.values())
    l3_only = {"fact_error_rate"}                 # the answers' facts are the RAG corpus's
    assert set(quality["l1/quality[l1:saturation]"]) == shared("quality") - l3_only
    assert l3_only <= set(quality["l3/quality[l3:rag]"])  # every bundled RAG answer states a labelled fact
    assert set(results["l3"]["quality.rag"]) == shared("quality.rag")
    assert 0 < results["l3"]["quality.rag"]["groundedness_mean"][0] <= 1
