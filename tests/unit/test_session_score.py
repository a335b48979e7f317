"""`fourfold score` on an L4 run: only each session's final answer is scored, against the script's
reference."""

from __future__ import annotations

from fourfold.data import DATA_DIR
from fourfold.fingerprint.runscore import select_records
from fourfold.measure.record import RequestRecord
from fourfold.workloads.items import load_items


def test_only_final_turns_of_sessions_are_scored():
    items = {item.id: item for item in load_items(DATA_DIR / "sessions" / "sessions.jsonl")}
    sid = "s01-paged-attention"
    records = [
        RequestRecord(item_id=sid, text="opening answer", warmup=True),
        RequestRecord(item_id=sid, text="turn 1", extra={"session_id": "u0-s1", "turn": 1, "final": False}),
        RequestRecord(item_id=sid, text="turn 2", extra={"session_id": "u0-s1", "turn": 2, "final": True}),
        RequestRecord(item_id="qa-brief", text="an L1 answer"),                    # no "final": not a session
    ]
    chosen, skipped = select_records(records, items)
    assert [r.text for r in chosen] == ["turn 2"]
    assert skipped == {"warmup": 1, "session_turn": 1, "unknown_item": 1}
    assert items[sid].references[0].startswith("PagedAttention is the attention kernel")
