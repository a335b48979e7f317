"""The probes, ``fourfold score`` and ``fourfold compare`` on a real llama.cpp server's answers."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.conftest import locust_env, read_jsonl
from tests.real.capture import capture
from tests.real.conftest import MODEL_ALIAS, start_llama_server, stop
from tests.real.harness import assert_every_request_classified, run_real

pytestmark = [pytest.mark.real, pytest.mark.integration]

FOURFOLD = [sys.executable, "-m", "fourfold"]


def fourfold(*args: str, cwd=None, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*FOURFOLD, *args], capture_output=True, text=True, timeout=timeout, cwd=cwd,
                          env=locust_env(), check=False)


def probe(llama, kind: str, *args: str) -> list[dict]:
    proc = fourfold("probe", kind, "--host", llama.url, "--model", MODEL_ALIAS, "--json", *args)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    return json.loads(proc.stdout[proc.stdout.index("["):])


def test_probe_feature_any_header_is_accepted(llama):
    [row] = probe(llama, "feature", "--header", "x-fourfold-feature: on")
    assert (row["status"], row["verdict"]) == (200, "enabled"), row


def test_probe_inflection_measures_real_first_tokens(llama):
    [row] = probe(llama, "inflection", "-n", "4", "--warmup", "1", "--pause-ms", "20")
    assert row["failures"] == 0 and row["n"] == 4, row
    assert 0 < row["ttft_a_ms"] < 5000 and 0 < row["ttft_b_ms"] < 5000, row
    assert row["delta_b_minus_a_ms"] == pytest.approx(row["ttft_b_ms"] - row["ttft_a_ms"], abs=0.01)


def test_probe_tokens_reads_the_servers_usage(llama):
    prompt = "Say hi."
    [row] = probe(llama, "tokens", "--prompt", prompt)
    assert row["error"] == "", row
    status, _, raw = capture(llama.url, {"model": MODEL_ALIAS,
                                         "messages": [{"role": "user", "content": prompt}], "max_tokens": 8})
    usage = json.loads(raw)["usage"]
    # the chat template's tokens too
    assert status == 200 and row["input_tokens"] == usage["prompt_tokens"] > 3
    assert 0 < row["output_tokens"] <= 256


@pytest.fixture(scope="module")
def stock_server(tmp_path_factory):
    """A second server as ``python -m llama_cpp.server`` starts by default (interrupt_requests on),
    on 1 thread."""
    server = start_llama_server(tmp_path_factory.mktemp("stock"), n_threads=1, interrupt_requests=True)
    yield server
    stop(server.process)


@pytest.fixture(scope="module")
def two_configurations(llama, stock_server, tmp_path_factory):
    """L1, one user (nothing to interrupt), the same prompts: the session's server (2 threads) and the
    stock one (1 thread)."""
    base = tmp_path_factory.mktemp("compare")
    extra = ["--max-tokens", "24", "--warmup-requests", "0", "--metrics-url", "off"]
    two = run_real(llama, base / "two", "l1_throughput.py", users=1, seconds=8,
                   extra=[*extra, "--label", "threads2"])
    one = run_real(stock_server, base / "one", "l1_throughput.py", users=1, seconds=8,
                   extra=[*extra, "--label", "threads1"])
    return base, two, one


def test_stock_server_cuts_a_running_stream_when_another_arrives(stock_server, tmp_path):
    """llama-cpp-python's default: a request that arrives while another streams ends that stream
    (``[DONE]`` without a finish reason, then the connection dropped inside the chunked body). With two
    users nearly every request is cut; fourfold counts each one ``interrupted``, none ``ok``."""
    run = run_real(stock_server, tmp_path, "l1_throughput.py", users=2, seconds=4,
                   extra=["--max-tokens", "32", "--warmup-requests", "0", "--metrics-url", "off"])
    assert run.rc == 1, run.output[-3000:]                  # failures: Locust exits 1
    assert_every_request_classified(run, {"interrupted", "ok", "truncated"})
    cut = [r for r in run.measured if r["error_class"] == "interrupted"]
    assert len(cut) >= len(run.measured) - 2 >= 3, run.classes()
    for r in cut:
        assert r["status"] == 200 and r["finish_reason"] == "" and len(r["text"]) < 200, r
    assert run.summary["total"]["failures"] == len(cut)


def test_score_gives_real_similarities(two_configurations):
    base, two, _ = two_configurations
    assert_every_request_classified(two, {"ok", "truncated"})
    proc = fourfold("score", str(two.run_dir), "--cache-dir", str(base / "cache"))
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    rows = [r for r in read_jsonl(two.run_dir / "scores.jsonl") if r.get("similarity") is not None]
    assert len(rows) >= 3
    sims = [r["similarity"] for r in rows]
    assert all(-1 <= s <= 1 for s in sims)
    assert not all(s > 0.98 for s in sims), sims         # a 135M model's answers are not the references
    assert max(sims) > 0.2, sims                          # ...but they are about the question
    assert max(sims) - min(sims) > 0.02, sims


def test_compare_two_real_configurations(two_configurations):
    base, two, one = two_configurations
    for run in (two, one):
        assert run.rc == 0, run.output[-3000:]
        assert_every_request_classified(run, {"ok", "truncated"})
    out = base / "report"
    proc = fourfold("compare", str(two.run_dir), str(one.run_dir), "--out", str(out), "--no-html",
                    "--resamples", "200")
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    report = (out / "report.md").read_text()
    assert "threads2" in report and "threads1" in report, report[:2000]
    assert "ttft" in report.lower() and (out / "report.csv").is_file()
