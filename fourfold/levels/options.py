"""fourfold's options: declared once on the fields of a frozen Settings (:mod:`fourfold.levels.declare`),
registered from them on Locust's parser and read back into Settings.

Registered through ``events.init_command_line_parser`` they work from the command line, from
``LOCUST_*`` environment variables, from ``locust.conf`` / ``[tool.locust]``, and in the web UI's
start form. Secrets are masked in the form and never copied into records, logs or ``meta.json``:
the ``--api-key`` and every ``--header`` value not marked public with ``--header-public``
(:meth:`Settings.secrets`, :mod:`fourfold.rundir.secrets`; :func:`redacted` for meta.json).
"""

from __future__ import annotations

import argparse
import operator
import os
import re
from dataclasses import asdict, dataclass
from typing import Any

from fourfold.client.dialects import DIALECTS
from fourfold.errors import OptionError
from fourfold.gates.gate import load_slo
from fourfold.gates.slo import SLOSpecError
from fourfold.levels.declare import (
    GROUPS,
    SHARE,
    add_options,
    check_rules,
    declared,
    option,
    read_options,
    within,
)
from fourfold.levels.l4_options import register as _register_l4
from fourfold.rundir.secrets import REDACTED, Secrets
from fourfold.targets.rag.retriever import RERANKERS, RETRIEVERS
from fourfold.workloads.formats import FORMAT_NAMES, check_format_name, parse_columns
from fourfold.workloads.mix import STICKY, Mix, parse_mix


def register(parser: Any) -> None:
    """Add fourfold's options to Locust's argument parser (call from init_command_line_parser): every
    option :class:`Settings` declares but L3's own (``levels/l3_rag.py`` adds those), then L4's."""
    add_options(parser, Settings, groups=set(GROUPS) - {"rag"})
    _register_l4(parser)   # L4 session flow and sticky A/B (levels/l4_options.py)


def parse_headers(values: list[str] | tuple[str, ...] | str,
                  option: str = "--header") -> tuple[tuple[str, str], ...]:
    """``["X-Beta: on", ...]`` -> (("X-Beta", "on"), ...); a value without a colon is a usage error."""
    if isinstance(values, str):
        values = [values] if values else []
    parsed = []
    for value in values:
        name, sep, rest = value.partition(":")
        if not sep or not name.strip():
            raise OptionError(f"{option} {value!r}: expected 'Name: value'")
        if not _TOKEN.fullmatch(name.strip()):
            raise OptionError(f"{option} {value!r}: {name.strip()!r} is not a header name (letters, digits "
                              "and !#$%&'*+-.^_`|~ only)")
        if "\r" in rest or "\n" in rest:
            raise OptionError(f"{option} {name.strip()!r}: the value holds a line break")
        parsed.append((name.strip(), rest.strip()))
    return tuple(parsed)


def metrics_url_list(values: list[str] | tuple[str, ...] | str) -> tuple[str, ...]:
    """``--metrics-url`` given once or repeatedly, each value possibly comma-separated (a config
    file or ``LOCUST_METRICS_URL``): the URLs in the order given, blanks and repeats dropped;
    ``("off",)`` when any of them is ``off``."""
    if isinstance(values, str):
        values = [values]
    urls: list[str] = []
    for value in values:
        for url in str(value).split(","):
            url = url.strip()
            if url.lower() == "off":
                return ("off",)
            if url and url not in urls:
                urls.append(url)
    return tuple(urls)


_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")    # an HTTP header name (RFC 9110 token)


def _slo_option(value: str) -> str:
    """Check --slo when it is parsed (a malformed spec or file: exit code 2); keep the text."""
    if value and value.strip():
        try:
            load_slo(value)
        except SLOSpecError as exc:
            raise argparse.ArgumentTypeError(str(exc).removeprefix("--slo: ")) from None
    return value


def _base_path(value: Any) -> str:
    """``--base-path``: '' or a path that starts with '/' (no query, no fragment); no trailing '/'."""
    text = str(value or "").strip()
    if not text:
        return ""
    if not text.startswith("/") or any(c in text for c in "?# \t\r\n"):
        raise OptionError(f"--base-path {text!r}: expected a path such as /openai/v1 (starts with '/', "
                          f"no query, no spaces)")
    return text.rstrip("/")


def _api_key(value: str) -> str:
    return value or os.environ.get("FOURFOLD_API_KEY", "")


