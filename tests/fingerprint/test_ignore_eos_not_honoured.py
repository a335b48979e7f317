"""A server that ignores ``ignore_eos`` (llama-cpp-python's) ends some answers by ``stop``: not padded.

Found against the real llama.cpp server (tests/real): its answers sent with ``--ignore-eos`` still
end at the end-of-sequence token. Before, every record sent with ``ignore_eos`` was flagged
``forced_length`` and left out of structure compliance, though nothing was padded.
"""

from __future__ import annotations

import json
from pathlib import Path

from fourfold.fingerprint.runscore import SCORES_FILE, score_run
from tests.fingerprint.test_runscore import ITEMS, WordHashEmbedder, _record, _write_run


def test_an_ignore_eos_answer_that_ended_by_stop_is_scored_as_sent(tmp_path: Path) -> None:
    three = ITEMS["qa-three-points"].references[0]
    records = [
        # not honoured
        _record(1, "qa-three-points", three, extra={"ignore_eos": True}, finish_reason="stop"),
        _record(2, "qa-three-points", three + three, extra={"ignore_eos": True}, finish_reason="length"),
        # no reason: padded
        _record(3, "qa-three-points", three + three, extra={"ignore_eos": True}),
    ]
    run_dir = _write_run(tmp_path, records)
    result = score_run(run_dir, WordHashEmbedder(), progress=False)
    rows = {x["request_id"]: x for x in map(json.loads, (run_dir / SCORES_FILE).read_text().splitlines())}
    assert (rows["r1"]["forced_length"], rows["r1"]["compliant"]) == (False, True)
    assert (rows["r2"]["forced_length"], rows["r2"]["compliant"]) == (True, None)
    assert (rows["r3"]["forced_length"], rows["r3"]["compliant"]) == (True, None)
    total = result.quality["total"]
    assert total["forced_length_n"] == 2 and total["structure_n"] == 1
