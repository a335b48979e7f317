"""Embeddings and rerank as scenarios of their own: batches of the dataset's texts, per batch size.

:class:`EmbedUser` sends, closed loop, batches of the dataset's prompts (``--dataset``, else the
bundled ones) to an embeddings endpoint (``--embed-kind embeddings``: OpenAI ``/v1/embeddings``) or a
re-ranker (``rerank``: vLLM / Jina ``/v1/rerank``; ``rerank-cohere``: ``/v2/rerank``; one prompt is the
query, the next ``batch`` prompts its documents). ``--embed-batch 1,8,32`` is the batch-size ladder:
with ``--embed-step-s 0`` (the default) each user takes the sizes in turn, request by request, so
every size runs under the same load for the whole run; with ``--embed-step-s S`` each size is held
S seconds (the last until the end). Each record's scenario names its size (``embeddings@b8``), so
summary.json, the console and ``fourfold compare`` keep the sizes apart: the ``embed:embeddings@b8``
group has the latency (``e2e_ms``) and requests/s, the ``embed`` block
(:mod:`fourfold.measure.embedstats`) inputs/s and input tokens/s. A response whose count of vectors
or results does not fit what was sent is ``malformed_stream``.

With no ``--host`` the simulator serves (``/v1/embeddings``, ``/v1/rerank``, ``/v2/rerank``); the
reference RAG service (``python -m fourfold.targets.rag``) serves its retrieve and rerank stages at
``/v1/embeddings`` and ``/v1/rerank`` too, so ``--host`` at it load-tests those stages alone.
"""

from __future__ import annotations

import dataclasses
import sys
import time
from dataclasses import dataclass
from typing import Any

from locust import task

from fourfold.client.dialects.base import with_base_path
from fourfold.client.dialects.embeddings import EMBED_DIALECTS, EmbedDialect
from fourfold.errors import OptionError
from fourfold.levels import hooks
from fourfold.levels.base import LLMUser
from fourfold.levels.declare import AT_LEAST_0, add_options, check_rules, option, read_options
from fourfold.levels.options import Settings
from fourfold.levels.preflight import PREFLIGHT_ITEM, preflight_options
from fourfold.levels.runtime import find_runtime, get_runtime
from fourfold.levels.state import state_of
from fourfold.measure.embedstats import INPUTS, EmbedStats, count_mismatch, format_embed
from fourfold.measure.record import RequestRecord
from fourfold.workloads.items import Item

__all__ = ["EmbedOptions", "EmbedUser", "add_arguments", "parse_batches", "register"]

MAX_BATCH = 4096


def parse_batches(text: str) -> tuple[int, ...]:
    """``"1,8,32"`` -> (1, 8, 32); OptionError naming --embed-batch for anything else."""
    try:
        sizes = tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        sizes = ()
    if not sizes or not all(1 <= size <= MAX_BATCH for size in sizes):
        raise OptionError(f"--embed-batch: expected batch sizes within [1, {MAX_BATCH}] separated by "
                          f"commas (1,8,32), got {text!r}")
    return sizes


@dataclass(frozen=True)
class EmbedOptions:
    """The embeddings level's options (:mod:`fourfold.levels.declare`)."""

    embed_kind: str = option("embeddings", "--embed-kind", "embed", choices=EMBED_DIALECTS,
                             help="What is sent: embeddings (/v1/embeddings), rerank (vLLM, Jina: "
                                  "/v1/rerank) or rerank-cohere (/v2/rerank)")
    embed_batch: str = option("1,8,32", "--embed-batch", "embed",
                              help="Batch sizes, the ladder: texts per embeddings request, documents per "
                                   "rerank query (comma-separated)")
    embed_step_s: float = option(0.0, "--embed-step-s", "embed", type=float, rule=AT_LEAST_0,
                                 help="Seconds each batch size is held, in order (0: every user takes the "
                                      "sizes in turn, request by request)")
    embed_path: str = option("", "--embed-path", "embed",
                             help="Path on --host (default: /v1/embeddings, /v1/rerank or /v2/rerank by "
                                  "--embed-kind); --base-path applies to the default")

    def __post_init__(self) -> None:
        check_rules(self)
        parse_batches(self.embed_batch)

    @property
    def batches(self) -> tuple[int, ...]:
        return parse_batches(self.embed_batch)

    def dialect(self, base_path: str = "") -> EmbedDialect:
        default = EmbedDialect(self.embed_kind)
        return EmbedDialect(self.embed_kind, self.embed_path or with_base_path(default.path, base_path))


def add_arguments(parser: Any, **_kw: Any) -> None:
    """``init_command_line_parser`` listener: the shared options, then this level's (once per parser)."""
    hooks.add_arguments(parser)
    if hooks.first_time(parser, "embed"):
        add_options(parser, EmbedOptions)


def register(environment: Any, **_kw: Any) -> None:
    """``init`` listener: the shared listeners, then the embed block's."""
    hooks.register_level(environment, "embed", _on_init, finish=_on_finish, block=embed_block,
                         test_start=_on_test_start)


def embed_options(environment: Any) -> EmbedOptions:
    return state_of(environment).setdefault(EmbedOptions, lambda: EmbedOptions(
        **read_options(EmbedOptions, environment.parsed_options)))


