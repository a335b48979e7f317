"""LLMUser: the abstract Locust User every level builds on.

One httpx client per user (fourfold's HTTP/1.1 transport, or httpx's own with ``--http2``), the
dialect chosen by ``--dialect``, items from ``--dataset`` (or the bundled prompts), warm-up
requests that reach no statistic, and :meth:`LLMUser.request`, which sends one item and hands the
record to the runtime's sinks. Concrete levels are sibling classes with ``@task`` methods; this
base has none (a subclass overriding a base task would run both).
"""

from __future__ import annotations

import itertools
import logging
import uuid
from typing import Any, ClassVar

import httpx
from locust import User, constant

from levels import hooks
from levels.options import Settings
from levels.runtime import Runtime, get_runtime
from measure.client import make_http_client
from measure.dialects import RequestOptions, get_dialect
from measure.items import DATA_DIR, Item, load_items
from measure.record import RequestRecord
from measure.stream import StreamLimits, send

logging.getLogger("httpx").setLevel(logging.WARNING)
logging.getLogger("httpcore").setLevel(logging.WARNING)

_USER_IDS = itertools.count()
_ITEMS: dict[str, list[Item]] = {}
DEFAULT_DATASET = DATA_DIR / "prompts" / "prompts.jsonl"

hooks.install()


def dataset(path: str) -> list[Item]:
    """Items of a dataset, loaded once per process."""
    key = path or str(DEFAULT_DATASET)
    if key not in _ITEMS:
        _ITEMS[key] = load_items(key)
    return _ITEMS[key]


def make_client(settings: Settings, base_url: str) -> httpx.Client:
    return make_http_client(base_url, headers=settings.request_headers(), http2=settings.http2,
                            insecure=settings.insecure, read_timeout_s=settings.read_timeout_s,
                            connect_timeout_s=settings.connect_timeout_s)


class LLMUser(User):
    """Abstract base: subclasses set ``level``/``scenario`` and define tasks."""

    abstract = True
    level: ClassVar[str] = "l1"
    scenario: ClassVar[str] = "default"
    wait_time = constant(0)
    # Facts about the level that the runtime and the embedded-target launcher read.
    samples_server_metrics: ClassVar[bool] = False
    ignore_eos_on_simulator: ClassVar[bool] = False

    def __init__(self, environment: Any) -> None:
        super().__init__(environment)
        self.runtime: Runtime = get_runtime(environment)
        self.settings: Settings = self.runtime.settings
        self.user_id = next(_USER_IDS)
        self.dialect = get_dialect(self.settings.dialect)
        self.items = dataset(self.settings.dataset)
        self._cursor = itertools.cycle(range(len(self.items)))
        for _ in range(self.user_id % len(self.items)):
            next(self._cursor)
        self.options = self.request_options()
        self.limits = StreamLimits(max_duration_s=self.settings.max_response_s)
        self.client = make_client(self.settings, self.host or "")
        self._warmups_left = self.settings.warmup_requests

    @classmethod
    def start_embedded(cls, settings: Settings) -> tuple[str, list[Any]]:
        """Start this level's embedded targets; return the URL users send to and stop handles."""
        from targets.launch import start_simulator

        simulator = start_simulator(profile=settings.sim_profile, seed=settings.sim_seed)
        return simulator.url, [simulator]

    def request_options(self) -> RequestOptions:
        settings = self.settings
        ignore_eos = settings.ignore_eos or (self.ignore_eos_on_simulator and hooks.simulator_running())
        return RequestOptions(model=settings.model, stream=settings.stream, max_tokens=settings.max_tokens,
                              ignore_eos=ignore_eos)

    def next_item(self) -> Item:
        return self.items[next(self._cursor)]

    def request(self, item: Item, *, scenario: str | None = None, options: RequestOptions | None = None,
                extra: dict[str, Any] | None = None, headers: dict[str, str] | None = None) -> RequestRecord:
        """Send ``item`` (the first ``--warmup-requests`` of each user are warm-up) and record it."""
        http_request = self.dialect.build(item, options or self.options)
        if headers:
            http_request.headers.update(headers)
        record = RequestRecord(
            level=self.level, scenario=scenario or self.scenario, dialect=self.dialect.name,
            endpoint=http_request.path, item_id=item.id, request_id=uuid.uuid4().hex,
            user_id=self.user_id, warmup=self._warmups_left > 0, extra=dict(extra or {}),
        )
        if record.warmup:
            self._warmups_left -= 1
        try:
            send(self.client, self.dialect, http_request, record, self.limits)
        except BaseException:
            # The run is stopping (GreenletExit) mid-request: keep the record, out of every statistic.
            record.error_class, record.error_detail = "cancelled", "the load generator stopped first"
            self.runtime.observe(record)
            raise
        self.runtime.observe(record)
        return record

    def on_stop(self) -> None:
        self.client.close()
