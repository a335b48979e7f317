"""A misconfigured target costs one request (fourfold#32 item 6): before a headless run, one small
request per target; a 404, 401/403, refused connection, redirect or non-LLM answer is one line naming
the URL tried and the fix, exit 2, no run directory; a flaky target's bad answer is asked again, and
a target that answers is counted in meta.json's ``preflight`` (the server saw those requests too).
``--base-path`` reaches an API under a prefix; ``--abort-on-error-rate`` ends a run whose every
request fails."""

from __future__ import annotations

import json

import pytest

from tests.hostile import harness as h

pytestmark = pytest.mark.integration


async def status_401(conn: h.Conn, req: h.Request) -> None:
    await conn.send_response(401, {"error": {"message": "invalid api key"}})


async def only_under_prefix(conn: h.Conn, req: h.Request) -> None:
    """An API that lives under /openai/v1 (as behind a gateway or Azure): 404 anywhere else."""
    if not req.path.startswith("/openai/v1/chat/completions"):
        await conn.send_response(404, b"not found", content_type="text/plain")
        return
    await conn.send_sse(h.good_stream(3))


async def html_page(conn: h.Conn, req: h.Request) -> None:
    await conn.send_response(200, b"<html><body>Welcome to nginx!</body></html>", content_type="text/html")


_answered = [0]


async def flaky_first(conn: h.Conn, req: h.Request) -> None:
    """The first answer (of the server process) is garbage, every later one a good stream."""
    _answered[0] += 1
    if _answered[0] == 1:
        await conn.send_response(200, b"<html>starting up</html>", content_type="text/html")
        return
    await conn.send_sse(h.good_stream(3))


def _run(tmp_path, spec: str, extra: list[str] | None = None):
    with h.HostileServer(f"tests.hostile.test_preflight:{spec}") as server:
        run = h.run_level(server.url, tmp_path, users=4, seconds=3, extra=extra, preflight=True,
                          csv_html=False)
    return run, server


@pytest.mark.parametrize("spec, says", [
    ("status_401", "answered 401: the credentials were refused or missing; give --api-key"),
    ("only_under_prefix", "answered 404 Not Found: nothing serves /v1/chat/completions there"),
    ("html_page", "got an answer that is not a openai response"),
])
def test_a_misconfigured_target_gets_one_request_and_one_line(tmp_path, spec, says):
    run, server = _run(tmp_path, spec)
    h.assert_clean(run, max_s=30, rcs=(2,))
    errors = [line for line in run.stderr.splitlines() if line.startswith("fourfold: error:")]
    assert len(errors) == 1 and says in errors[0], run.stderr
    assert errors[0].endswith("(--no-preflight skips this check)")
    assert f"{server.url}/v1/chat/completions" in errors[0]
    assert run.run_dir is None                                   # nothing started
    assert server.requests == (3 if spec == "html_page" else 1)  # a non-LLM answer is asked three times


def test_a_refused_target_is_one_line(tmp_path):
    run = h.run_level(h.refused_url(), tmp_path, users=4, seconds=3, preflight=True, csv_html=False)
    h.assert_clean(run, max_s=30, rcs=(2,))
    assert "could not connect" in run.stderr and run.run_dir is None


def test_base_path_reaches_an_api_under_a_prefix_and_the_preflight_is_counted(tmp_path):
    run, server = _run(tmp_path, "only_under_prefix", ["--base-path", "/openai/v1/"])
    h.assert_clean(run, max_s=30, rcs=(0,))
    meta = json.loads((run.run_dir / "meta.json").read_text())
    (preflight,) = meta["preflight"]
    assert preflight["requests"] == 1 and preflight["error_class"] == "ok" and preflight["option"] == "--host"
    assert preflight["url"] == f"{server.url}/openai/v1/chat/completions"
    records = h.counted_records(run)
    assert records and {r["endpoint"] for r in records} == {"/openai/v1/chat/completions"}
    assert {r["error_class"] for r in records} <= {"ok", "cancelled"}
    assert server.requests == len(run.records) + 1               # every request a record, but the preflight
    assert run.summary["preflight"] == {"requests": 1, "targets": 1}


def test_a_flaky_first_answer_is_asked_again_and_the_run_goes_on(tmp_path):
    run, server = _run(tmp_path, "flaky_first")
    h.assert_clean(run, max_s=30, rcs=(0,))
    (preflight,) = json.loads((run.run_dir / "meta.json").read_text())["preflight"]
    assert preflight["requests"] == 2 and preflight["error_class"] == "ok"


def test_no_preflight_skips_it_and_4xx_answers_make_users_back_off(tmp_path):
    run, server = _run(tmp_path, "status_401", ["--no-preflight"])
    h.assert_clean(run, max_s=30, rcs=(0, 1))
    assert run.run_dir is not None and "preflight" not in json.loads((run.run_dir / "meta.json").read_text())
    records = h.counted_records(run)
    # a request on the wire when the run stops (at -t, or when --abort-on-error-rate ends it) is cancelled
    refused = [r for r in records if r["error_class"] == "http_4xx"]
    assert refused and {r["error_class"] for r in records} <= {"http_4xx", "cancelled"}
    # 0.1 s, doubling, after each 401: a few attempts per user in 3 s (without the wait, thousands)
    assert server.requests == len(run.records) <= 4 * 7
    backoff = run.summary["backoff"]
    assert backoff["http_4xx"] == len(refused) and backoff["connect_errors"] == 0


async def always_503(conn: h.Conn, req: h.Request) -> None:
    await conn.send_response(503, {"error": {"message": "overloaded"}})


def test_a_run_whose_every_request_fails_stops_itself_with_its_records(tmp_path):
    """The 5xx pass the preflight (an overloaded target may be the test); then every request fails for
    the window and the run ends long before -t, exit 1, with the reason in summary.json."""
    with h.HostileServer("tests.hostile.test_preflight:always_503") as server:
        run = h.run_level(server.url, tmp_path, users=4, seconds=60, preflight=True, csv_html=False,
                          extra=["--abort-window-s", "2"])
    h.assert_clean(run, max_s=30, rcs=(1,))
    assert "every request failed in the last 2 s" in run.stderr
    assert "the run stops, records kept" in run.stderr
    aborted = run.summary["aborted"]
    assert aborted["classes"] == {"http_5xx": aborted["failed"]} and aborted["failed"] >= 10
    assert 2.0 <= aborted["at_s"] < 10
    (preflight,) = json.loads((run.run_dir / "meta.json").read_text())["preflight"]
    assert preflight["error_class"] == "http_5xx" and preflight["requests"] == 1
    assert server.requests == len(run.records) + 1 and all(r["error_class"] in ("http_5xx", "cancelled")
                                                           for r in run.records)
