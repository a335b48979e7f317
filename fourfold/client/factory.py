"""httpx clients for LLM requests: fourfold's HTTP/1.1 transport, or httpx's own for HTTP/2.

One shared SSL context per verification mode: building a default context per client costs about
200 ms of CPU (certifi loading), which stalls a gevent process spawning hundreds of users.
"""

from __future__ import annotations

import ssl

import httpx

from fourfold.client.h2client import make_h2_client
from fourfold.client.transport import RawH1Transport

_SSL_VERIFY = ssl.create_default_context()
_SSL_INSECURE = ssl.create_default_context()
_SSL_INSECURE.check_hostname = False
_SSL_INSECURE.verify_mode = ssl.CERT_NONE
BASE_HEADERS = {"Accept-Encoding": "identity", "User-Agent": "fourfold"}


def make_http_client(base_url: str, *, headers: dict[str, str] | None = None, http2: bool = False,
                     insecure: bool = False, read_timeout_s: float = 60.0,
                     connect_timeout_s: float = 10.0, max_connections: int = 4) -> httpx.Client:
    """``http2``: httpx's transport (h2 by ALPN over https, prior-knowledge h2c over http; see
    :mod:`fourfold.client.h2client`). ``max_connections``: idle keep-alive connections kept per origin
    (raise it when one client carries many concurrent requests, e.g. the open-loop dispatcher)."""
    ctx = _SSL_INSECURE if insecure else _SSL_VERIFY
    timeout = httpx.Timeout(read_timeout_s, connect=connect_timeout_s)
    all_headers = {**BASE_HEADERS, **(headers or {})}
    if http2:
        return make_h2_client(base_url, verify=ctx, timeout=timeout, headers=all_headers,
                              max_connections=max_connections)
    transport = RawH1Transport(ssl_context=ctx, connect_timeout_s=connect_timeout_s,
                               read_timeout_s=read_timeout_s, max_idle_per_host=max_connections)
    return httpx.Client(base_url=base_url, transport=transport, timeout=timeout, headers=all_headers)
