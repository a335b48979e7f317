"""One request per target before the load: a misconfigured target costs one request, not a flood.

A wrong ``--host`` path, a missing API key or a URL that is not an LLM server used to be found
by the load itself: every user failing as fast as the target could answer (17,372 404s in 8 s
for a host ending in ``/v1``). At ``init`` (headless, on a standalone or master process, before
any user starts) each target a run sends to (``--host``, a ``--mirror-host``) gets one small
request of the run's own dialect and options (a short prompt, ``max_tokens`` 8), through the same
client and classification as every record. What makes the run pointless ends it with one line
naming the URL tried and the likely fix, exit 2 (:class:`~fourfold.errors.UsageError`); an outcome
one answer does not settle (not a refused connection, 404, 401/403 or redirect) is asked up to
three times and ends the run only when every answer is bad:

- ``connect_error``: nothing answers there (refused, DNS, TLS);
- ``http_4xx`` (not 429): 404 (the path: ``--host`` without the dialect's ``/v1``, or
  ``--base-path``), 401/403 (credentials: ``--api-key``), any other 4xx with the server's words;
- ``redirect``: fourfold follows none; the Location is the URL to give;
- ``malformed_stream``, ``too_large``: an answer that is not the dialect's (an HTML page, another API).

What a load test may be about passes with a warning: 429 and 5xx (an overloaded target), time-outs,
a cut stream. ``--no-preflight`` skips it; embedded targets are not checked (fourfold started them),
and neither are runs with a web UI, whose host the start form can still change.
"""

from __future__ import annotations

import logging
from typing import Any
from urllib.parse import urljoin

from fourfold.client.dialects import RequestOptions
from fourfold.client.stream import StreamLimits, send
from fourfold.errors import UsageError
from fourfold.measure.record import RequestRecord
from fourfold.workloads.items import Item

log = logging.getLogger("fourfold")

PREFLIGHT_ITEM = Item(id="fourfold-preflight",
                      messages=({"role": "user", "content": "Reply with one word: ready."},))
PREFLIGHT_MAX_TOKENS = 8
PREFLIGHT_TIMEOUT_S = 30.0
PREFLIGHT_TRIES = 3        # for an outcome one answer does not settle (a flaky target's bad answer)
FATAL = frozenset({"connect_error", "http_4xx", "redirect", "malformed_stream", "too_large"})


def preflight_options(settings: Any) -> RequestOptions:
    return RequestOptions(model=settings.model, stream=settings.stream, max_tokens=PREFLIGHT_MAX_TOKENS)


def problem(record: RequestRecord, url: str, option: str, dialect_path: str) -> str:
    """The line that ends the run for a failed preflight ``record`` ("" when the run may go on)."""
    cls, status, detail = record.error_class, record.status, (record.error_detail or "").strip()
    detail = detail[:240] + ("..." if len(detail) > 240 else "")
    where = f"{option}: the preflight request to {url}"
    if cls == "connect_error":
        return f"{where} could not connect ({detail}); is the server up at that address?"
    if cls == "redirect":
        return f"{where} was redirected ({detail}); fourfold follows no redirect: give the final URL"
    if cls == "http_4xx" and status == 404:
        return (f"{where} answered 404 Not Found: nothing serves {dialect_path} there. Give the server's "
                f"root as {option} (the dialect adds {dialect_path}), or --base-path when its API lives "
                f"under another prefix, or another --dialect")
    if cls == "http_4xx" and status in (401, 403):
        return (f"{where} answered {status}: the credentials were refused or missing; give --api-key "
                f"(or the FOURFOLD_API_KEY variable) or the header the server expects (--header)")
    if cls == "http_4xx":
        return f"{where} answered {status}: {detail or 'no reason given'}; check --model and --dialect"
    if cls in ("malformed_stream", "too_large"):
        return (f"{where} got an answer that is not a {record.dialect} response ({detail}); is this the "
                f"LLM server, and the right --dialect?")
    return ""


def settled(record: RequestRecord) -> bool:
    """True when one answer says all: nothing listening, a wrong path, refused credentials, a
    redirect. Any other failure may be one bad answer of a flaky target: it is asked again."""
    return record.error_class in ("connect_error", "redirect") or (
        record.error_class == "http_4xx" and record.status in (401, 403, 404))


def check_target(url: str, option: str, dialect: Any, request: Any, client: Any) -> dict[str, Any]:
    """Send the preflight ``request`` to ``url`` with ``client`` (closed after), up to
    ``PREFLIGHT_TRIES`` times while the outcome is fatal but not :func:`settled`; :class:`UsageError`
    when it stays fatal, else what meta.json's ``preflight`` keeps of it (warned about unless ok): the
    requests it sent are not records, so the server saw that many more than the records hold."""
    sent = 0
    try:
        while sent < PREFLIGHT_TRIES:
            sent += 1
            record = RequestRecord(level="preflight", scenario="preflight", dialect=dialect.name,
                                   endpoint=request.path, item_id=PREFLIGHT_ITEM.id, request_id="preflight")
            send(client, dialect, request, record, StreamLimits(max_duration_s=PREFLIGHT_TIMEOUT_S), None)
            if record.error_class not in FATAL or settled(record):
                break
    finally:
        client.close()
    full_url = urljoin(url.rstrip("/") + "/", request.path.lstrip("/"))
    line = problem(record, full_url, option, request.path) if record.error_class in FATAL else ""
    if line:
        raise UsageError(f"{line} (--no-preflight skips this check)")
    if record.error_class not in ("ok", "truncated"):
        log.warning("fourfold: the preflight request to %s ended %s (%s %s); the run goes on",
                    full_url, record.error_class, record.status or "", record.error_detail or "")
    return {"option": option, "url": full_url, "requests": sent, "error_class": record.error_class,
            "status": record.status, "ttft_ms": record.ttft_ms, "e2e_ms": record.e2e_ms}


__all__ = ["FATAL", "PREFLIGHT_ITEM", "check_target", "preflight_options", "problem"]
