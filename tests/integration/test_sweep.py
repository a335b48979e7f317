"""``fourfold sweep`` against the simulator, whose capacity follows from its profile.

The simulator runs with ``--max-batch B --max-concurrency B``: an engine that generates at most
B sequences at once and queues the rest (vLLM's ``max_num_seqs``), so a request's TTFT holds its
wait in that queue. With prefill, orchestrator and cold starts switched off and every answer cut
to T = 32 tokens (``--max-tokens 32 --ignore-eos``), one generation takes
S = ttft_ms + (T - 1) * itl_ms = 80 + 31 * 20 = 700 ms, and with constant arrivals no request
waits below B / S requests per second while above it the queue (and TTFT) grows without bound:
the capacity under a TTFT SLO is B / S, 5.71/s for B = 4 and 11.43/s for B = 8.

A run resolves that edge only so far: at (1 + e) x B / S the wait grows by e seconds per second,
and the records hold the arrivals of the first W - S seconds of its arrival window W (the later
ones are still in flight at the stop, and dropped), so rates up to
e = (SLO - ttft_ms) / (0.95 (W - S)) above the capacity can still pass: about 4 % for 300 ms and
a 7 s run (W = 6.0-6.4 s). The first miss is above B / S (below it nothing waits); the last pass
is within that resolution, plus 3 % for the TTFT p95's own noise, of it.
"""

from __future__ import annotations

import concurrent.futures
import json
import time

import pytest

from fourfold.cli import main
from fourfold.targets.sim.profile import load_profile

pytestmark = [pytest.mark.integration, pytest.mark.slow]

TOKENS = 32
SLO_MS = 300.0
DURATION_S = 7.0
OVERRIDES = ("orchestrator_ms=0", "cold_requests=0", "prefill_ms_per_1k_tokens=0")


def expected_capacity_rps(max_batch: int) -> float:
    profile = load_profile("baseline", {})
    service_ms = profile.ttft_ms + (TOKENS - 1) * profile.itl_ms
    return max_batch / (service_ms / 1000)


def resolution(sweep_dir, rates) -> float:
    """e of the module docstring, from the shortest arrival window of the sweep's runs."""
    profile = load_profile("baseline", {})
    service_s = (profile.ttft_ms + (TOKENS - 1) * profile.itl_ms) / 1000
    window_s = min(json.loads((sweep_dir / r["run_dir"] / "summary.json")
                              .read_text())["l2"]["open_loop"]["window_s"]
                   for r in rates)
    return (SLO_MS - profile.ttft_ms) / 1000 / (0.95 * (window_s - service_s))


@pytest.fixture(scope="module")
def sweeps(tmp_path_factory):
    """Both sweeps at once (each is mostly waiting: its runs are timed and light), half the wall time."""
    out = tmp_path_factory.mktemp("sweeps")

    def sweep(max_batch):
        argv = ["sweep", "--slo", f"ttft_p95<={SLO_MS:g}ms", "--duration-s", f"{DURATION_S:g}",
                "--probe-s", "5", "--sim-max-batch", str(max_batch), "--sim-max-concurrency", str(max_batch),
                "--out", str(out), "--label", f"b{max_batch}", "--max-tokens", str(TOKENS), "--ignore-eos"]
        for override in OVERRIDES:
            argv += ["--sim-set", override]
        started = time.monotonic()
        assert main(argv) == 0
        elapsed_s = time.monotonic() - started
        (sweep_dir,) = out.glob(f"*-b{max_batch}")
        return sweep_dir, json.loads((sweep_dir / "summary.json").read_text())["sweep"], elapsed_s

    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        return dict(zip((4, 8), pool.map(sweep, (4, 8))))


