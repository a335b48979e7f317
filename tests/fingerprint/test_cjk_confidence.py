"""Chinese answers the model barely reads: [UNK] share, low_confidence, the char-bigram F1 beside
the similarity, the console line, the SLO gate; and --embed-model with any local model directory."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from test_runscore import ITEMS, WordHashEmbedder, _record, _write_run

from fourfold.cli import main as cli_main
from fourfold.fingerprint.embedder import MiniLMEmbedder, minilm_path
from fourfold.fingerprint.lexical import best_char_f1, char_f1
from fourfold.fingerprint.runscore import SCORES_FILE, format_quality, score_run
from fourfold.gates.slo import parse_spec
from fourfold.gates.slo_verdict import evaluate
from fourfold.reports.load import load_run
from fourfold.reports.report import Side, build_report

EN, ZH = ITEMS["qa-three-points"].references[0], ITEMS["zh-sleep-five"].references[0]


class TokenizedHashEmbedder(WordHashEmbedder):
    """WordHashEmbedder with the real MiniLM tokenizer's [UNK] shares (no torch)."""

    def __init__(self) -> None:
        super().__init__()
        self.unk_shares = MiniLMEmbedder().unk_shares


def test_char_f1() -> None:
    assert char_f1("量子退火", "量子退火") == 1.0
    assert char_f1("量子退火", "睡眠不足") == 0.0
    assert char_f1("量子退火原理", "量子计算原理") == pytest.approx(2 * 2 / (5 + 5))   # 量子, 原理
    assert char_f1("Hello, world!", "hello world") == 1.0                             # case, punctuation
    assert char_f1("...", "abc") is None and best_char_f1("ab", []) is None


def _run(tmp_path: Path, texts: list[tuple[str, str]]) -> Path:
    return _write_run(tmp_path, [_record(i, item, text) for i, (item, text) in enumerate(texts)], summary={})


def test_chinese_answers_are_low_confidence(tmp_path: Path) -> None:
    run_dir = _run(tmp_path, [("qa-three-points", EN), ("zh-sleep-five", ZH)])
    result = score_run(run_dir, TokenizedHashEmbedder(), progress=False)
    rows = [json.loads(line) for line in (run_dir / SCORES_FILE).read_text().splitlines()]
    en, zh = rows
    assert en["unk_share"] == 0.0 and en["low_confidence"] is False and en["char_f1"] == 1.0
    assert zh["unk_share"] > 0.2 and zh["low_confidence"] is True and zh["char_f1"] == 1.0
    assert zh["similarity"] == 1.0                              # kept in the row, left out of the figures
    total = result.quality["total"]
    assert (total["low_confidence_n"], total["similarity_n"], total["char_f1_n"]) == (1, 1, 2)
    assert result.quality["unk_threshold"] == 0.2
    assert "low-confidence: 1 of 2 answers" in format_quality(result)
    summary = json.loads((run_dir / "summary.json").read_text())
    verdict, = evaluate(parse_spec("similarity_mean>=0.9"), summary)
    assert verdict.status == "pass" and "1 low-confidence answer left out" in verdict.message
    # a threshold of 1.0 trusts every answer
    result = score_run(run_dir, TokenizedHashEmbedder(), progress=False, unk_threshold=1.0)
    assert result.quality["total"]["low_confidence_n"] == 0 and result.quality["total"]["similarity_n"] == 2


def test_quality_floor_cannot_pass_on_low_confidence_answers(tmp_path: Path) -> None:
    run_dir = _run(tmp_path, [("zh-sleep-five", ZH), ("zh-sleep-five", ZH), ("qa-three-points", EN)])
    score_run(run_dir, TokenizedHashEmbedder(), progress=False)
    summary = json.loads((run_dir / "summary.json").read_text())
    verdicts = evaluate(parse_spec("similarity_mean>=0.5, similarity_p5>=0.5, structure_compliance>=0"),
                        summary)
    assert [v.status for v in verdicts] == ["no_data", "no_data", "pass"]
    assert "unjudged: 2 of 3 answers are low-confidence" in verdicts[0].message
    assert "scored by word-hash-64" in verdicts[0].message


