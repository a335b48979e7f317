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
import os
import time
import uuid
from collections.abc import Callable
from typing import Any, ClassVar

import gevent
import httpx
from locust import User, constant

from fourfold.adapters.locust import user_waiting
from fourfold.client.dialects import RequestOptions, get_dialect, with_base_path
from fourfold.client.factory import make_http_client
from fourfold.client.stream import UNSENT, StreamLimits, send
from fourfold.data import DATA_DIR
from fourfold.errors import OptionError
from fourfold.levels import hooks
from fourfold.levels.options import Settings
from fourfold.levels.preflight import PREFLIGHT_ITEM, check_target, preflight_options
from fourfold.levels.runtime import Runtime, get_runtime
from fourfold.measure.record import RequestRecord
from fourfold.rundir.secrets import attach as attach_secrets
from fourfold.targets.launch import start_simulator
from fourfold.workloads.formats import load_items_as
from fourfold.workloads.items import Item
from fourfold.workloads.mix import MixPicker
from fourfold.workloads.sampling import Selection
from fourfold.workloads.synthetic import estimate_tokens, make_items, parse_synthetic
from fourfold.workloads.tokenizer import Tokenizer, load_tokenizer
from fourfold.workloads.trace import exact_trace_items, is_trace

logging.getLogger("httpx").setLevel(logging.WARNING)
logging.getLogger("httpcore").setLevel(logging.WARNING)

_USER_IDS = itertools.count()
BACKOFF_FIRST_S, BACKOFF_MAX_S = 0.1, 5.0      # a user's wait after a connect error (docs/errors.md)
_ITEMS: dict[tuple[str, str, tuple[tuple[str, str], ...]], list[Item]] = {}
DEFAULT_DATASET = DATA_DIR / "prompts" / "prompts.jsonl"


def dataset(path: str, settings: Settings | None = None) -> list[Item]:
    """Items of a dataset, loaded once per process; a ``--dataset`` is read with the run's
    ``--dataset-format`` and ``--dataset-column`` (:mod:`fourfold.workloads.formats`)."""
    fmt, columns = ((settings.dataset_format, settings.dataset_columns)
                    if settings is not None and settings.dataset else ("auto", ()))
    key = (path or str(DEFAULT_DATASET), fmt, columns)
    if key not in _ITEMS:
        _ITEMS[key] = load_items_as(key[0], fmt, columns)
    return _ITEMS[key]


_SELECTED: dict[tuple[Any, ...], list[Item]] = {}
WORKERS_ATTR = "fourfold_workers"      # parsed_options: workers of the run (the master sets it at test_start)


def selection(settings: Settings) -> Selection:
    return Selection(sample_n=settings.dataset_sample, seed=settings.seed, shuffle=settings.shuffle,
                     filter=settings.dataset_filter)


def selected_items(path: str, settings: Settings) -> list[Item]:
    """The items of ``path`` this run sends: ``--dataset-filter``, then ``--dataset-sample``
    (:mod:`fourfold.workloads.sampling`); input lengths by ``--tokenizer`` when given, else the
    synthetic estimate, and a trace's prompts made exact by it. Once per process and options."""

    chosen = selection(settings)
    items = dataset(path, settings)
    exact = bool(settings.tokenizer) and is_trace(items)
    if not (chosen.sample_n or chosen.filter or exact):
        return items
    key = (path, chosen, settings.tokenizer)
    if key not in _SELECTED:
        tokenizer = run_tokenizer(settings)
        if tokenizer is not None:
            count = tokenizer.count
        else:
            count = estimate_tokens
        if exact:
            items = exact_trace_items(items, tokenizer)
        _SELECTED[key] = chosen.select(items, count, path or "the bundled prompts")
    return _SELECTED[key]


_SYNTHETIC: dict[tuple[str, str], list[Item]] = {}


def synthetic_items(settings: Settings) -> list[Item]:
    """``--synthetic``'s items (exact lengths with ``--tokenizer``), made once per process."""

    spec = parse_synthetic(settings.synthetic)
    if settings.dataset or settings.dataset_sample or settings.dataset_filter:
        raise OptionError("--synthetic makes its own items: drop --dataset, --dataset-sample and "
                          "--dataset-filter (n= sets how many)")
    key = (settings.synthetic, settings.tokenizer)
    if key not in _SYNTHETIC:
        _SYNTHETIC[key] = make_items(spec, run_tokenizer(settings))
    return _SYNTHETIC[key]