@pytest.mark.timing
@pytest.mark.parametrize("max_batch", [4, 8])
def test_sweep_finds_the_profiles_capacity(sweeps, max_batch, capsys):
    sweep_dir, block, elapsed_s = sweeps[max_batch]
    expected = expected_capacity_rps(max_batch)
    low, high = block["bracket_rps"]
    print(f"B={max_batch}: capacity {block['capacity_rps']:.2f}/s, bracket [{low:.2f}, {high:.2f}], "
          f"expected {expected:.2f}/s, {elapsed_s:.0f} s")
    assert block["converged"] and (high - low) / low <= 0.10, (sweep_dir / "sweep.txt").read_text()
    table = (sweep_dir / "sweep.txt").read_text()
    assert abs(block["capacity_rps"] - expected) / expected <= 0.10, table
    assert expected < high and low <= expected * (1 + resolution(sweep_dir, block["rates"]) + 0.03), table
    assert elapsed_s < 180
    rates = block["rates"]
    assert 3 <= len(rates) <= 10                                           # searched, not a grid
    for rate in rates:
        assert (sweep_dir / rate["run_dir"] / "summary.json").is_file()
        passed = any(r["passed"] for r in rates if r["offered_rps"] == rate["offered_rps"])
        assert passed == (rate["offered_rps"] <= block["capacity_rps"])
        assert set(rate["latency_ms"]) == {"ttft_ms", "itl_ms", "e2e_ms"}
    assert (sweep_dir / "sweep.svg").read_text().startswith("<?xml")
    assert "capacity:" in (sweep_dir / "sweep.txt").read_text()


@pytest.mark.timing          # on the timing test's sweeps (run once, in the timing step of .ci/tests)
def test_compare_two_sweeps_has_a_capacity_row(sweeps, tmp_path, capsys):
    (small, _, _), (large, _, _) = sweeps[4], sweeps[8]
    assert main(["compare", str(small), str(large), "--out", str(tmp_path), "--resamples", "200"]) == 0
    row = next(line for line in (tmp_path / "report.csv").read_text().splitlines()
               if ",capacity_rps," in line)
    assert row.split(",")[14] == "better"                  # the brackets do not overlap
    assert main(["compare", str(small), str(small), "--out", str(tmp_path), "--resamples", "200"]) == 0
    row = next(line for line in (tmp_path / "report.csv").read_text().splitlines()
               if ",capacity_rps," in line)
    assert row.split(",")[14] == "inconclusive"            # the same brackets


def test_a_target_that_answers_nothing_stops_the_sweep_after_the_probe(tmp_path, capsys):
    import socket

    with socket.socket() as sock:                  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    started = time.monotonic()
    assert main(["sweep", "--host", f"http://127.0.0.1:{port}", "--probe-s", "2",
                 "--out", str(tmp_path)]) == 1
    err = capsys.readouterr().err         # the probe's own preflight says it (the sweep's rates skip theirs)
    assert "the preflight request to" in err and "could not connect" in err, err
    assert time.monotonic() - started < 60
    (sweep_dir,) = tmp_path.glob("*-sweep")
    assert [p.name for p in (sweep_dir / "logs").iterdir()] == ["probe.log"]        # no rate was run


def test_runs_shorter_than_two_answers_are_refused_after_the_probe(tmp_path, capsys):
    """Answers of 64 tokens take ~1.3 s on the simulator; 2 s runs would complete next to nothing
    and used to read as misses down to "capacity: below 0.10/s", exit 0."""
    code = main(["sweep", "--probe-s", "3", "--duration-s", "2", "--max-tokens", "64", "--ignore-eos",
                 "--sim-set", "orchestrator_ms=0", "--out", str(tmp_path)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and err[-1].startswith("fourfold: error: --duration-s 2 is shorter than two of this "
                                            "target's answers (the probe's E2E p50 is 1."), err[-3:]
    (sweep_dir,) = tmp_path.glob("*-sweep")
    assert [p.name.rsplit("-", 1)[-1] for p in (sweep_dir / "runs").iterdir()] == ["probe"]   # no rate ran
