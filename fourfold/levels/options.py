"""fourfold's options: registered once on Locust's parser, read once into a frozen Settings.

Registered through ``events.init_command_line_parser`` they work from the command line, from
``LOCUST_*`` environment variables, from ``locust.conf`` / ``[tool.locust]``, and in the web UI's
start form. Secrets are masked in the form and never copied into records, logs or ``meta.json``:
the ``--api-key`` and every ``--header`` value not marked public with ``--header-public``
(:meth:`Settings.secrets`, :mod:`fourfold.rundir.secrets`; :func:`redacted` for meta.json).
"""

from __future__ import annotations

import argparse
import math
import os
import re
from dataclasses import asdict, dataclass, field
from typing import Any

from fourfold.client.dialects import DIALECTS
from fourfold.errors import OptionError
from fourfold.gates.gate import load_slo
from fourfold.gates.slo import SLOSpecError
from fourfold.levels.l4_options import register as _register_l4
from fourfold.rundir.secrets import REDACTED, Secrets
from fourfold.workloads.formats import FORMAT_NAMES, check_format_name, parse_columns

SECRET_OPTIONS = frozenset({"api_key"})


def register(parser: Any) -> None:
    """Add fourfold's options to Locust's argument parser (call from init_command_line_parser)."""
    add = parser.add_argument
    add("--dialect", default="openai", choices=sorted(DIALECTS),
        help="Wire format of the target: openai (chat completions), anthropic (/v1/messages), "
             "triton (KServe v2)")
    add("--model", default="fourfold-sim", help="Model name sent in each request")
    add("--dataset", default="",
        help="Prompts file: fourfold JSONL, ShareGPT, OpenAI chat or batch JSONL, Parquet, CSV, JSON "
             "(told from the content; docs/datasets.md); default: bundled prompts")
    add("--dataset-format", default="auto", choices=list(FORMAT_NAMES),
        help="Read --dataset as this format instead of telling it from the content")
    add("--dataset-column", default="",
        help="Columns of a Parquet/CSV/JSON file: 'prompt=question,reference=answer' "
             "(also id=, max_tokens=, system=)")
    add("--dataset-sample", type=int, default=0,
        help="Send N items of the dataset, drawn without replacement with --seed (then cycled); 0: all")
    add("--seed", type=int, default=0, help="Seed of --dataset-sample and --shuffle")
    add("--shuffle", action="store_true", default=False,
        help="Each user sends the items in its own order drawn from --seed (same seed: same order per user)")
    add("--dataset-filter", default="",
        help="Keep items by length in tokens, e.g. 'input<=4096,output<=512' (<=, >=, <, >)")
    add("--trace-speed", type=float, default=1.0,
        help="Replay a trace dataset this many times faster (2: half the gaps)")
    add("--synthetic", default="",
        help="Send synthetic prompts instead of a dataset: "
             "'input=1024±128,output=256±32,n=500,seed=1,prefix=512' "
             "(token lengths: mean ± standard deviation; exact with --tokenizer, else a word-based estimate)")
    add("--tokenizer", default="",
        help="The target's tokenizer (a tokenizer.json or a Hugging Face tokenizer directory, read offline): "
             "exact input token counts, output counts when the server sends no usage, "
             "exact --synthetic lengths")
    add("--max-tokens", type=int, default=0, help="Override every item's max_tokens (0 = use the item's)")
    add("--ignore-eos", action="store_true", default=False,
        help="Ask the server to always produce max_tokens (vLLM extension; on by default for L1 against "
             "the embedded simulator)")
    add("--no-ignore-eos", action="store_true", default=False,
        help="Let answers end naturally even where --ignore-eos would be implied "
             "(scoring structure needs it)")
    add("--no-stream", action="store_true", default=False, help="Send non-streaming requests (TTFT = E2E)")
    add("--api-key", default="", is_secret=True, env_var="FOURFOLD_API_KEY",
        help="API key (or env FOURFOLD_API_KEY); sent as Bearer or x-api-key, never recorded")
    add("--api-key-header", default="authorization", choices=["authorization", "x-api-key", "api-key"],
        help="How the API key is sent")
    add("--header", dest="headers", action="append", default=[], include_in_web_ui=False,
        help="Extra request header 'Name: value' (repeatable); its value is a credential: "
             "replaced by *** in records, meta.json and logs (see --header-public)")
    add("--header-public", dest="public_headers", action="append", default=[], include_in_web_ui=False,
        help="Extra request header 'Name: value' (repeatable) that is no secret, e.g. a version, beta "
             "flag or trace id: sent like --header, kept in clear in records and meta.json")
    add("--warmup-requests", type=int, default=1,
        help="Requests each user sends before measuring (excluded from every statistic)")
    add("--stall-ms", type=float, default=150.0, help="A gap between content chunks above this is a stall")
    add("--read-timeout", type=float, default=60.0,
        help="Seconds without content (to the response head and the first token, then between tokens; "
             "keep-alive comments do not count) before a stream counts as timed out")
    add("--connect-timeout", type=float, default=10.0, help="Seconds to open a connection")
    add("--max-response-s", type=float, default=600.0, help="Stop reading a response after this many seconds")
    add("--http2", action="store_true", default=False,
        help="Use HTTP/2 (httpx + h2) instead of fourfold's HTTP/1.1 transport")
    add("--insecure", action="store_true", default=False, help="Do not verify TLS certificates")
    add("--run-dir", default="runs", help="Base directory of run directories")
    add("--label", default="", help="Label of this run (part of the run directory's name)")
    add("--no-record-text", action="store_true", default=False,
        help="Do not keep answer text in records.jsonl")
    add("--metrics-url", dest="metrics_url", action="append", default=[], env_var="LOCUST_METRICS_URL",
        help="Prometheus /metrics endpoint sampled during the run, repeatable or comma-separated "
             "(the engine's and a DCGM exporter's: the first URL listed wins a metric both give; "
             "default: <host>/metrics; 'off' disables)")
    add("--sample-interval", type=float, default=1.0, help="Seconds between /metrics and nvidia-smi samples")
    add("--mirror-host", default="",
        help="Also send a share of requests to this second target (gray release); its answers reach no user")
    add("--mirror-share", type=float, default=0.1, help="Share of requests mirrored to --mirror-host (0..1)")
    add("--sim-profile", default="baseline",
        help="Profile of the embedded simulator started when no --host is given")
    add("--sim-seed", type=int, default=0, help="Seed of the embedded simulator")
    add("--sim-max-concurrency", type=int, default=0,
        help="Embedded simulator: gateway limit on generations in flight (0: none)")
    add("--sim-over-limit", default="queue", choices=["queue", "429", "503"],
        help="Embedded simulator: what a request over --sim-max-concurrency gets")
    add("--sim-keepalive-timeout-s", type=float, default=0.0,
        help="Embedded simulator: close keep-alive connections idle this long (0: never)")
    add("--slo", default="", type=_slo_option,
        help="SLO gate, e.g. 'ttft_p95<=450ms,e2e_p99<=1400ms', or an SLO file (ci/slo.toml); "
             "a missed SLO makes the run exit 3")
    add("--junit", default="", include_in_web_ui=False,
        help="Write the SLO verdicts as JUnit XML to this path (one testcase per SLO)")
    add("--score-live", action="store_true", default=False,
        help="Score a sample of the answers while the test runs, in a separate process (MiniLM similarity "
             "and structure compliance, as 'fourfold score'): the web UI's LLM quality tab, "
             "summary.json quality_live")
    add("--score-live-every", type=int, default=10, help="--score-live: score 1 in N answers")
    add("--score-live-max-per-s", type=float, default=5.0,
        help="--score-live: score at most this many answers a second (0: no cap)")
    _register_l4(parser)   # L4 session flow and sticky A/B (levels/l4_options.py)


