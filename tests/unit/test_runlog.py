from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path

import pytest

from fourfold.measure.record import SCHEMA_VERSION, RequestRecord
from fourfold.rundir import runlog
from fourfold.rundir.runlog import REDACTED, RunWriter, is_secret_key, redact, redact_text, sanitize_label
from fourfold.rundir.runread import (
    RunLogWarning,
    SchemaError,
    find_runs,
    latest_run,
    read_meta,
    read_records,
    read_summary,
)

SECRET = "sk-test-SECRET123"


def _record(i: int) -> RequestRecord:
    r = RequestRecord(level="L1", scenario="chat", request_id=f"r{i}", started_at=1000.0 + i, ttft_ms=12.5,
                      e2e_ms=80.0, chunk_offsets_ms=[12.5, 40.0, 80.0], output_tokens=3, terminal=True,
                      extra={"turn": i, "ids": ["a", "b"]})
    r.set_text(f"answer {i} ✓")
    return r


def test_run_dir_name_and_label_sanitising(tmp_path: Path) -> None:
    now = 1_735_700_000.0  # 2025-01-01T02:53:20Z
    writer = RunWriter("my run/../x:y", base_dir=tmp_path / "runs", now_s=now)
    assert writer.run_dir.parent == tmp_path / "runs"
    assert writer.run_dir.name == "20250101T025320Z-my-run-..-x-y"
    again = RunWriter("my run/../x:y", base_dir=tmp_path / "runs", now_s=now)
    assert again.run_dir.name == "20250101T025320Z-my-run-..-x-y-2"
    assert sanitize_label("../../etc") == "etc" and sanitize_label("  ") == "run"
    assert re.fullmatch(r"[A-Za-z0-9._-]+", sanitize_label("ü name\n\t$(rm)")) is not None


@pytest.mark.parametrize(
    ("key", "secret"),
    [("api_key", True), ("OPENAI_API_KEY", True), ("x-api-key", True), ("apiKey", True),
     ("Authorization", True),
     ("token", True), ("hf_token", True), ("x-auth-token", True), ("client_secret", True), ("password", True),
     ("max_tokens", False), ("output_tokens", False), ("tokens", False), ("tokenizer", False),
     ("label", False), ("author", False)],
)
def test_secret_key_names(key: str, secret: bool) -> None:
    assert is_secret_key(key) is secret


def test_meta_redaction_leaves_no_secret_in_any_file(tmp_path: Path) -> None:
    meta = {
        "target": f"https://user:{SECRET}@llm.example/v1?api_key={SECRET}&model=m",
        "options": {"api_key": SECRET, "max_tokens": 256, "output_tokens": 7, "stall_ms": 150,
                    "headers": {"Authorization": f"Bearer {SECRET}", "x-api-key": SECRET, "X-Trace": "t1"},
                    "nested": [{"hf_token": SECRET}, ("api-key", SECRET)]},
        "argv": ["locust", "--api-key", SECRET, f"--token={SECRET}", "-H", f"Authorization: Bearer {SECRET}"],
        "note": f"key was {SECRET}",
    }
    writer = RunWriter("redact", base_dir=tmp_path)
    writer.write_meta(meta)
    writer.write_summary({"options": redact(meta["options"])})
    writer.close()
    for path in writer.run_dir.rglob("*"):
        assert "SECRET123" not in path.read_text(encoding="utf-8"), path.name
    saved = read_meta(writer.run_dir)
    assert saved["label"] == "redact" and saved["record_schema"] == SCHEMA_VERSION
    assert saved["options"]["max_tokens"] == 256 and saved["options"]["output_tokens"] == 7
    assert saved["options"]["api_key"] == REDACTED
    assert saved["options"]["headers"] == {"Authorization": REDACTED, "x-api-key": REDACTED, "X-Trace": "t1"}
    assert saved["argv"][:3] == ["locust", "--api-key", REDACTED] \
        and saved["argv"][3] == f"--token={REDACTED}"
    assert saved["argv"][5] == f"Authorization: {REDACTED}"
    assert saved["target"].startswith("https://user:***@llm.example/v1?") and "model=m" in saved["target"]