def run_items(settings: Settings) -> list[Item]:
    """What L1 and L2 send: ``--synthetic``'s items, else the selected ``--dataset`` items."""
    return synthetic_items(settings) if settings.synthetic else selected_items(settings.dataset, settings)


def asks_output_length(items: list[Item]) -> bool:
    """Items made to a length (``--synthetic``, a trace): their max_tokens is the asked output length."""
    return bool(items) and ("synthetic" in items[0].meta or "arrival_ms" in items[0].meta)


def run_tokenizer(settings: Settings) -> Tokenizer | None:
    """``--tokenizer`` (loaded once per process), or None."""
    return load_tokenizer(settings.tokenizer) if settings.tokenizer else None


def token_counts_facts(settings: Settings) -> dict[str, Any]:
    """summary.json's ``token_counts``: the --tokenizer and how --synthetic's lengths were counted."""
    if not (settings.tokenizer or settings.synthetic):
        return {}
    facts: dict[str, Any] = {"tokenizer": settings.tokenizer or None}
    if settings.synthetic:
        facts["synthetic"] = parse_synthetic(settings.synthetic).describe()
        facts["synthetic_lengths"] = "tokenizer" if settings.tokenizer else "estimate"
    return facts


def _note_token_counts(environment: Any, **_kw: Any) -> None:
    facts = token_counts_facts((runtime := get_runtime(environment)).settings)
    if facts:
        runtime.extras.summary["token_counts"] = facts


def global_user_index(environment: Any, local_id: int) -> int:
    """A user's index in the whole run: ``local_id`` on a local runner; on worker ``i`` of ``W``,
    ``local_id * W + i`` (Locust hands users to workers in turn, so with ``-u`` a multiple of ``W``
    the indices are those of a local run with the same ``-u``)."""
    runner, options = getattr(environment, "runner", None), getattr(environment, "parsed_options", None)
    workers = int(getattr(options, WORKERS_ATTR, 0) or 0)
    index = int(getattr(runner, "worker_index", 0) or 0)
    if type(runner).__name__ != "WorkerRunner" or workers < 1:
        return local_id
    return local_id * workers + index


def _note_workers(environment: Any, **_kw: Any) -> None:
    """``test_start`` on the master: the worker count, forwarded to the workers with the spawn message."""
    runner, options = environment.runner, environment.parsed_options
    if type(runner).__name__ == "MasterRunner" and options is not None:
        setattr(options, WORKERS_ATTR, max(1, runner.worker_count))


def simulator_gateway_args(settings: Settings) -> list[str]:
    """The embedded simulator's gateway knobs (``--sim-max-concurrency`` ...) as its arguments."""
    args: list[str] = []
    if settings.sim_max_concurrency:
        args += ["--max-concurrency", str(settings.sim_max_concurrency),
                 "--over-limit", settings.sim_over_limit]
    if settings.sim_keepalive_timeout_s:
        args += ["--keepalive-timeout-s", f"{settings.sim_keepalive_timeout_s:g}"]
    if settings.sim_key_rate_limit:
        args += ["--key-rate-limit", f"{settings.sim_key_rate_limit:g}"]
    return args


def make_client(settings: Settings, base_url: str) -> httpx.Client:
    """The httpx client of a user (or its mirror), carrying the run's credentials to scrub from every
    record it makes (``rundir.secrets``: the API key and each non-public ``--header`` value)."""
    client = make_http_client(base_url, headers=settings.request_headers(), http2=settings.http2,
                              insecure=settings.insecure, read_timeout_s=settings.read_timeout_s,
                              connect_timeout_s=settings.connect_timeout_s)
    return attach_secrets(client, settings.secrets())


def next_backoff_s(previous_s: float) -> float:
    """A user's wait before its next request after a connect error: 0.1 s after the first, doubling
    with each further one up to 5 s; a request that connects resets it (``previous_s`` 0)."""
    return BACKOFF_FIRST_S if previous_s <= 0 else min(previous_s * 2, BACKOFF_MAX_S)