def _slo_option(value: str) -> str:
    """Check --slo when it is parsed (a malformed spec or file: exit code 2); keep the text."""
    if value and value.strip():
        try:
            load_slo(value)
        except SLOSpecError as exc:
            raise argparse.ArgumentTypeError(str(exc).removeprefix("--slo: ")) from None
    return value


@dataclass(frozen=True)
class Settings:
    dialect: str = "openai"
    model: str = "fourfold-sim"
    dataset: str = ""
    dataset_format: str = "auto"
    dataset_columns: tuple[tuple[str, str], ...] = ()      # --dataset-column pairs (field, column)
    dataset_sample: int = 0
    seed: int = 0
    shuffle: bool = False
    dataset_filter: str = ""
    trace_speed: float = 1.0
    synthetic: str = ""
    tokenizer: str = ""
    max_tokens: int | None = None
    ignore_eos: bool = False
    no_ignore_eos: bool = False
    stream: bool = True
    api_key: str = field(default="", repr=False)
    api_key_header: str = "authorization"
    headers: tuple[tuple[str, str], ...] = field(default=(), repr=False)    # credentials unless public
    public_headers: tuple[tuple[str, str], ...] = ()
    warmup_requests: int = 1
    stall_ms: float = 150.0
    read_timeout_s: float = 60.0
    connect_timeout_s: float = 10.0
    max_response_s: float = 600.0
    http2: bool = False
    insecure: bool = False
    run_dir: str = "runs"
    label: str = ""
    record_text: bool = True
    metrics_url: str = ""                   # comma-separated; metrics_url_list() splits it
    sample_interval_s: float = 1.0
    mirror_host: str = ""
    mirror_share: float = 0.1
    sim_profile: str = "baseline"
    sim_seed: int = 0
    sim_max_concurrency: int = 0            # embedded simulator gateway knobs (fourfold.targets.sim.gateway)
    sim_over_limit: str = "queue"
    sim_keepalive_timeout_s: float = 0.0
    rag_retriever: str = ""                 # embedded RAG service ("": the --sim-profile's; levels.l3_rag
    rag_rerank: str = ""                    # registers the options)
    rag_top_k: int = 3
    rag_corpus: str = ""
    slo: str = ""
    junit: str = ""
    score_live: bool = False                # --score-live (levels.livequality)
    score_live_every: int = 10
    score_live_max_per_s: float = 5.0

    def __post_init__(self) -> None:
        check_values(self)

    @classmethod
    def from_options(cls, options: Any) -> Settings:
        """Build from Locust's parsed options (missing attributes take the defaults)."""
        def get(name: str, default: Any) -> Any:
            value = getattr(options, name, default) if options is not None else default
            return default if value is None else value

        max_tokens = int(get("max_tokens", 0)) or None
        return cls(
            dialect=get("dialect", "openai"),
            model=get("model", "fourfold-sim"),
            dataset=get("dataset", ""),
            dataset_format=check_format_name(str(get("dataset_format", "auto"))),
            dataset_columns=parse_columns(get("dataset_column", "")),
            dataset_sample=int(get("dataset_sample", 0)),
            seed=int(get("seed", 0)),
            shuffle=bool(get("shuffle", False)),
            dataset_filter=str(get("dataset_filter", "")),
            trace_speed=float(get("trace_speed", 1.0)),
            synthetic=str(get("synthetic", "")),
            tokenizer=str(get("tokenizer", "")),
            max_tokens=max_tokens,
            ignore_eos=bool(get("ignore_eos", False)),
            no_ignore_eos=bool(get("no_ignore_eos", False)),
            stream=not get("no_stream", False),
            api_key=get("api_key", "") or os.environ.get("FOURFOLD_API_KEY", ""),
            api_key_header=get("api_key_header", "authorization"),
            headers=parse_headers(get("headers", [])),
            public_headers=parse_headers(get("public_headers", []), option="--header-public"),
            warmup_requests=int(get("warmup_requests", 1)),
            stall_ms=float(get("stall_ms", 150.0)),
            read_timeout_s=float(get("read_timeout", 60.0)),
            connect_timeout_s=float(get("connect_timeout", 10.0)),
            max_response_s=float(get("max_response_s", 600.0)),
            http2=bool(get("http2", False)),
            insecure=bool(get("insecure", False)),
            run_dir=get("run_dir", "runs"),
            label=get("label", ""),
            record_text=not get("no_record_text", False),
            metrics_url=",".join(metrics_url_list(get("metrics_url", ""))),
            sample_interval_s=float(get("sample_interval", 1.0)),
            mirror_host=get("mirror_host", ""),
            mirror_share=float(get("mirror_share", 0.1)),
            sim_profile=get("sim_profile", "baseline"),
            sim_seed=int(get("sim_seed", 0)),
            sim_max_concurrency=int(get("sim_max_concurrency", 0)),
            sim_over_limit=str(get("sim_over_limit", "queue")),
            sim_keepalive_timeout_s=float(get("sim_keepalive_timeout_s", 0.0)),
            rag_retriever=str(get("rag_retriever", "") or ""),
            rag_rerank=str(get("rag_rerank", "") or ""),
            rag_top_k=int(get("rag_top_k", 3)),
            rag_corpus=str(get("rag_corpus", "")),
            slo=get("slo", ""),
            junit=get("junit", ""),
            score_live=bool(get("score_live", False)),
            score_live_every=int(get("score_live_every", 10)),
            score_live_max_per_s=float(get("score_live_max_per_s", 5.0)),
        )

    def request_headers(self) -> dict[str, str]:
        """Headers every request carries: the --header and --header-public values and the API key."""
        return {**dict(self.public_headers), **dict(self.headers), **self.auth_headers()}

    def secrets(self) -> Secrets:
        """The credentials to keep out of every record, log and meta.json: the API key and every
        ``--header`` value (``--header-public`` ones are not secrets)."""
        return _configured(self.api_key, tuple(value for _, value in self.headers),
                           tuple(value for _, value in self.public_headers))

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


