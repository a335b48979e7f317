"""Gateway knobs in front of the simulated engine: a concurrency limit and idle keep-alive.

``--max-concurrency N`` caps generations in flight; what happens to the request over the limit
is ``--over-limit``: ``queue`` (FIFO, admitted when a slot frees; its plan starts then and the
plan header says ``queued_ms``), ``429`` (with ``Retry-After``) or ``503``. The idle keep-alive
timeout (``--keepalive-timeout-s``) and the requests a connection may carry
(``--keepalive-max-requests``, nginx's ``keepalive_requests``: the N-th response says
``Connection: close``) are applied per connection by the server; both default to the profile's
``keepalive_timeout_s`` / ``keepalive_max_requests``, which is how profiles differ in connection
reuse (requests on an already-open connection: (N - 1) / N with back-to-back requests).

``--key-rate-limit R`` is a per-API-key rate limit, as gateways (LiteLLM, Kong, an API's own
quota) apply per tenant: each key (the ``Authorization`` token, else ``x-api-key`` / ``api-key``; a
request without one counts as one anonymous key) has a token bucket of ``R`` requests a second
holding at most ``max(1, R)``; a generation request with an empty bucket is answered 429 at once,
with ``Retry-After`` the whole seconds until its next token, and never reaches the engine.

Extension point: a gateway decides, per request, *before* the engine sees it. Later knobs
(rate limits by tokens per minute, fault injection that answers 429/500/503 or delays headers)
belong here as further :class:`Gateway` policies.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass

OVER_LIMIT_MODES = ("queue", "429", "503")


@dataclass(frozen=True)
class GatewayConfig:
    max_concurrency: int = 0            # 0: unlimited
    over_limit: str = "queue"
    retry_after_s: int = 1
    keepalive_timeout_s: float = 0.0    # 0: idle keep-alive connections are never closed
    keepalive_max_requests: int = 0     # 0: a connection carries any number of requests
    key_rate_limit: float = 0.0         # requests per second per API key (0: no limit)

    def __post_init__(self) -> None:
        if self.over_limit not in OVER_LIMIT_MODES:
            raise ValueError(f"over_limit must be one of {', '.join(OVER_LIMIT_MODES)}, got "
                             f"{self.over_limit!r}")
        if (self.max_concurrency < 0 or self.keepalive_timeout_s < 0 or self.keepalive_max_requests < 0
                or not self.key_rate_limit >= 0):
            raise ValueError("max_concurrency, keepalive_timeout_s, keepalive_max_requests and "
                             "key_rate_limit must be >= 0")

    def keeps_alive(self, served: int) -> bool:
        """Whether a connection stays open after its ``served``-th request (1 = the first)."""
        return not self.keepalive_max_requests or served < self.keepalive_max_requests


class Gateway:
    """Admission control: ``admit(start)`` runs ``start`` now, queues it, or returns a rejection status."""

    def __init__(self, config: GatewayConfig) -> None:
        self.config = config
        self.in_flight = 0
        self._queue: deque[Callable[[], None]] = deque()

    @property
    def waiting(self) -> int:
        return len(self._queue)

    def admit(self, start: Callable[[], None]) -> int | None:
        """None when ``start`` was called or queued; otherwise the HTTP status to answer with."""
        limit = self.config.max_concurrency
        if limit and self.in_flight >= limit:
            if self.config.over_limit == "queue":
                self._queue.append(start)
                return None
            return int(self.config.over_limit)
        self.in_flight += 1
        start()
        return None

    def withdraw(self, start: Callable[[], None]) -> None:
        """Forget a queued request whose client went away."""
        try:
            self._queue.remove(start)
        except ValueError:
            pass

    def release(self) -> None:
        """A generation finished (or was aborted): admit the next queued request, if any."""
        self.in_flight -= 1
        while self._queue and (not self.config.max_concurrency
                               or self.in_flight < self.config.max_concurrency):
            start = self._queue.popleft()
            self.in_flight += 1
            start()


_KEY_HEADERS = ("authorization", "x-api-key", "api-key")


def api_key_of(headers: Mapping[str, str]) -> str:
    """The key a request carries: the ``Authorization`` token (scheme word dropped), else ``x-api-key``
    or ``api-key``; "" without one."""
    for name in _KEY_HEADERS:
        value = headers.get(name, "").strip()
        if value and name == "authorization":
            return value.partition(" ")[2].strip() or value
        if value:
            return value
    return ""


class KeyRateLimit:
    """Token buckets per API key (module docstring); ``take(key, now_s)`` is 0 when the request may
    go, else the seconds until the key's next token."""

    def __init__(self, rate_per_s: float) -> None:
        self.rate = float(rate_per_s)
        self.capacity = max(1.0, self.rate)
        self._buckets: dict[str, tuple[float, float]] = {}    # key -> (tokens, at_s)

    def take(self, key: str, now_s: float) -> float:
        if self.rate <= 0:
            return 0.0
        tokens, at_s = self._buckets.get(key, (self.capacity, now_s))
        tokens = min(self.capacity, tokens + (now_s - at_s) * self.rate)
        if tokens >= 1.0:
            self._buckets[key] = (tokens - 1.0, now_s)
            return 0.0
        self._buckets[key] = (tokens, now_s)
        return (1.0 - tokens) / self.rate