def _mix_option(value: str) -> str:
    mix_of(value)       # checked now (OptionError naming --mix); kept as given
    return value or ""


def mix_of(value: str) -> Mix:
    """``--mix``'s entries, parsed once per process (keys read from their ``key_env`` then)."""
    if value not in _MIXES:
        _MIXES[value] = parse_mix(value)
    return _MIXES[value]


_MIXES: dict[str, Mix] = {}


def _max_tokens(value: int) -> int | None:
    return int(value) or None


def _metrics_urls(value: list[str] | tuple[str, ...] | str) -> str:
    return ",".join(metrics_url_list(value))


def _public_headers(values: list[str] | tuple[str, ...] | str) -> tuple[tuple[str, str], ...]:
    return parse_headers(values, option="--header-public")


@dataclass(frozen=True)
class Settings:
    """Every option of a run, each declared once (name, type, default, help, rule, group: see
    :mod:`fourfold.levels.declare`), frozen once read."""

    # target
    dialect: str = option("openai", "--dialect", "target", choices=sorted(DIALECTS),
                          help="Wire format of the target: openai (chat completions), responses "
                               "(/v1/responses), anthropic (/v1/messages), triton (KServe v2)")
    model: str = option("fourfold-sim", "--model", "target", help="Model name sent in each request")
    api_key: str = option("", "--api-key", "target", secret=True, env_var="FOURFOLD_API_KEY", read=_api_key,
                          help="API key (or env FOURFOLD_API_KEY); sent as Bearer or x-api-key, never "
                               "recorded")
    api_key_header: str = option("authorization", "--api-key-header", "target",
                                 choices=["authorization", "x-api-key", "api-key"],
                                 help="How the API key is sent")
    headers: tuple[tuple[str, str], ...] = option(
        (), "--header", "target", dest="headers", action="append", web_ui=False, read=parse_headers,
        secret=True, help="Extra request header 'Name: value' (repeatable); its value is a credential: "
                          "replaced by *** in records, meta.json and logs (see --header-public)")
    public_headers: tuple[tuple[str, str], ...] = option(
        (), "--header-public", "target", dest="public_headers", action="append", web_ui=False,
        read=_public_headers,
        help="Extra request header 'Name: value' (repeatable) that is no secret, e.g. a version, beta "
             "flag or trace id: sent like --header, kept in clear in records and meta.json")
    http2: bool = option(False, "--http2", "target", action="store_true",
                         help="Use HTTP/2 (httpx + h2) instead of fourfold's HTTP/1.1 transport")
    insecure: bool = option(False, "--insecure", "target", action="store_true",
                            help="Do not verify TLS certificates")
    abort_on_error_rate: float = option(1.0, "--abort-on-error-rate", "timing", type=float, rule=SHARE,
                                        help="Stop the run when this share of the requests of the last "
                                             "--abort-window-s failed (1: every one; 0: never)")
    abort_window_s: float = option(10.0, "--abort-window-s", "timing", type=float, rule=within(1, 3600),
                                   help="--abort-on-error-rate's window (s)")
    base_path: str = option("", "--base-path", "target", read=_base_path,
                            help="Send to this path prefix instead of the dialect's first segment, e.g. "
                                 "'/openai/v1' turns /v1/chat/completions into /openai/v1/chat/completions")
    no_preflight: bool = option(False, "--no-preflight", "target", action="store_true",
                                help="Skip the one request sent to each target before a headless run, which "
                                     "ends the run with one line on a 404, 401/403, refused connection or "
                                     "non-LLM answer")
    # workload
    dataset: str = option("", "--dataset", "workload",
                          help="Prompts file: fourfold JSONL, ShareGPT, OpenAI chat or batch JSONL, Parquet, "
                               "CSV, JSON (told from the content; docs/datasets.md); default: bundled "
                               "prompts")
    dataset_format: str = option("auto", "--dataset-format", "workload", choices=list(FORMAT_NAMES),
                                 read=check_format_name,
                                 help="Read --dataset as this format instead of telling it from the content")
    dataset_columns: tuple[tuple[str, str], ...] = option(
        (), "--dataset-column", "workload", raw_default="", read=parse_columns,
        help="Columns of a Parquet/CSV/JSON file: 'prompt=question,reference=answer' "
             "(also id=, max_tokens=, system=)")
    dataset_sample: int = option(0, "--dataset-sample", "workload", type=int, rule=within(0, 1e9),
                                 help="Send N items of the dataset, drawn without replacement with --seed "
                                      "(then cycled); 0: all")
    seed: int = option(0, "--seed", "workload", type=int, help="Seed of --dataset-sample and --shuffle")
    shuffle: bool = option(False, "--shuffle", "workload", action="store_true",
                           help="Each user sends the items in its own order drawn from --seed (same seed: "
                                "same order per user)")
    dataset_filter: str = option("", "--dataset-filter", "workload",
                                 help="Keep items by length in tokens, e.g. 'input<=4096,output<=512' "
                                      "(<=, >=, <, >)")
    trace_speed: float = option(1.0, "--trace-speed", "workload", type=float, rule=within(0.001, 1000),
                                help="Replay a trace dataset this many times faster (2: half the gaps)")
    synthetic: str = option("", "--synthetic", "workload",
                            help="Send synthetic prompts instead of a dataset: "
                                 "'input=1024±128,output=256±32,n=500,seed=1,prefix=512' "
                                 "(token lengths: mean ± standard deviation; exact with --tokenizer, else a "
                                 "word-based estimate)")
    tokenizer: str = option("", "--tokenizer", "workload",
                            help="The target's tokenizer (a tokenizer.json or a Hugging Face tokenizer "
                                 "directory, read offline): exact input token counts, output counts when the "
                                 "server sends no usage, exact --synthetic lengths")
    max_tokens: int | None = option(None, "--max-tokens", "workload", type=int, raw_default=0,
                                    read=_max_tokens, rule=within(1, 1e7),
                                    help="Override every item's max_tokens (0 = use the item's)")
    ignore_eos: bool = option(False, "--ignore-eos", "workload", action="store_true",
                              help="Ask the server to always produce max_tokens (vLLM extension; on by "
                                   "default for L1 against the embedded simulator)")
    no_ignore_eos: bool = option(False, "--no-ignore-eos", "workload", action="store_true",
                                 help="Let answers end naturally even where --ignore-eos would be implied "
                                      "(scoring structure needs it)")
    stream: bool = option(True, "--no-stream", "workload", action="store_true", raw_default=False,
                          read=operator.not_, help="Send non-streaming requests (TTFT = E2E)")
    mix: str = option("", "--mix", "workload", read=_mix_option,
                      help="A traffic mix of tenants / models / LoRA adapters with weights: a .toml or "
                           ".json file, or 'a=0.6:key_env=KEY_A:model=lora-a,b=0.4' (docs/mix.md); keys "
                           "are credentials, never recorded: records and reports show the names")
    mix_sticky: str = option("user", "--mix-sticky", "workload", choices=list(STICKY),
                             help="--mix: a user keeps the entry it drew first (user), or each request "
                                  "draws (request)")
    # timing
    warmup_requests: int = option(1, "--warmup-requests", "timing", type=int, rule=within(0, 1e6),
                                  help="Requests each user sends before measuring (excluded from every "
                                       "statistic)")
    stall_ms: float = option(150.0, "--stall-ms", "timing", type=float, rule=within(0.1, 1e7),
                             help="A gap between content chunks above this is a stall")
    read_timeout_s: float = option(60.0, "--read-timeout", "timing", type=float, rule=within(0.01, 604800),
                                   help="Seconds without content (to the response head and the first token, "
                                        "then between tokens; keep-alive comments do not count) before a "
                                        "stream counts as timed out")
    connect_timeout_s: float = option(10.0, "--connect-timeout", "timing", type=float,
                                      rule=within(0.01, 3600),
                                      help="Seconds to open a connection")
    max_response_s: float = option(600.0, "--max-response-s", "timing", type=float, rule=within(0.01, 604800),
                                   help="Stop reading a response after this many seconds")
    # run directory
    run_dir: str = option("runs", "--run-dir", "run", help="Base directory of run directories")
    label: str = option("", "--label", "run", help="Label of this run (part of the run directory's name)")
    record_text: bool = option(True, "--no-record-text", "run", action="store_true", raw_default=False,
                               read=operator.not_, help="Do not keep answer text in records.jsonl")
    # run history (fourfold history, docs/history.md): the run adds itself when it ends
    history_release: str = option("", "--history-release", "run",
                                  help="When the run ends, add it to the run history as this release "
                                       "(fourfold history add; the store: --history)")
    history: str = option("", "--history", "run", secret=True, env_var="FOURFOLD_HISTORY",
                          help="The run history's store: a SQLite file or a postgresql:// URL (default: "
                               "fourfold-history.sqlite in the current directory)")
    history_tags: str = option("", "--history-tags", "run", help="Labels kept with the run in the history, "
                                                                 "KEY=VALUE,... (e.g. gpu=h100,engine=vllm)")
    # telemetry
    metrics_url: str = option("", "--metrics-url", "telemetry", dest="metrics_url", action="append",
                              raw_default=(), env_var="LOCUST_METRICS_URL", read=_metrics_urls,
                              help="Prometheus /metrics endpoint sampled during the run, repeatable or "
                                   "comma-separated (the engine's and a DCGM exporter's: the first URL "
                                   "listed wins a metric both give; default: <host>/metrics; 'off' disables)")
    sample_interval_s: float = option(1.0, "--sample-interval", "telemetry", type=float,
                                      rule=within(0.01, 3600),
                                      help="Seconds between /metrics and nvidia-smi samples")
    prometheus_port: int = option(0, "--prometheus-port", "telemetry", type=int, rule=within(0, 65535),
                                  web_ui=False,
                                  help="Serve fourfold's own figures for Prometheus at "
                                       "http://<--prometheus-host>:PORT/metrics (standalone or master; "
                                       "0: off); docs/prometheus.md")
    prometheus_host: str = option("127.0.0.1", "--prometheus-host", "telemetry", web_ui=False,
                                  help="Address --prometheus-port listens on (0.0.0.0: every interface)")
    prometheus_linger_s: float = option(0.0, "--prometheus-linger", "telemetry", type=float,
                                        rule=within(0, 3600), web_ui=False,
                                        help="Seconds /metrics stays up after the run has ended and "
                                             "summary.json is written, for a last scrape")
    # mirror
    mirror_host: str = option("", "--mirror-host", "mirror",
                              help="Also send a share of requests to this second target (gray release); its "
                                   "answers reach no user")
    mirror_share: float = option(0.1, "--mirror-share", "mirror", type=float, rule=SHARE,
                                 help="Share of requests mirrored to --mirror-host (0..1)")
    # cost (measure.cost): what the run's tokens cost
    price_per_hour: float = option(0.0, "--price-per-hour", "cost", type=float, rule=within(0, 1e9),
                                   help="Price of the deployment under test per hour (all its GPUs), USD: "
                                        "cost per 1M output tokens, per request, per session")
    price_per_1m_input: float = option(0.0, "--price-per-1m-input", "cost", type=float, rule=within(0, 1e9),
                                       help="An API's price per 1M input tokens, USD")
    price_per_1m_output: float = option(0.0, "--price-per-1m-output", "cost", type=float, rule=within(0, 1e9),
                                        help="An API's price per 1M output tokens, USD")
    # the embedded simulator
    sim_profile: str = option("baseline", "--sim-profile", "simulator",
                              help="Profile of the embedded simulator started when no --host is given")
    sim_seed: int = option(0, "--sim-seed", "simulator", type=int, help="Seed of the embedded simulator")
    sim_max_concurrency: int = option(0, "--sim-max-concurrency", "simulator", type=int, rule=within(0, 1e6),
                                      help="Embedded simulator: gateway limit on generations in flight "
                                           "(0: none)")
    sim_over_limit: str = option("queue", "--sim-over-limit", "simulator", choices=["queue", "429", "503"],
                                 help="Embedded simulator: what a request over --sim-max-concurrency gets")
    sim_keepalive_timeout_s: float = option(0.0, "--sim-keepalive-timeout-s", "simulator", type=float,
                                            rule=within(0, 86400),
                                            help="Embedded simulator: close keep-alive connections idle this "
                                                 "long (0: never)")
    sim_key_rate_limit: float = option(0.0, "--sim-key-rate-limit", "simulator", type=float,
                                       rule=within(0, 1e6),
                                       help="Embedded simulator: requests per second each API key may send "
                                            "(a token bucket, burst of one second); over it: 429 with "
                                            "Retry-After (0: no limit)")
    # the embedded RAG service (registered by levels/l3_rag.py, for L3 only)
    rag_retriever: str = option("", "--rag-retriever", "rag", choices=RETRIEVERS,
                                help="Embedded RAG service: first stage (default: the --sim-profile's, bm25 "
                                     "for the bundled ones)")
    rag_rerank: str = option("", "--rag-rerank", "rag", choices=RERANKERS,
                             help="Embedded RAG service: re-ranker (default: the --sim-profile's: none for "
                                  "baseline, lexical for candidate)")
    rag_top_k: int = option(3, "--rag-top-k", "rag", type=int, rule=within(1, 10000),
                            help="Embedded RAG service: documents given to the model")
    rag_corpus: str = option("", "--rag-corpus", "rag",
                             help="Corpus JSONL (id, title, text, claims): conflict groups now, chunk texts "
                                  "for groundedness later (default: the bundled corpus)")
    # the SLO gate
    slo: str = option("", "--slo", "gate", type=_slo_option,
                      help="SLO gate, e.g. 'ttft_p95<=450ms,e2e_p99<=1400ms', or an SLO file (ci/slo.toml); "
                           "a missed SLO makes the run exit 3")
    junit: str = option("", "--junit", "gate", web_ui=False,
                        help="Write the SLO verdicts as JUnit XML to this path (one testcase per SLO)")
    # live quality scoring (levels.livequality)
    score_live: bool = option(False, "--score-live", "scoring", action="store_true",
                              help="Score a sample of the answers while the test runs, in a separate "
                                   "process (MiniLM similarity and structure compliance, as 'fourfold "
                                   "score'): the web UI's LLM quality tab, summary.json quality_live")
    score_live_every: int = option(10, "--score-live-every", "scoring", type=int, rule=within(1, 1e9),
                                   help="--score-live: score 1 in N answers")
    score_live_max_per_s: float = option(5.0, "--score-live-max-per-s", "scoring", type=float,
                                         rule=within(0, 1e6),
                                         help="--score-live: score at most this many answers a second "
                                              "(0: no cap)")

    def __post_init__(self) -> None:
        check_rules(self)

    @classmethod
    def from_options(cls, options: Any) -> Settings:
        """Read from Locust's parsed options (missing attributes take the defaults)."""
        return cls(**read_options(cls, options))

    def request_headers(self) -> dict[str, str]:
        """Headers every request carries: the --header and --header-public values and the API key."""
        return {**dict(self.public_headers), **dict(self.headers), **self.auth_headers()}

    def secrets(self) -> Secrets:
        """The credentials to keep out of every record, log and meta.json: the API key and every
        ``--header`` value (``--header-public`` ones are not secrets), each ``--mix`` key and secret
        header value."""
        mix = self.mix_entries
        return _configured(self.api_key, tuple(value for _, value in self.headers) + mix.secret_values(),
                           tuple(value for _, value in self.public_headers) + mix.public_values())

    @property
    def mix_entries(self) -> Mix:
        """``--mix`` parsed (an empty Mix without one)."""
        return mix_of(self.mix)

    def auth_headers(self) -> dict[str, str]:
        if not self.api_key:
            return {}
        if self.api_key_header == "authorization":
            return {"Authorization": f"Bearer {self.api_key}"}
        return {self.api_key_header: self.api_key}


