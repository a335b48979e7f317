"""The report's L3 conflict rate from a real L3 run: fourfold's locustfile against its embedded RAG
service writes ``extra.conflict``; both records readers, the compare cache and the loader keep it, and
the report's row is the summary's ``rag.conflict_rate``."""

from __future__ import annotations

import json

import numpy as np
import pytest

from fourfold.levels.l3_rag import DEFAULT_QUESTIONS
from fourfold.reports.compare import GroupSample, compare_groups
from fourfold.reports.load import group_samples, load_run
from fourfold.reports.records import read_record_table
from tests.conftest import REPO, only_run_dir, read_jsonl, run_locust

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def l3_run(tmp_path_factory):
    base = tmp_path_factory.mktemp("l3")
    # q-045..q-047: BM25's top 3 holds two documents of one conflict group; q-044, q-048: it does not
    lines = (DEFAULT_QUESTIONS.read_text(encoding="utf-8").splitlines())[43:48]
    assert [json.loads(line)["id"] for line in lines] == [f"q-{i:03d}" for i in range(44, 49)]
    (base / "questions.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    proc = run_locust(["-f", str(REPO / "locustfiles" / "l3_rag.py"), "--headless", "-u", "2", "-r", "2",
                       "-t", "4s", "--warmup-requests", "0",
                       "--dataset", str(base / "questions.jsonl")], base)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    run = only_run_dir(base)
    return run, json.loads((run / "summary.json").read_text()), read_jsonl(run / "records.jsonl")


def test_the_loader_reads_the_conflict_flag_of_a_real_l3_run(l3_run):
    run, summary, records = l3_run
    measured = [r for r in records if not r["warmup"] and r["error_class"] == "ok"
                and "conflict" in r["extra"]]
    flags = [float(r["extra"]["conflict"]) for r in measured]
    assert measured and 0 < sum(flags) < len(flags)        # some conflicting contexts, not all
    for native in (True, False):                            # the C scanner and the exact fallback
        frame = read_record_table(run / "records.jsonl", native=native).frame
        got = frame["conflict"].to_numpy(dtype=float)
        assert got[np.isfinite(got)].tolist() == [float(r["extra"]["conflict"]) for r in records
                                                  if not r["warmup"] and "conflict" in r["extra"]]
    for _ in range(2):                                      # read, then from the compare cache it wrote
        sample = group_samples([load_run(run)])["l3:rag"]
        assert sorted(sample.conflict.tolist()) == sorted(flags)
        assert (run / "compare-cache.npz").is_file()
    row = next(r for r in compare_groups("l3:rag", sample, GroupSample()) if r.metric == "conflict_rate")
    assert (row.baseline == pytest.approx(100 * summary["rag"]["conflict_rate"])
            and row.n_baseline == len(flags))
    assert row.candidate is None and row.verdict == "n/a"
