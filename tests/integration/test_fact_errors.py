"""L3 fact errors end to end: two real L3 runs (embedded simulator + reference RAG service), one
answering from the bundled references, one from references with planted slips (a wrong year,
number or name in every fifth question's answer); scored, then compared and gated.

The simulator answers each question with the ``reference`` of the ``--dataset`` it is given
(``--sim-profile flat``: copied, no generated wording), so the planted slips are the ground truth:
an answer is a fact error exactly when its question was slipped.
"""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from fourfold.data import DATA_DIR
from fourfold.fingerprint.facts import load_facts
from fourfold.fingerprint.runscore import SCORES_FILE, score_run
from fourfold.gates.gate import check_run
from tests.conftest import REPO, only_run_dir, read_jsonl, run_locust

pytestmark = pytest.mark.integration

QUESTIONS = DATA_DIR / "rag" / "questions.jsonl"
CORPUS = DATA_DIR / "rag" / "corpus.jsonl"


class WordCounts:
    """A model-free embedder (bag of words): the fact check needs none, groundedness gets a value."""

    vocabulary = ("founded", "headquartered", "made", "launched", "river", "mayor", "by", "in")

    def encode(self, texts):
        return np.array([[t.lower().count(w) for w in self.vocabulary] for t in texts],
                        dtype=np.float32) + 1e-6


def slipped_questions(path):
    """The bundled questions with every fifth reference's first gold value made wrong; their ids."""
    facts = load_facts(CORPUS)
    rows, slipped = [], set()
    for n, line in enumerate(QUESTIONS.read_text(encoding="utf-8").splitlines()):
        q = json.loads(line)
        if n % 5 == 0:
            fact = next(f for d in q["gold_ids"] for f in facts.get(d, ())
                        if f.value in q["reference"] and f.value not in f.subject)
            wrong = str(int(fact.value) + 2) if fact.kind != "name" else \
                " ".join(["Zorvik", "Quarnel"][:len(fact.value.split())])
            q["reference"] = q["reference"].replace(fact.value, wrong)
            slipped.add(q["id"])
        rows.append(json.dumps(q))
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return slipped


def l3_scored_run(base, *extra):
    proc = run_locust(["-f", str(REPO / "locustfiles" / "l3_rag.py"), "--headless", "-u", "6", "-r", "6",
                       "-t", "5s", "--sim-profile", "flat", "--warmup-requests", "0", *extra], base)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    run = only_run_dir(base)
    score_run(run, WordCounts(), progress=False)
    return run


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    base = tmp_path_factory.mktemp("clean")
    slips_dir = tmp_path_factory.mktemp("slipped")
    slipped = slipped_questions(slips_dir / "questions.jsonl")
    clean = l3_scored_run(base)
    planted = l3_scored_run(slips_dir, "--dataset", str(slips_dir / "questions.jsonl"))
    return clean, planted, slipped


def test_the_rate_equals_the_share_of_answers_with_a_planted_slip(runs):
    clean, planted, slipped = runs
    rows = read_jsonl(planted / SCORES_FILE)
    checked = [r for r in rows if r["fact_checked"]]
    assert len(checked) == len(rows) >= 30          # every bundled reference states a labelled fact
    assert all(r["fact_error"] == (r["item_id"] in slipped) for r in checked), [
        (r["item_id"], r["fact_error"]) for r in checked if r["fact_error"] != (r["item_id"] in slipped)]
    expected = sum(r["item_id"] in slipped for r in checked) / len(checked)
    assert 0.1 < expected < 0.35
    summary = json.loads((planted / "summary.json").read_text())
    assert summary["quality"]["total"]["fact_error_rate"] == pytest.approx(expected, abs=5e-5)
    assert summary["quality"]["total"]["fact_checked_n"] == len(checked)
    assert summary["quality"]["rag"]["fact_check"].startswith("measured")
    clean_summary = json.loads((clean / "summary.json").read_text())
    assert clean_summary["quality"]["total"]["fact_error_rate"] == 0.0


def test_compare_report_has_a_fact_error_row_and_the_gate_judges_it(runs, tmp_path):
    clean, planted, slipped = runs
    report = subprocess.run([sys.executable, "-m", "fourfold", "compare", str(clean), str(planted),
                             "--out", str(tmp_path), "--no-html"], cwd=REPO, capture_output=True, text=True)
    assert report.returncode in (0, 3), report.stdout + report.stderr
    rows = [line for line in report.stdout.splitlines() if line.startswith("| fact error rate")]
    assert rows, report.stdout[-3000:]
    cells = [c.strip() for c in rows[0].strip("|").split("|")]
    # the same questions on both sides: the row pairs them (the mean of per-question rates)
    common = ({r["item_id"] for r in read_jsonl(clean / SCORES_FILE)}
              & {r["item_id"] for r in read_jsonl(planted / SCORES_FILE)})
    paired = 100 * len(common & slipped) / len(common)
    assert float(cells[1]) == 0.0 and float(cells[2]) == pytest.approx(paired, abs=0.006)
    assert "worse" in rows[0]
    assert check_run(clean, "fact_error_rate<10%").exit_code == 0
    gated = check_run(planted, "fact_error_rate<10%")
    assert gated.exit_code == 3 and gated.verdicts[0].status == "miss"
