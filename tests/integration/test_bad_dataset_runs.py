"""Bad input to fourfold itself, in real locust processes: a bad dataset file or option value is one
``fourfold: error:`` line and exit code 2 before anything starts (no run directory, no embedded
target, no traceback, no run idling until ``-t``); the web UI's start form gets the same line as its
error message and starts nothing. The messages themselves are tested without a process in
tests/unit/test_bad_datasets.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import free_port, run_locust
from tests.integration.webui_support import finish, http_get, http_post_form, start_locust, wait_for

pytestmark = pytest.mark.integration
GOOD = b'{"id": "a", "prompt": "Say hello."}\n'


def bad_file(name: str, content: bytes):
    def make(tmp: Path) -> str:
        (tmp / name).write_bytes(content)
        return str(tmp / name)
    return make


SESSION = {"id": "s1", "prompt": "Plan a trip.", "reference": "Go by train.", "max_turns": 3,
           "facts": [{"key": "train", "ask": "How?"}]}
# locustfile, its arguments (a callable makes a file in the run's directory, returns its path),
# the error line after "fourfold: error: " ({path}: the file made)
RUNS = [
    ("l1_throughput.py", ["--dataset", bad_file("p.jsonl", GOOD + b"{oops\n")],
     "{path}:2: not JSON (Expecting property name enclosed in double quotes at column 2)"),
    ("l1_throughput.py", ["--dataset", bad_file("p.jsonl", b"")],
     "{path}: no items (the file is empty, or holds only blank lines and # comments)"),
    ("l1_throughput.py", ["--dataset", bad_file("p.jsonl", b'{"id": "a", "prompt": "\xff"}\n')],
     "{path}:1: not UTF-8 (byte 0xff at column 24); save the file as UTF-8"),
    ("l1_throughput.py",
     ["--dataset", bad_file("p.jsonl", b'[{"conversations": [{"from": "gpt", "value": "x"}]}]\n')],
     "{path}:1: 'conversations' has no human turn (the prompt)"),      # a JSON array is read (ShareGPT here)
    ("l1_throughput.py", ["--dataset", bad_file("p.jsonl", b'{"id": "a", "prompt": 42}\n')],
     "{path}:1: 'prompt' must be a non-empty text, got 42"),
    ("l1_throughput.py",
     ["--dataset", bad_file("p.jsonl", b'{"id": "a", "prompt": "x", "max_tokens": "lots"}\n')],
     "{path}:1: 'max_tokens' must be a positive integer, got \"lots\""),
    ("l1_throughput.py", ["--dataset", "missing.jsonl"], "missing.jsonl: no such file"),
    ("l1_throughput.py", ["--max-tokens", "-5"], "--max-tokens must be a number within [1, 1e+07], got -5"),
    ("l1_throughput.py", ["--read-timeout", "-1"],
     "--read-timeout must be a number within [0.01, 604800], got -1.0"),
    ("l1_throughput.py", ["--mirror-share", "nan"], "--mirror-share must be a number within [0, 1], got nan"),
    ("l1_throughput.py", ["--header", "NoColon"], "--header 'NoColon': expected 'Name: value'"),
    ("l1_throughput.py", ["--header", "X Trace: 1"],
     "--header 'X Trace: 1': 'X Trace' is not a header name (letters, digits and !#$%&'*+-.^_`|~ only)"),
    ("l1_throughput.py", ["--think-scale", "nan"],
     "--think-scale must be a number within [0, 1000], got nan"),
    ("l1_throughput.py", ["--sessions-per-user", "-1"],
     "--sessions-per-user must be a number within [0, 1e+09], got -1"),
    ("l2_gateway.py", ["--ladder-hold-s", "nan"],
     "--ladder-hold-s must be a number within [0.1, 604800], got nan"),
    ("l2_open_loop.py", ["--think-time-s", "-1"],
     "--think-time-s must be a number within [0, 86400], got -1.0"),
    ("l2_open_loop.py", ["--arrival-rate", "1e12"],         # sub-nanosecond gaps: spun past -t
     "--arrival-rate must be a number within [0.001, 100000], got 1000000000000.0"),
    ("l1_throughput.py", ["--synthetic", "input=1000000,n=1000"],     # ~30 min writing prompts at init
     "--synthetic 'input=1000000,n=1000': n x (input mean + SD) is 1,000,000,000 tokens, more than "
     "20,000,000 (about 33 s to write at start-up); lower n or the input length"),
    ("l2_open_loop.py", ["--dataset", bad_file("p.jsonl", b"{}\n")],
     "{path}: no prompt column (looked for prompt, question, instruction, input, query, problem, text); "
     "the file has: no columns; name it with --dataset-column prompt=COLUMN"),
    ("l3_rag.py", ["--dataset", bad_file("q.jsonl", b'{"id": "q1", "prompt": "x"}\n{"id": 1.5}\n')],
     "{path}:2: 'id' must be a text or an integer, got 1.5"),
    ("l3_rag.py", ["--rag-corpus", bad_file("c.jsonl", b'{"id": "d1", "title": "t", "text": "x"}\n[1]\n')],
     "{path}:2: not a corpus document ('list' object has no attribute 'get'); expected id, title, text"),
    ("l3_rag.py", ["--rag-request-template", "@nope.json"],
     "--rag-request-template @nope.json: cannot read nope.json (No such file or directory)"),
    ("l3_rag.py", ["--rag-recall-k", "0"], "--rag-recall-k must be a number >= 1, got 0"),
    ("l3_rag.py", ["--rag-corpus", bad_file("c.jsonl", b"\xfe\n")],
     "{path}:1: not UTF-8 (byte 0xfe at column 1); save the file as UTF-8"),
    # the /v1 mistake (fourfold#32: 17,372 requests in 8 s, every one a 404 on /v1/v1/...): no request at all
    ("l1_throughput.py", ["--host", "http://127.0.0.1:9/v1"],
     "--host http://127.0.0.1:9/v1 ends in /v1, and the openai dialect sends to /v1/chat/completions: "
     "every request would go to /v1/v1/chat/completions; give --host http://127.0.0.1:9 "
     "(/v1 comes with the dialect)"),
    ("l4_session.py", ["--host", "http://127.0.0.1:9/gw/v1/", "--dialect", "anthropic"],
     "--host http://127.0.0.1:9/gw/v1/ ends in /v1, and the anthropic dialect sends to /v1/messages: "
     "every request would go to /gw/v1/v1/messages; give --host http://127.0.0.1:9/gw "
     "(/v1 comes with the dialect)"),
    ("l4_session.py", ["--dataset", bad_file("s.jsonl", (json.dumps(SESSION) + "\n{\n").encode())],
     "{path}:2: not JSON (Expecting property name enclosed in double quotes at column 2)"),
    ("l4_session.py", ["--dataset", bad_file("s.jsonl", json.dumps({**SESSION, "max_turns": "3"}).encode())],
     "{path}:1: session script s1: 'max_turns' must be an integer >= 1, got '3'"),
]


def _ids() -> list[str]:
    return [f"{lf.split('.')[0]}:{i}" for i, (lf, _, _) in enumerate(RUNS)]


@pytest.mark.integration
@pytest.mark.parametrize(("locustfile_name", "args", "line"), RUNS, ids=_ids())
def test_a_run_with_bad_input_stops_before_it_starts(tmp_path: Path, locustfile, locustfile_name: str,
                                                     args: list, line: str) -> None:
    made = [a(tmp_path) if callable(a) else a for a in args]
    path = next((m for a, m in zip(args, made) if callable(a)), "")
    proc = run_locust(["-f", locustfile(locustfile_name), "--headless", "-u", "1", "-r", "1", "-t", "30s",
                       "--metrics-url", "off", *made], tmp_path, timeout=60)
    lines = [x for x in proc.stderr.splitlines() if "locust.main: Starting Locust" not in x]
    assert (proc.returncode, lines, proc.stdout) == (2, [f"fourfold: error: {line.format(path=path)}"], "")
    assert not (tmp_path / "runs").exists()          # no run directory, not even an empty one


@pytest.mark.integration
def test_the_web_ui_refuses_a_bad_start_form_with_the_line(tmp_path: Path, locustfile) -> None:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    proc = start_locust(["-f", locustfile("l1_throughput.py"), "--web-host", "127.0.0.1",
                         "--web-port", str(port), "--sim-profile", "flat", "--metrics-url", "off"], tmp_path)
    form = {"user_count": "1", "spawn_rate": "1", "host": "", "run_time": "5s"}
    try:
        wait_for(lambda: http_get(base + "/")[0] == 200, 30, what="the web UI")
        answers = [http_post_form(base + "/swarm", {**form, **bad}) for bad in (
            {"max_tokens": "-5"}, {"max_tokens": "lots"}, {"read_timeout": "nan"}, {"mirror_share": "2"},
            {"dataset": str(bad_file("p.jsonl", b"[]\n")(tmp_path))})]
        state = json.loads(http_get(base + "/stats/requests")[2])["state"]
    finally:
        out = finish(proc, terminate=True)
    assert [(a["success"], a["message"]) for a in answers] == [
        (False, "fourfold: error: --max-tokens must be a number within [1, 1e+07], got -5"),
        (False, "fourfold: error: --max-tokens 'lots': expected an integer"),
        (False, "fourfold: error: --read-timeout must be a number within [0.01, 604800], got nan"),
        (False, "fourfold: error: --mirror-share must be a number within [0, 1], got 2.0"),
        (False, f"fourfold: error: {tmp_path / 'p.jsonl'}: no items (an empty JSON array)")]
    assert state == "ready"                          # no test started
    assert "Traceback" not in out
    # (quitting a web UI that never started a test still writes an empty run directory: not this test's)
    assert all(p.stat().st_size == 0 for p in tmp_path.glob("runs/*/records.jsonl"))   # no request was sent