class LLMUser(User):
    """Abstract base: subclasses set ``level``/``scenario`` and define tasks."""

    abstract = True
    level: ClassVar[str] = "l1"
    scenario: ClassVar[str] = "default"
    variant: str = ""       # A/B variant this user belongs to (L4 sticky A/B), copied into every record
    wait_time = constant(0)
    # Facts about the level that the runtime and the embedded-target launcher read.
    samples_server_metrics: ClassVar[bool] = False
    ignore_eos_on_simulator: ClassVar[bool] = False
    # the level's (add_arguments, register) pair, which the class methods below call: the shared
    # listeners here; a level with options or listeners of its own names its module's pair
    level_listeners: ClassVar[tuple[Callable[..., None], Callable[..., None]]] = (hooks.add_arguments,
                                                                                    hooks.register)

    def __init__(self, environment: Any) -> None:
        super().__init__(environment)
        self.runtime: Runtime = get_runtime(environment)
        self.settings: Settings = self.runtime.settings
        self.user_id = next(_USER_IDS)
        self.dialect = get_dialect(self.settings.dialect)
        self.user_index = global_user_index(environment, self.user_id)
        self.use_items(self.initial_items())
        self.options = self.request_options()
        self.limits = StreamLimits(max_duration_s=self.settings.max_response_s)
        self.tokenizer = run_tokenizer(self.settings)
        self.client = make_client(self.settings, self.host or "")
        self._warmups_left = self.settings.warmup_requests
        self._backoff_s = 0.0                # the last wait after a connect error (0: connected last time)
        self._backoff_until = 0.0            # time.monotonic() before which this user sends nothing
        self.mirror = Mirror(self.settings) if self.settings.mirror_host else None
        self.mix = MixPicker.of(self.settings.mix_entries, self.settings.mix_sticky, self.settings.seed,
                                self.user_index)

    @classmethod
    def add_arguments(cls, parser: Any, **_kw: Any) -> None:
        """``events.init_command_line_parser`` listener: fourfold's options (and this level's)."""
        cls.level_listeners[0](parser)

    @classmethod
    def register(cls, environment: Any, **_kw: Any) -> None:
        """``events.init`` listener: attaches fourfold's listeners (and this level's) to ``environment``."""
        cls.level_listeners[1](environment)
        if hooks.first_time(environment, "sampling"):
            environment.events.test_start.add_listener(_note_workers)
        if hooks.first_time(environment, "token_counts"):
            environment.events.test_start.add_listener(_note_token_counts)

    @classmethod
    def check_inputs(cls, options: Any, settings: Settings) -> None:
        """At ``init``, before anything starts (:mod:`fourfold.levels.inputs`): read every dataset this
        level will send, so a bad file is one line and exit 2 (a UsageError), not a user failing later."""
        run_items(settings)
        run_tokenizer(settings)

    @classmethod
    def start_embedded(cls, settings: Settings) -> tuple[str, list[Any]]:
        """Start this level's embedded targets; return the URL users send to and stop handles."""

        profile = settings.sim_profile
        if profile.endswith(".json") and os.path.exists(profile):
            profile = os.path.abspath(profile)   # the simulator runs in the repository root
        simulator = start_simulator(profile=profile, seed=settings.sim_seed,
                                    extra_args=simulator_gateway_args(settings))
        return simulator.url, [simulator]

    @classmethod
    def preflight_request(cls, environment: Any, settings: Settings) -> tuple[Any, Any]:
        """(dialect, request) of this level's preflight (:mod:`fourfold.levels.preflight`): a short
        prompt in the run's dialect, model and stream mode, at ``--base-path``."""
        dialect = get_dialect(settings.dialect)
        request = dialect.build(PREFLIGHT_ITEM, preflight_options(settings))
        request.path = with_base_path(request.path, settings.base_path)
        return dialect, request

    @classmethod
    def run_preflight(cls, environment: Any, settings: Settings, url: str, option: str) -> dict[str, Any]:
        """Send this level's preflight request to ``url`` (:func:`fourfold.levels.preflight.check_target`:
        a UsageError when the target is misconfigured, else what meta.json keeps of it)."""
        dialect, request = cls.preflight_request(environment, settings)
        return check_target(url, option, dialect, request, make_client(settings, url))

    def request_options(self) -> RequestOptions:
        settings = self.settings
        # on the simulator, L1 (saturation) and items that ask for an output length (--synthetic, a
        # trace's output_length) generate to max_tokens: a length finish there is the point, not a cut
        implied = ((self.ignore_eos_on_simulator or asks_output_length(self.initial_items()))
                   and hooks.simulator_running() and not settings.no_ignore_eos)
        ignore_eos = settings.ignore_eos or implied
        return RequestOptions(model=settings.model, stream=settings.stream, max_tokens=settings.max_tokens,
                              ignore_eos=ignore_eos)

    def initial_items(self) -> list[Item]:
        """The items this user sends (a level with its own dataset, L3's questions, overrides it)."""
        return run_items(self.settings)

    @classmethod
    def sent_items(cls, environment: Any) -> tuple[str, list[Item]]:
        """The name of what this class's users send and its items, the same as :meth:`initial_items`
        (meta.json's ``dataset_*`` facts, :mod:`fourfold.rundir.provenance`)."""
        settings = get_runtime(environment).settings
        if settings.synthetic:
            return f"synthetic {settings.synthetic}", synthetic_items(settings)
        return os.path.basename(settings.dataset or str(DEFAULT_DATASET)), run_items(settings)

    def use_items(self, items: list[Item]) -> None:
        """Send ``items``: today's rotation (start at ``user_id mod n``), or with ``--shuffle`` the
        order of (``--seed``, the run-wide user index), :func:`fourfold.workloads.sampling.user_order`."""
        self.items = items
        chosen = selection(self.settings)
        self._cursor = chosen.order(len(items), self.user_index if chosen.shuffle else self.user_id)

    def next_item(self) -> Item:
        return self.items[next(self._cursor)]

    def request(self, item: Item, *, scenario: str | None = None, options: RequestOptions | None = None,
                extra: dict[str, Any] | None = None, headers: dict[str, str] | None = None,
                intended_ns: int | None = None,
                annotate: Callable[[RequestRecord], None] | None = None) -> RequestRecord:
        """Send ``item`` (the first ``--warmup-requests`` of each user are warm-up) and record it.

        ``annotate`` is called with the finished record before it reaches the sinks (level facts
        that depend on the response, e.g. L4's turn outcome in ``record.extra``).

        ``intended_ns`` (open loop): the ``perf_counter_ns()`` the request was due; the time from
        then to the send is the record's ``queue_ms`` (client queueing, docs/metrics.md).

        After a connect error the user waits (``next_backoff_s``) before its next request, so a
        refused target gets a few attempts a second per user instead of thousands; each attempt is
        still one ``connect_error`` record, and the waits are counted (summary.json ``backoff``).
        """
        self._wait_out_backoff()
        entry = self.mix.next() if self.mix is not None else None     # --mix: the tenant / model
        http_request = self.dialect.build(item, entry.options(options or self.options) if entry
                                          else options or self.options)
        if self.settings.base_path and self.dialect.name != "rag":      # (L3 has --rag-path)
            http_request.path = with_base_path(http_request.path, self.settings.base_path)
        if entry is not None:       # its key and headers (registered secrets: Settings.secrets)
            http_request.headers.update(entry.request_headers(self.settings.api_key_header))
        if headers:
            http_request.headers.update(headers)
        record = RequestRecord(
            level=self.level, scenario=scenario or self.scenario, dialect=self.dialect.name,
            endpoint=http_request.path, item_id=item.id, request_id=uuid.uuid4().hex,
            user_id=self.user_index, variant=self.variant, warmup=self._warmups_left > 0,
            extra=dict(extra or {}), tenant=entry.name if entry is not None else "",
        )
        if record.warmup:
            self._warmups_left -= 1
        elif self.mirror is not None and self.mirror.due():
            record.pair_id = record.request_id
            self.mirror.send(self, http_request, record)
        if intended_ns is not None:
            record.queue_ms = max(0.0, round((time.perf_counter_ns() - intended_ns) / 1e6, 3))
        self.runtime.requests_started += 1
        try:
            send(self.client, self.dialect, http_request, record, self.limits, self.tokenizer)
        except BaseException:
            if record.extra.pop(UNSENT, False):
                self.runtime.requests_started -= 1
                raise   # stopped while connecting: the target never saw this request, so there is no record
            # The run is stopping (GreenletExit) mid-request: keep the record, out of every statistic.
            record.error_class, record.error_detail = "cancelled", "the load generator stopped first"
            self.runtime.observe(record)
            raise
        self._after_attempt(record)
        if annotate is not None:
            annotate(record)
        self.runtime.observe(record)
        return record

    def _after_attempt(self, record: RequestRecord) -> None:
        """A connect error or a 4xx answer (not 429: Retry-After has its own rule) makes this user wait
        before its next request, doubling while they repeat: a refused or misrouted target gets a few
        attempts a second per user, not thousands. Anything else resets the wait."""
        if record.error_class in ("connect_error", "http_4xx"):
            self._backoff_s = next_backoff_s(self._backoff_s)
            self._backoff_until = time.monotonic() + self._backoff_s
            if record.error_class == "connect_error":
                self.runtime.backoff.connect_error(self._backoff_s)
            else:
                self.runtime.backoff.client_error(self._backoff_s)
        else:
            self._backoff_s = 0.0

    def _wait_out_backoff(self) -> None:
        """Sleep until the backoff ends. On the user's own greenlet the sleep is a Locust wait (as in
        ``TaskSet.wait``): a stopping run ends the user here at once, with nothing sent and no record,
        instead of letting it try once more after the stop."""
        wait_s = self._backoff_until - time.monotonic()
        if wait_s <= 0:
            return

        with user_waiting(self):
            t0 = time.monotonic()
            try:
                gevent.sleep(wait_s)
            finally:
                self.runtime.backoff.waited(time.monotonic() - t0)

    def on_stop(self) -> None:
        self.client.close()
        if self.mirror is not None:
            self.mirror.close()