def test_cli_unk_threshold_and_bad_embed_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    import fourfold.cli.score as score_cmd  # `fourfold score` makes its embedder here

    monkeypatch.setattr(score_cmd, "make_embedder", lambda **kwargs: TokenizedHashEmbedder())
    run_dir = _run(tmp_path, [("zh-sleep-five", ZH)])
    assert cli_main(["score", str(run_dir), "--no-compare-cache", "--unk-threshold", "0.9"]) == 0
    assert "low-confidence: 0 of 1 answer had" in capsys.readouterr().out
    assert cli_main(["score", str(run_dir), "--unk-threshold", "2"]) == 2
    assert "--unk-threshold must be a share in [0, 1]" in capsys.readouterr().err
    monkeypatch.undo()
    for bad in (tmp_path / "missing", run_dir):                  # no directory; a directory that is no model
        assert cli_main(["score", str(run_dir), "--no-cache", "--embed-model", str(bad)]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "--embed-model" in err[0], err
    assert cli_main(["score", str(run_dir), "--no-cache", "--embed-backend", "openvino"]) == 2
    assert "unknown embedding backend 'openvino'" in capsys.readouterr().err


def test_embed_model_copy_scores_the_same(tmp_path: Path, minilm: MiniLMEmbedder) -> None:
    copy = tmp_path / "my-minilm"
    shutil.copytree(minilm_path(), copy)
    run_dir = _run(tmp_path, [("qa-three-points", EN), ("zh-sleep-five", ZH)])
    bundled = score_run(run_dir, minilm, progress=False)
    other = MiniLMEmbedder(model_path=copy, backend="torch-fp32")
    copied = score_run(run_dir, other, progress=False)
    assert [r.similarity for r in copied.rows] == \
        pytest.approx([r.similarity for r in bundled.rows], abs=1e-6)
    about, reference = copied.quality["embedder"], bundled.quality["embedder"]
    assert about["name"] == "my-minilm" and reference["name"] == "all-MiniLM-L6-v2"
    assert about["weights_sha256"] == reference["weights_sha256"] and len(about["weights_sha256"]) == 64
    assert about["backend"] == "torch-fp32" and about["path"] == str(copy)


def test_fourfold_score_reports_backend_and_low_confidence(tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    """The acceptance line of #23: `fourfold score` (the real model, the backend it picks) of bundled
    Chinese and English answers says which backend ran and how many answers were low-confidence, as
    summary.json and scores.jsonl record; `fourfold check` gates on the share and on the char F1."""
    zh_ids = ["zh-sleep-five", *[i for i in ITEMS if i.startswith("zh-") and i != "zh-sleep-five"][:2]]
    en_ids = [i for i in ITEMS if not i.startswith("zh-")][:3]
    answers = [(i, ITEMS[i].references[0]) for i in (*zh_ids, *en_ids)]
    answers.append(("zh-sleep-five", ITEMS[zh_ids[1]].references[0]))     # an unrelated Chinese answer
    run_dir = _run(tmp_path, answers)
    assert cli_main(["score", str(run_dir), "--cache-dir", str(tmp_path / "cache")]) == 0
    out = capsys.readouterr().out
    quality = json.loads((run_dir / "summary.json").read_text())["quality"]
    backend = quality["embedder"]["backend"]
    assert backend.startswith(("torch-", "openvino")) and f"backend {backend}" in out
    assert quality["total"]["low_confidence_n"] == 4 and quality["total"]["low_confidence_share"] == 0.5714
    assert "low-confidence: 4 of 7 answers" in out
    assert re.search(r"^group +answers +sim mean +sim p5 +sim p50 +low-conf +char F1 ", out, re.M)
    assert re.search(r"^total +7 +[\d.]+ +[\d.]+ +[\d.]+ +4 +[\d.]+ ", out, re.M), out    # 4 low-confidence
    rows = [json.loads(line) for line in (run_dir / SCORES_FILE).read_text().splitlines()]
    assert [row["low_confidence"] for row in rows] == [True, True, True, False, False, False, True]
    assert rows[-1]["char_f1"] < 0.3 < min(row["char_f1"] for row in rows[:-1])
    # the report's rows show the same figures (its share in %)
    report = build_report(Side("run", [load_run(run_dir)]), [Side("nothing", [])])
    shown = {row.metric: row.baseline for row in report.comparisons[0].rows}
    assert shown["low_confidence_share"] == pytest.approx(100 * 4 / 7)
    assert shown["char_f1_mean"] == pytest.approx(quality["total"]["char_f1_mean"], abs=1e-4)
    for spec, code in (("low_confidence_share<=10%", 3), ("similarity_mean>=0.5", 3),
                       ("char_f1_mean>=0.5", 0)):
        assert cli_main(["check", str(run_dir), "--slo", spec]) == code, spec
    assert "unjudged: 4 of 7 answers are low-confidence" in capsys.readouterr().out


def test_demo_says_backend_and_low_confidence(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import fourfold.cli.demo as demo
    from fourfold.cli.demo import _score

    monkeypatch.setattr(demo, "make_embedder", lambda **kwargs: TokenizedHashEmbedder())
    said: list[str] = []
    assert _score([_run(tmp_path, [("zh-sleep-five", ZH), ("qa-three-points", EN)])], said.append) == ""
    assert said[0].endswith("backend -, 1 low-confidence)"), said
