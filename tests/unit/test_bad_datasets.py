"""Bad input to fourfold itself (a dataset file, an option value): one ``fourfold: error:`` line naming
the file and line (or the option) and exit code 2, before anything starts. Here the errors
themselves; tests/integration/test_bad_dataset_runs.py holds real locust runs and the web UI's start
form to them (no run directory, no embedded target, no traceback, no run idling until ``-t``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fourfold.errors import DatasetError, OptionError, ScriptError
from fourfold.levels.options import Settings
from fourfold.workloads.items import load_items

GOOD = b'{"id": "a", "prompt": "Say hello."}\n'
# name, file bytes, the error after "<file>" (None: the file reads, BOM stripped)
DATASETS: list[tuple[str, bytes, str | None]] = [
    ("broken line", GOOD + b'{"id": "b", "prompt"\n', ":2: not JSON (Expecting ':' delimiter at column 21)"),
    ("empty file", b"", ": no items (the file is empty, or holds only blank lines and # comments)"),
    ("only comments", b"\n# nothing\n\n",
     ": no items (the file is empty, or holds only blank lines and # comments)"),
    ("utf-8 bom", b"\xef\xbb\xbf" + GOOD, None),
    ("not utf-8", GOOD + b'{"id": "b", "prompt": "caf\xe9"}\n',
     ":2: not UTF-8 (byte 0xe9 at column 27); save the file as UTF-8"),
    ("json array on one line", b"[" + GOOD.strip() + b"]\n",
     ":1: expected a JSON object, got a list; "
     "a dataset is JSONL, one JSON object per line, not a JSON array"),
    ("json array over lines", b"[\n" + GOOD + b"]\n",
     ":1: not JSON (Expecting value at column 2); "
     "a dataset is JSONL, one JSON object per line, not a JSON array"),
    ("a string line", b'"hello"\n', ':1: expected a JSON object, got "hello"'),
    ("prompt a number", b'{"id": "a", "prompt": 42}\n', ":1: 'prompt' must be a non-empty text, got 42"),
    ("max_tokens a word", b'{"id": "a", "prompt": "x", "max_tokens": "lots"}\n',
     ":1: 'max_tokens' must be a positive integer, got \"lots\""),
    ("max_tokens negative", b'{"id": "a", "prompt": "x", "max_tokens": -5}\n',
     ":1: 'max_tokens' must be a positive integer, got -5"),
    ("no id", b'{"prompt": "x"}\n', ":1: 'id' is missing"),
    ("no prompt", b'{"id": "a"}\n', ":1: needs 'prompt' (a text) or 'messages' (a list of {role, content})"),
    ("messages not a list", b'{"id": "a", "messages": "hi"}\n',
     ":1: 'messages' must be a non-empty list of {role, content}, got \"hi\""),
    ("message content a number", b'{"id": "a", "messages": [{"role": "user", "content": 7}]}\n',
     ":1: 'messages'[0] must be an object with a text 'role' and a 'content' (a text, or a list of content "
     "parts; null beside 'tool_calls'), got an object"),
    ("tools not function tools", b'{"id": "a", "prompt": "x", "tools": [{"type": "web_search"}]}\n',
     ":1: 'tools'[0] must be {\"type\": \"function\", \"function\": {\"name\": ...}}"),
    ("a tool schema that is no schema", b'{"id": "a", "prompt": "x", "tools": [{"type": "function", '
     b'"function": {"name": "f", "parameters": {"type": "objekt"}}}]}\n',
     ":1: 'tools'[0] (f): 'parameters' is not a valid JSON schema: 'objekt' is not valid under any of the "
     "given schemas"),
    ("references not texts", b'{"id": "a", "prompt": "x", "references": [1]}\n',
     ":1: 'references' must be a list of texts, got a list"),
    ("deeply nested", b"[" * 100_000 + b"]" * 100_000 + b"\n",
     ":1: nested too deeply; expected one JSON object per line"),
]


@pytest.mark.parametrize(("content", "message"), [pytest.param(*d[1:], id=d[0]) for d in DATASETS])
def test_a_bad_dataset_names_file_line_and_problem(tmp_path: Path, content: bytes,
                                                   message: str | None) -> None:
    path = tmp_path / "prompts.jsonl"
    path.write_bytes(content)
    if message is None:
        assert [(i.id, i.prompt) for i in load_items(path)] == [("a", "Say hello.")]
        return
    with pytest.raises(DatasetError) as info:
        load_items(path)
    assert str(info.value) == f"{path}{message}"
    assert isinstance(info.value, ValueError) and info.value.exit_code == 2


def test_a_missing_dataset_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match=r"nope\.jsonl: no such file$"):
        load_items(tmp_path / "nope.jsonl")


@pytest.mark.parametrize(("settings", "message"), [
    ({"max_tokens": -5}, "--max-tokens must be a number within [1, 1e+07], got -5"),
    ({"read_timeout_s": -1.0}, "--read-timeout must be a number within [0.01, 604800], got -1.0"),
    ({"read_timeout_s": 0.0}, "--read-timeout must be a number within [0.01, 604800], got 0.0"),
    ({"connect_timeout_s": float("inf")}, "--connect-timeout must be a number within [0.01, 3600], got inf"),
    ({"max_response_s": float("nan")}, "--max-response-s must be a number within [0.01, 604800], got nan"),
    ({"mirror_share": float("nan")}, "--mirror-share must be a number within [0, 1], got nan"),
    ({"mirror_share": 1.5}, "--mirror-share must be a number within [0, 1], got 1.5"),
    ({"stall_ms": -1.0}, "--stall-ms must be a number within [0.1, 1e+07], got -1.0"),
    ({"warmup_requests": -1}, "--warmup-requests must be a number within [0, 1e+06], got -1"),
    ({"sample_interval_s": 0.0}, "--sample-interval must be a number within [0.01, 3600], got 0.0"),
    ({"sim_max_concurrency": -2}, "--sim-max-concurrency must be a number within [0, 1e+06], got -2"),
    ({"sim_keepalive_timeout_s": float("-inf")},
     "--sim-keepalive-timeout-s must be a number within [0, 86400], got -inf"),
    ({"rag_top_k": 0}, "--rag-top-k must be a number within [1, 10000], got 0"),
])
def test_a_nonsense_option_value_is_an_option_error(settings: dict[str, object], message: str) -> None:
    with pytest.raises(OptionError) as info:
        Settings(**settings)
    assert str(info.value) == message and info.value.exit_code == 2


SESSION = {"id": "s1", "prompt": "Plan a trip.", "reference": "Go by train.", "max_turns": 3,
           "facts": [{"key": "train", "ask": "How?"}]}


def test_l4_session_scripts_name_file_and_line(tmp_path: Path) -> None:
    from fourfold.levels.l4_session import session_scripts

    path = tmp_path / "s.jsonl"
    path.write_text(json.dumps(SESSION) + "\n" + json.dumps({**SESSION, "id": "s2", "facts": []}) + "\n")
    with pytest.raises(ScriptError) as info:
        session_scripts(str(path))
    assert str(info.value) == f"{path}:2: session script s2: 'facts' must be a non-empty list of {{key, ask}}"