def _configured(api_key: str, header_values: tuple[str, ...], public_values: tuple[str, ...]) -> Secrets:
    key = (api_key, header_values, public_values)
    if key not in _SECRETS:
        _SECRETS[key] = Secrets.configured(api_key, header_values, public_values)
    return _SECRETS[key]


# The secret options the web UI's start form shows (``secret=True`` in their declaration; ``--header``
# is secret too, but only on the command line): blank in the page, and a blank submission keeps the
# value given at start-up. Each is replaced by "***" in meta.json.
SECRET_OPTIONS = frozenset(opt.parsed_name for _, opt in declared(Settings) if opt.secret and opt.web_ui)

_SECRETS: dict[tuple[str, tuple[str, ...], tuple[str, ...]], Secrets] = {}


def redacted(settings: Settings) -> dict[str, Any]:
    """Settings as a dict for meta.json: the API key and every ``--header`` value (whatever its
    name) replaced by "***", ``--header-public`` kept, and any configured credential scrubbed from
    every other string (a key pasted into --label or a URL)."""
    data = asdict(settings)
    for name in SECRET_OPTIONS:
        if data.get(name):
            data[name] = REDACTED
    data["headers"] = [[name, REDACTED if value else value] for name, value in settings.headers]
    return settings.secrets().scrub_obj(data)
