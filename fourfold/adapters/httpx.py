"""httpx's insides that fourfold uses (checked against httpx 0.29.0, httpcore 1.0.9).

fourfold keeps httpx as its client API and puts its own HTTP/1.1 transport underneath
(:mod:`fourfold.client.transport`). Three things need more than httpx's public API: sending on the
transport without the client's per-request machinery when the client would add nothing
(:func:`direct_transport`, :func:`merge_url`), reaching the transport's own stream under the one
httpx wraps around it (:func:`transport_stream`, :func:`break_stream_cycle`), and asking the
connection pool of ``httpx.HTTPTransport`` whether it holds an idle connection
(:func:`connection_pool`). Each function reads its private name on the object it is given; the
per-request ones are one attribute read each, as at their call sites before.
"""

from __future__ import annotations

from typing import Any, TypeVar

import httpx

__all__ = ["break_stream_cycle", "connection_pool", "direct_transport", "merge_url", "transport_stream"]

T = TypeVar("T")


def direct_transport(client: httpx.Client, kind: type[T]) -> T | None:
    """``client``'s transport when it is exactly a ``kind`` and the client itself would add nothing
    to a request: a plain ``httpx.Client``, open, with no auth, no event hooks, no mounted
    transports, no default query parameters, no redirects followed and no cookies stored. Else None.

    Private names: ``Client._transport`` (the transport for every URL no mount matches) and
    ``Client._mounts`` (an empty dict without ``mounts=`` or proxies); a missing ``_mounts`` reads
    as mounted, so a change sends every request through httpx's own path. Checked against httpx 0.29.0.
    """
    transport = getattr(client, "_transport", None)
    if (type(transport) is not kind or type(client) is not httpx.Client or client.is_closed
            or client.auth is not None or getattr(client, "_mounts", True) or client.params
            or client.follow_redirects or client.event_hooks["request"] or client.event_hooks["response"]
            or client.cookies.jar):
        return None
    return transport


def merge_url(client: httpx.Client, url: str) -> httpx.URL:
    """``url`` joined to the client's ``base_url`` as ``client.request`` joins it (a relative path
    appended to the base path). Private name: ``Client._merge_url``; checked against httpx 0.29.0."""
    return client._merge_url(url)


def transport_stream(response: httpx.Response) -> Any:
    """The stream the transport put into ``response``: ``client.stream`` wraps it in a
    ``BoundSyncStream`` that times the response; a response straight from a transport has it
    itself. Private name: ``BoundSyncStream._stream``; checked against httpx 0.29.0."""
    stream = response.stream
    return getattr(stream, "_stream", stream)


def break_stream_cycle(response: httpx.Response) -> None:
    """Drop the reference from ``response``'s ``BoundSyncStream`` back to ``response``, once the
    stream is closed.

    The streamed Response and its BoundSyncStream point at each other, so every request left ~33
    objects (the request, its URL, headers, the response) for the cyclic garbage collector; at 256
    streams that garbage made a full collection every few seconds that held the hub 30-100 ms, and
    the streams' reads merged meanwhile (a first token stamped with a later token's arrival).
    Without the back reference reference counting frees the lot. Private name:
    ``BoundSyncStream._response`` (read again only by its ``close``); checked against httpx 0.29.0.
    """
    stream = response.stream
    if getattr(stream, "_response", None) is response:
        stream._response = None  # type: ignore[union-attr]


def connection_pool(transport: httpx.HTTPTransport) -> Any:
    """The httpcore connection pool inside ``transport`` (``httpcore.ConnectionPool``, or a proxy
    pool: both have ``connections``), or None. Created with the transport and never replaced, so a
    caller may keep it. Private name: ``HTTPTransport._pool``; checked against httpx 0.29.0 with
    httpcore 1.0.9."""
    return getattr(transport, "_pool", None)
