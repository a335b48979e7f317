"""--score-live's cheap half: which answers are sampled, the per-second cap, the queue's drops,
and the child's protocol (with a stand-in embedder: no model)."""

from __future__ import annotations

import io
import json
from types import SimpleNamespace

import numpy as np
import pytest

from fourfold.fingerprint.live import LiveSampler, eligible, job_record, serve
from fourfold.measure.record import RequestRecord


@pytest.mark.parametrize(("every", "n", "chosen"), [(1, 5, [0, 1, 2, 3, 4]), (2, 7, [0, 2, 4, 6]),
                                                     (10, 25, [0, 10, 20]), (3, 2, [0])])
def test_one_in_every(every, n, chosen):
    sampler = LiveSampler(every=every, max_per_s=0)
    assert [i for i in range(n) if sampler.offer(float(i))] == chosen
    assert (sampler.seen, sampler.sampled, sampler.capped) == (n, len(chosen), 0)


def test_the_cap_is_a_one_second_token_bucket():
    sampler = LiveSampler(every=1, max_per_s=2)
    burst = [sampler.offer(100.0) for _ in range(5)]          # five at once: two pass, three capped
    assert burst == [True, True, False, False, False]
    assert sampler.offer(100.25) is False                      # half a token refilled
    assert sampler.offer(100.5) is True                        # one token after 0.5 s at 2/s
    assert [sampler.offer(110.0) for _ in range(3)] == [True, True, False]   # the bucket holds one second
    assert (sampler.seen, sampler.sampled, sampler.capped) == (10, 5, 5)


def _record(**kw):
    base = dict(request_id="r1", item_id="a", level="l1", scenario="s", text="one. two.", error_class="ok",
                status=200, terminal=True, finish_reason="stop")
    return RequestRecord(**{**base, **kw})


@pytest.mark.parametrize(("kw", "ok"),
                         [({}, True), ({"warmup": True}, False), ({"error_class": "cancelled"}, False),
                          ({"error_class": "read_timeout"}, False), ({"text": "  "}, False),
                          ({"extra": {"final": False}}, False), ({"extra": {"final": True}}, True)])
def test_eligible_follows_fourfold_score(kw, ok):
    assert eligible(_record(**kw)) is ok


def test_job_record_keeps_what_scoring_reads():
    job = job_record(_record(extra={"ignore_eos": True, "doc_ids": [1, 2]}))
    assert job["extra"] == {"ignore_eos": True} and job["text"] == "one. two." \
        and "chunk_offsets_ms" not in job
    back = RequestRecord.from_dict(json.loads(json.dumps(job)))
    assert back.extra["ignore_eos"] and back.finish_reason == "stop"


class _Embedder:
    model_id = "stand-in"

    def encode(self, texts):
        return np.array([[1.0, float(len(t))] for t in texts])


def test_serve_answers_each_job_and_skips_unknown_items(tmp_path):
    data = tmp_path / "d.jsonl"
    data.write_text(json.dumps({"id": "a", "prompt": "List 2 things.", "reference": "one. two."}) + "\n")
    lines = [json.dumps({"meta": {"level": "l1", "settings": {"dataset": str(data)}},
                         "run_dir": str(tmp_path)}),
             json.dumps({"test": 3, "record": job_record(_record())}),
             json.dumps({"test": 3, "record": job_record(_record(item_id="zz"))})]
    out = io.StringIO()
    assert serve(lines, out, embedder=_Embedder()) == 0
    ready, scored, skipped = (json.loads(x) for x in out.getvalue().splitlines())
    assert ready["ready"] is True and ready["items"] == 1 and ready["cpu_s"] > 0
    assert scored["test"] == 3 and scored["row"]["request_id"] == "r1" and scored["row"]["similarity"] == 1.0
    assert skipped["skipped"] == "unknown_item" and skipped["test"] == 3


def test_serve_reports_a_missing_dataset_in_one_line(tmp_path):
    out = io.StringIO()
    first = json.dumps({"meta": {"settings": {"dataset": "nowhere.jsonl"}}, "run_dir": str(tmp_path)})
    assert serve([first], out, embedder=_Embedder()) == 1
    assert "nowhere.jsonl" in json.loads(out.getvalue())["error"]


def test_a_full_queue_drops_and_counts_without_waiting():
    from fourfold.levels import livequality
    from fourfold.levels.options import Settings

    runtime = SimpleNamespace(settings=Settings(score_live=True, score_live_every=1, score_live_max_per_s=0))
    live = livequality.LiveQuality(runtime)
    live.proc = object()                                    # "started": offer only enqueues
    for i in range(livequality.QUEUE_SIZE + 7):
        live.offer(_record(request_id=f"r{i}"))
    live.offer(_record(warmup=True))                         # not eligible: neither sampled nor dropped
    block = live.block()
    assert (block["sampled"], block["dropped"], live.queue.qsize()) == (livequality.QUEUE_SIZE + 7, 7,
                                                                        livequality.QUEUE_SIZE)
    assert block["pending"] == livequality.QUEUE_SIZE and block["scored"] == 0


def test_quality_rows_show_the_block_or_how_to_turn_it_on():
    from fourfold.levels.livequality import quality_rows

    block = {"scored": 12, "every": 10, "max_per_s": 5.0, "similarity_mean": 0.91234, "similarity_p5": None,
             "structure_n": 4, "structure_compliance": 0.75, "pending": 1, "dropped": 2, "capped": 3,
             "scorer_cpu_s": 4.26, "scorer_ready": False, "error": "boom"}
    assert [(r["metric"], r["value"]) for r in quality_rows(block)] == [
        ("answers scored", "12 (1 in 10, at most 5/s)"), ("similarity mean", "0.912"), ("similarity p5", "-"),
        ("structure compliance", "75.0% of 4"), ("waiting / dropped / over the cap", "1 / 2 / 3"),
        ("scorer CPU", "4.3 s (loading the model)"), ("error", "boom")]
    assert quality_rows({**block, "max_per_s": 0, "error": ""})[0]["value"] == "12 (1 in 10, no cap)"
    assert quality_rows(None) == [{"metric": "off", "value": "start the test with --score-live"}]