class Mirror:
    """Sends a share of a user's requests also to a second target (``--mirror-host``).

    The copy goes out on its own greenlet at the same moment as the original, so the user's flow
    is never delayed by the mirror; its answer reaches no user. Both records carry the same
    ``pair_id``; the mirror's has ``variant="mirror"`` and the scenario ``<scenario>@mirror``
    (so its statistics stay apart). The share is exact, not random: every 1/share-th request.
    """

    def __init__(self, settings: Settings) -> None:
        self.share = min(max(settings.mirror_share, 0.0), 1.0)
        self.client = make_client(settings, settings.mirror_host)
        self._credit = 0.0
        self._pending: list[Any] = []

    def due(self) -> bool:
        self._credit += self.share
        if self._credit >= 1.0 - 1e-9:
            self._credit -= 1.0
            return True
        return False

    def send(self, user: LLMUser, http_request: Any, original: RequestRecord) -> None:
        copy = type(http_request)(method=http_request.method, path=http_request.path,
                                  json=http_request.json, headers=dict(http_request.headers),
                                  stream=http_request.stream)
        record = RequestRecord(
            level=original.level, scenario=f"{original.scenario}@mirror", dialect=original.dialect,
            endpoint=original.endpoint, item_id=original.item_id, request_id=uuid.uuid4().hex,
            user_id=original.user_id, variant="mirror", pair_id=original.pair_id, extra=dict(original.extra),
            tenant=original.tenant,
        )

        def run() -> None:
            user.runtime.requests_started += 1
            try:
                send(self.client, user.dialect, copy, record, user.limits, user.tokenizer)
            except BaseException:
                if record.extra.pop(UNSENT, False):
                    user.runtime.requests_started -= 1
                    raise   # stopped before it reached the wire: the mirror never saw it, no record
                record.error_class, record.error_detail = "cancelled", "the load generator stopped first"
                user.runtime.observe(record)
                raise
            user.runtime.observe(record)

        self._pending = [g for g in self._pending if not g.dead]
        self._pending.append(user.runtime.spawn_background(run))

    def close(self) -> None:
        gevent.joinall(self._pending, timeout=5)
        self.client.close()
