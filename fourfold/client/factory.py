"""httpx clients for LLM requests: fourfold's HTTP/1.1 transport, or httpx's own for HTTP/2.

One shared SSL context per verification mode, built on the first https client: building a default
context costs about 200 ms of CPU with certifi (20 ms with the system store), which stalls a gevent
process spawning hundreds of users, and every process that never speaks TLS skips it.
"""

from __future__ import annotations

import functools
import ssl

import httpx

from fourfold.client.h2client import make_h2_client
from fourfold.client.transport import RawH1Transport

BASE_HEADERS = {"Accept-Encoding": "identity", "User-Agent": "fourfold"}


@functools.cache
def ssl_context(insecure: bool) -> ssl.SSLContext:
    ctx = ssl.create_default_context()
    if insecure:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    return ctx


def make_http_client(base_url: str, *, headers: dict[str, str] | None = None, http2: bool = False,
                     insecure: bool = False, read_timeout_s: float = 60.0,
                     connect_timeout_s: float = 10.0, max_connections: int = 4) -> httpx.Client:
    """``http2``: httpx's transport (h2 by ALPN over https, prior-knowledge h2c over http; see
    :mod:`fourfold.client.h2client`). ``max_connections``: idle keep-alive connections kept per origin
    (raise it when one client carries many concurrent requests, e.g. the open-loop dispatcher)."""
    timeout = httpx.Timeout(read_timeout_s, connect=connect_timeout_s)
    all_headers = {**BASE_HEADERS, **(headers or {})}
    if http2:
        return make_h2_client(base_url, verify=ssl_context(insecure), timeout=timeout, headers=all_headers,
                              max_connections=max_connections)
    # an http:// client gets none (an https URL it is handed later gets a verifying default one)
    ctx = ssl_context(insecure) if base_url.lower().startswith("https:") else None
    transport = RawH1Transport(ssl_context=ctx, connect_timeout_s=connect_timeout_s,
                               read_timeout_s=read_timeout_s, max_idle_per_host=max_connections)
    return httpx.Client(base_url=base_url, transport=transport, timeout=timeout, headers=all_headers)