_SECRETS: dict[tuple[str, tuple[str, ...], tuple[str, ...]], Secrets] = {}


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


# option -> (Settings field, rule): every number a run reads, checked once (check_values)
_POSITIVE, _AT_LEAST_0, _AT_LEAST_1, _SHARE = "> 0", ">= 0", ">= 1", "within [0, 1]"
VALUE_RULES: tuple[tuple[str, str, str], ...] = (
    ("--max-tokens", "max_tokens", _AT_LEAST_1),
    ("--dataset-sample", "dataset_sample", _AT_LEAST_0),
    ("--trace-speed", "trace_speed", _POSITIVE),
    ("--warmup-requests", "warmup_requests", _AT_LEAST_0),
    ("--stall-ms", "stall_ms", _POSITIVE),
    ("--read-timeout", "read_timeout_s", _POSITIVE),
    ("--connect-timeout", "connect_timeout_s", _POSITIVE),
    ("--max-response-s", "max_response_s", _POSITIVE),
    ("--sample-interval", "sample_interval_s", _POSITIVE),
    ("--mirror-share", "mirror_share", _SHARE),
    ("--sim-max-concurrency", "sim_max_concurrency", _AT_LEAST_0),
    ("--sim-keepalive-timeout-s", "sim_keepalive_timeout_s", _AT_LEAST_0),
    ("--rag-top-k", "rag_top_k", _AT_LEAST_1),
    ("--score-live-every", "score_live_every", _AT_LEAST_1),
    ("--score-live-max-per-s", "score_live_max_per_s", _AT_LEAST_0),
)
_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")    # an HTTP header name (RFC 9110 token)


def check_number(option: str, value: Any, rule: str) -> None:
    """:class:`OptionError` (a ValueError) unless ``value`` is a finite number that keeps ``rule``."""
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if ok:
        ok = {_POSITIVE: value > 0, _AT_LEAST_0: value >= 0, _AT_LEAST_1: value >= 1,
              _SHARE: 0 <= value <= 1}[rule]
    if not ok:
        raise OptionError(f"{option} must be a number {rule}, got {value!r}")


def check_values(settings: Settings) -> None:
    """Every number of ``settings`` within its range (VALUE_RULES); OptionError naming the option."""
    for option, name, rule in VALUE_RULES:
        value = getattr(settings, name)
        if value is not None:
            check_number(option, value, rule)


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