def test_records_round_trip(tmp_path: Path) -> None:
    records = [_record(i) for i in range(5)]
    records[2].warmup = True
    with RunWriter("rt", base_dir=tmp_path) as writer:
        for r in records:
            writer.append(r)
    assert list(read_records(writer.run_dir)) == records
    assert [r.request_id for r in read_records(writer.run_dir, include_warmup=False)] == \
        ["r0", "r1", "r3", "r4"]
    assert list(read_records(tmp_path / "missing")) == []


def test_torn_last_line_is_skipped_with_a_warning(tmp_path: Path) -> None:
    with RunWriter("torn", base_dir=tmp_path) as writer:
        for i in range(3):
            writer.append(_record(i))
    path = writer.run_dir / "records.jsonl"
    data = path.read_bytes()
    path.write_bytes(data + _record(3).to_json().encode()[:-7])   # killed mid-write
    with pytest.warns(RunLogWarning, match=r"records\.jsonl:4: skipped torn last line"):
        got = list(read_records(writer.run_dir))
    assert [r.request_id for r in got] == ["r0", "r1", "r2"]
    lines = data.split(b"\n")
    path.write_bytes(lines[0] + b"\n" + lines[1][:30] + b"\n" + lines[2] + b"\n")  # damage in the middle
    with pytest.warns(RunLogWarning, match=r"records\.jsonl:2: skipped unreadable line"):
        assert [r.request_id for r in read_records(writer.run_dir)] == ["r0", "r2"]
    path.write_bytes(data + "{\"text\": \"✓".encode()[:-1])    # torn inside a UTF-8 character
    with pytest.warns(RunLogWarning, match="torn last line"):
        assert len(list(read_records(writer.run_dir))) == 3


def test_newer_schema_raises_a_clear_error(tmp_path: Path) -> None:
    writer = RunWriter("schema", base_dir=tmp_path)
    newer = json.loads(_record(0).to_json())
    newer["schema"] = SCHEMA_VERSION + 1
    (writer.run_dir / "records.jsonl").write_text(json.dumps(newer) + "\n", encoding="utf-8")
    with pytest.raises(SchemaError, match="upgrade fourfold"):
        list(read_records(writer.run_dir))


class _Clock:
    """``time`` as runlog sees it, with ``monotonic()`` moved by the test instead of waited for."""

    def __init__(self) -> None:
        self.now_s = time.monotonic()

    def monotonic(self) -> float:
        return self.now_s

    def __getattr__(self, name: str) -> object:
        return getattr(time, name)