class EmbedUser(LLMUser):
    """Sends batches of texts to an embeddings or rerank endpoint (closed loop, no think time)."""

    level = "embed"
    scenario = "embeddings"
    level_listeners = (add_arguments, register)

    def __init__(self, environment: Any) -> None:
        super().__init__(environment)
        self.embed = embed_options(environment)
        self.dialect = self.embed.dialect(self.settings.base_path)
        # the path is whole (--embed-path, or the default under --base-path): LLMUser.request must not
        # put --base-path in front of it again
        self.settings = dataclasses.replace(self.settings, base_path="")
        self._sent = 0
        self._t0 = time.monotonic()

    @classmethod
    def check_inputs(cls, options: Any, settings: Settings) -> None:
        EmbedOptions(**read_options(EmbedOptions, options))
        super().check_inputs(options, settings)

    @classmethod
    def preflight_request(cls, environment: Any, settings: Settings) -> tuple[Any, Any]:
        """One short input in the endpoint's own shape (an embeddings server has no chat route)."""
        dialect = embed_options(environment).dialect(settings.base_path)
        item = Item(PREFLIGHT_ITEM.id, PREFLIGHT_ITEM.messages,
                    meta={"inputs": [PREFLIGHT_ITEM.prompt], "documents": [PREFLIGHT_ITEM.prompt]})
        return dialect, dialect.build(item, preflight_options(settings))

    def batch_size(self) -> int:
        """This request's size: in turn, or the step of the ladder the user is in (--embed-step-s)."""
        sizes = self.embed.batches
        if self.embed.embed_step_s > 0:
            return sizes[min(int((time.monotonic() - self._t0) // self.embed.embed_step_s), len(sizes) - 1)]
        return sizes[self._sent % len(sizes)]

    def _check(self, record: RequestRecord) -> None:
        why = count_mismatch(record) if record.error_class == "ok" else ""
        if why:
            record.error_class, record.error_detail = "malformed_stream", why
        stats = state_of(self.environment).get(EmbedStats)
        if stats is not None and not self.runtime.is_worker:
            stats.add(record)

    @task
    def send_batch(self) -> None:
        size = self.batch_size()
        self._sent += 1
        first = self.next_item()
        if self.embed.embed_kind == "embeddings":
            texts = [first.prompt] + [self.next_item().prompt for _ in range(size - 1)]
            meta: dict[str, Any] = {"inputs": texts}
        else:
            meta = {"query": first.prompt, "documents": [self.next_item().prompt for _ in range(size)]}
        item = Item(first.id, first.messages, meta=meta)
        self.request(item, scenario=f"{self.embed.embed_kind}@b{size}", extra={INPUTS: size, "batch": size},
                     annotate=self._check)


# ---- listeners: the embed block of the run ----
def _ours(environment: Any) -> bool:
    return any(isinstance(cls, type) and issubclass(cls, EmbedUser) for cls in environment.user_classes)


def _on_init(environment: Any, **_kw: Any) -> None:
    if not _ours(environment):
        return
    runtime = get_runtime(environment)
    embed = embed_options(environment)     # a bad --embed-batch stops the run here
    _describe(runtime, embed)
    if not runtime.is_worker:
        state_of(environment).put(EmbedStats())
        environment.events.worker_report.add_listener(
            lambda client_id, data, **_k: _on_worker_report(environment, data))


def _describe(runtime: Any, embed: EmbedOptions) -> None:
    runtime.extras.meta["dialect"] = embed.embed_kind
    runtime.extras.meta["embed"] = {"kind": embed.embed_kind, "batches": list(embed.batches),
                                    "step_s": embed.embed_step_s, "path": embed.dialect().path}


def _on_test_start(environment: Any, **_kw: Any) -> None:
    """Options may have changed (the web UI's form; a worker gets the master's): read them again."""
    if not _ours(environment):
        return
    embed = state_of(environment).put(EmbedOptions(**read_options(EmbedOptions, environment.parsed_options)))
    runtime = get_runtime(environment)
    if not runtime.is_worker:
        state_of(environment).put(EmbedStats())
        _describe(runtime, embed)


def _on_worker_report(environment: Any, data: dict[str, Any]) -> None:
    """Master: the workers' records (already shipped for the run log) feed the embed block too."""
    stats = state_of(environment).get(EmbedStats)
    if stats is not None:
        for raw in (data.get("fourfold") or {}).get("records") or ():
            stats.add(RequestRecord.from_dict(raw))


def embed_block(environment: Any) -> dict[str, Any]:
    """``{"embed": {scenario: figures}}`` of this test so far (summary.json, the web UI's live panel)."""
    stats = state_of(environment).get(EmbedStats)
    runtime = find_runtime(environment)
    if stats is None or runtime is None or runtime.is_worker or not stats.groups:
        return {}
    return {"embed": stats.summary()}


def _on_finish(environment: Any, **_kw: Any) -> None:
    runtime = find_runtime(environment)
    found = embed_block(environment)
    if not found or runtime is None or runtime.finished:
        return
    runtime.extras.summary.update(found)
    print(format_embed(found["embed"]),
          file=sys.stdout if environment.parsed_options is not None else sys.stderr)