def test_append_flushes_after_one_second(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    clock = _Clock()
    monkeypatch.setattr(runlog, "time", clock)
    writer = RunWriter("flush", base_dir=tmp_path)
    path = writer.run_dir / "records.jsonl"
    writer.append(_record(0))
    assert path.read_bytes() == b""          # buffered
    clock.now_s += 0.9
    writer.append(_record(1))
    assert path.read_bytes() == b""          # under a second: still buffered
    clock.now_s += 0.2
    writer.append(_record(2))                # > 1 s since the last flush: every line reaches the file
    on_disk = path.read_bytes().decode().splitlines()
    assert [json.loads(line)["request_id"] for line in on_disk] == ["r0", "r1", "r2"]
    writer.append(_record(3))
    writer.flush()
    assert len(path.read_bytes().splitlines()) == 4
    writer.close()
    writer.close()


def test_summary_is_written_atomically(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    writer = RunWriter("atomic", base_dir=tmp_path)
    writer.write_summary({"total": {"requests": 1, "p99": float("nan")}})
    assert read_summary(writer.run_dir) == {"total": {"requests": 1, "p99": None}}

    def crash(src: str, dst: str) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(OSError):
        writer.write_summary({"total": {"requests": 2}})
    assert read_summary(writer.run_dir) == {"total": {"requests": 1, "p99": None}}  # old file intact
    assert sorted(p.name for p in writer.run_dir.iterdir()) == ["summary.json"]  # no tmp left behind
    monkeypatch.undo()
    writer.write_json("metrics_series.json", {"t_s": (1, 2)})
    assert json.loads((writer.run_dir / "metrics_series.json").read_text()) == {"t_s": [1, 2]}
    with pytest.raises(ValueError):
        writer.write_json("../escape.json", {})


def test_find_and_latest_runs(tmp_path: Path) -> None:
    assert find_runs(tmp_path / "none") == [] and latest_run(tmp_path) is None
    a = RunWriter("base", base_dir=tmp_path, now_s=1_700_000_000.0)
    a.write_meta({})
    b = RunWriter("cand", base_dir=tmp_path, now_s=1_700_000_100.0)
    b.write_meta({})
    c = RunWriter("base", base_dir=tmp_path, now_s=1_700_000_200.0)
    c.append(_record(0))
    c.close()  # no meta.json (killed early) but records: still a run
    (tmp_path / "not-a-run").mkdir()
    RunWriter("empty", base_dir=tmp_path, now_s=1_700_000_300.0)  # nothing written yet: not listed
    assert find_runs(tmp_path) == [a.run_dir, b.run_dir, c.run_dir]
    assert latest_run(tmp_path) == c.run_dir
    assert latest_run(tmp_path, label="cand") == b.run_dir
    assert latest_run(tmp_path, label="base") == c.run_dir
    assert latest_run(tmp_path, label="nope") is None
    assert read_summary(a.run_dir) is None


def test_a_surrogate_pair_split_across_two_events_is_one_character_on_disk(tmp_path: Path) -> None:
    from fourfold.client.dialects import get_dialect

    parser = get_dialect("openai").parser(True)
    for content in ("a \\ud83d", "\\ude00 b", " lone \\ud83d"):        # JSON escapes, one token per event
        parser.feed(b'data: {"choices":[{"index":0,"delta":{"content":"' + content.encode() + b'"}}]}\n\n')
    parser.feed(b"data: [DONE]\n\n")
    text = parser.finish().text
    assert text == "a \ud83d\ude00 b lone \ud83d"                    # lone surrogates in a Python str
    writer = RunWriter("surrogates", base_dir=tmp_path)
    for error_detail in ("", "bad \udc80 byte"):
        writer.append(RequestRecord(text=text, error_detail=error_detail))
    writer.close()
    records = [json.loads(line)
               for line in (writer.run_dir / "records.jsonl").read_text("utf-8").splitlines()]
    assert [r["text"] for r in records] == ["a 😀 b lone \ufffd"] * 2
    assert [r["error_detail"] for r in records] == ["", "bad \ufffd byte"]


def test_summary_strings_are_scrubbed_but_its_field_names_are_kept(tmp_path: Path) -> None:
    """A credential typed into --host or --metrics-url must not reach summary.json (it went in as typed)."""
    writer = RunWriter("s", tmp_path)
    summary = {"target": "https://user:hunter2-pass@gw.example/v1?api_key=abcdefgh123&x=1",
               "sampler": {"metrics_url": "http://m/metrics?token=tok-123456789",
                           "errors": ["Bearer sk-abcdefghijk"]},
               "output_tokens": 5, "auth_failures": 2, "ttft_p95_token": 1.5}
    data = json.loads(writer.write_summary(summary).read_text())
    text = json.dumps(data)
    for secret in ("hunter2-pass", "abcdefgh123", "tok-123456789", "sk-abcdefghijk"):
        assert secret not in text
    assert data["target"] == "https://user:***@gw.example/v1?api_key=***&x=1"
    assert data["output_tokens"] == 5 and data["auth_failures"] == 2 and data["ttft_p95_token"] == 1.5


def test_a_key_sharing_its_first_characters_with_a_configured_one_is_redacted_whole() -> None:
    """Two keys of one provider share a prefix ("sk-test-"): the configured key's prefix rule must not
    cut the other one after the shared part and leave its rest in clear."""
    from fourfold.rundir import secrets

    secrets.Secrets.configured(api_key="sk-test-CONFIGURED-0001")     # remembered by the process
    assert redact_text("key was sk-test-OTHERKEY9876") == "key was ***"
    assert redact_text("configured: sk-test-CONFIGURED-0001 end") == "configured: *** end"
