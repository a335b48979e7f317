"""L3 RAG pipeline: retrieval + generation measured together, against any RAG endpoint.

:class:`RagUser` sends each question of the RAG dataset (``data/rag/questions.jsonl`` unless
``--dataset`` names another) to ``--rag-path`` with the ``--rag-request-template``, and reads the
answer, the retrieved document ids and the stage timings through the ``rag`` dialect's path specs
(:mod:`fourfold.client.dialects.rag`; ``--rag-answer-path``, ``--rag-ids-path``, ``--rag-timings-path``).
Stage timings also come from a standard ``Server-Timing`` header; a service that exposes none is
measured end to end only. Per request (:func:`fourfold.measure.rag.annotate`): recall@k and context
precision against the question's ``gold_ids``, the conflict flag (two retrieved documents of one
conflict group that disagree, from the corpus's ``claims``), the effective token rate and the time
no stage accounts for. The run's ``rag`` block (``summary.json`` and the console) aggregates
them; groundedness (answer vs the retrieved chunks) is scored after the run by ``fourfold score``.

With no ``--host`` the simulator (answering the RAG questions from the dataset) and the
reference RAG service (``fourfold.targets.rag``; ``--rag-retriever``, ``--rag-rerank``, ``--rag-top-k``)
start on loopback and stop at the end.

The locustfile attaches :func:`add_arguments` (L3's options, so they appear only for L3) and
:func:`register` (``RagUser.add_arguments`` / ``RagUser.register``), which attaches the listeners
that keep the ``rag`` block: fed by the users on a local runner, and on a master from the records
the workers ship.
"""

from __future__ import annotations

import functools
import logging
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import httpx
from locust import task

from fourfold.client.dialects.rag import DEFAULT_TEMPLATE, RagDialect, RagWire
from fourfold.data import DATA_DIR, find
from fourfold.errors import DatasetError
from fourfold.levels import hooks
from fourfold.levels.base import LLMUser, selected_items, simulator_gateway_args
from fourfold.levels.declare import AT_LEAST_1, add_options, check_rules, option, read_options
from fourfold.levels.options import Settings
from fourfold.levels.preflight import preflight_options
from fourfold.levels.runtime import find_runtime, get_runtime
from fourfold.levels.state import state_of
from fourfold.measure.rag import CorpusDoc, RagStats, annotate, format_rag
from fourfold.measure.record import RequestRecord
from fourfold.targets.launch import start_simulator
from fourfold.targets.rag.cli import stages
from fourfold.targets.rag.launch import start_rag_service
from fourfold.workloads.corpus import corpus_by_id
from fourfold.workloads.items import Item

__all__ = ["DEFAULT_CORPUS", "DEFAULT_QUESTIONS", "RagOptions", "RagSettings", "RagUser", "add_arguments",
           "register", "register_options"]

log = logging.getLogger("fourfold")
DEFAULT_QUESTIONS = DATA_DIR / "rag" / "questions.jsonl"
DEFAULT_CORPUS = DATA_DIR / "rag" / "corpus.jsonl"
_CORPORA: dict[str, dict[str, CorpusDoc]] = {}


def register_options(parser: Any) -> None:
    """L3's options (see the README's option table): its endpoint's shape (:class:`RagOptions`), then
    --rag-corpus and the embedded RAG service's, which :class:`~fourfold.levels.options.Settings` holds."""
    add_options(parser, RagOptions)
    add_options(parser, Settings, groups={"rag"})


def _or(default: str) -> Callable[[str], str]:
    """An empty value (a blank form field or ``LOCUST_RAG_PATH=``) is the default."""
    return lambda value: value or default


_WIRE = RagWire()


@dataclass(frozen=True)
class RagOptions:
    """The RAG endpoint's options as given, each declared once (:mod:`fourfold.levels.declare`);
    :class:`RagSettings` is what L3 makes of them."""

    rag_path: str = option(_WIRE.path, "--rag-path", "rag", read=_or(_WIRE.path),
                           help="Path of the RAG endpoint on --host")
    rag_request_template: str = option(DEFAULT_TEMPLATE, "--rag-request-template", "rag",
                                       read=_or(DEFAULT_TEMPLATE),
                                       help='Request body: JSON with a "{question}" placeholder ("{stream}", '
                                            '"{model}", "{max_tokens}", "{id}" too), or @file.json')
    rag_answer_path: str = option(_WIRE.answer, "--rag-answer-path", "rag", read=_or(_WIRE.answer),
                                  help="Where the answer text is: dotted JSON paths or sse:EVENT[:path], "
                                       "alternatives split by |")
    rag_ids_path: str = option(_WIRE.ids, "--rag-ids-path", "rag", read=_or(_WIRE.ids),
                               help="Where the retrieved document ids are (same syntax)")
    rag_timings_path: str = option(_WIRE.timings, "--rag-timings-path", "rag", read=_or(_WIRE.timings),
                                   help="Where the stage timings (ms) are, besides the Server-Timing header "
                                        "(same syntax)")
    rag_recall_k: int = option(3, "--rag-recall-k", "rag", type=int, rule=AT_LEAST_1,
                               help="k of recall@k and context precision@k")

    def __post_init__(self) -> None:
        check_rules(self)


def resolve_path(path: str | Path, default: Path) -> Path:
    """``path`` as given (relative: to the current directory, else the package:
    :func:`fourfold.data.find`); ``default`` if empty."""
    if not str(path):
        return default
    return find(path) or Path(path)


def corpus(path: Path) -> dict[str, CorpusDoc]:
    """The corpus, loaded once per process."""
    key = str(path)
    if key not in _CORPORA:
        _CORPORA[key] = corpus_by_id(path)
    return _CORPORA[key]


@dataclass(frozen=True)
class RagSettings:
    """L3's settings, read from Locust's options next to :class:`fourfold.levels.options.Settings`."""

    wire: RagWire
    recall_k: int = 3
    questions: str = str(DEFAULT_QUESTIONS)
    corpus: str = str(DEFAULT_CORPUS)

    @classmethod
    def from_options(cls, options: Any, settings: Settings) -> RagSettings:
        given = RagOptions(**read_options(RagOptions, options))
        template = given.rag_request_template
        if template.startswith("@"):
            source = resolve_path(template[1:], Path(template[1:]))
            try:
                template = source.read_text(encoding="utf-8-sig")
            except (OSError, UnicodeDecodeError) as exc:
                why = "not UTF-8" if isinstance(exc, UnicodeDecodeError) else exc.strerror or str(exc)
                raise DatasetError(f"--rag-request-template {template}: cannot read {source} "
                                   f"({why})") from None
        wire = RagWire(path=given.rag_path, template=template, answer=given.rag_answer_path,
                       ids=given.rag_ids_path, timings=given.rag_timings_path)
        return cls(wire, given.rag_recall_k, str(resolve_path(settings.dataset, DEFAULT_QUESTIONS)),
                   str(resolve_path(settings.rag_corpus, DEFAULT_CORPUS)))


def add_arguments(parser: Any, **_kw: Any) -> None:
    """``init_command_line_parser`` listener: the shared options, then L3's (once per parser)."""
    hooks.add_arguments(parser)
    if hooks.first_time(parser, "l3"):
        _on_parser(parser)


def register(environment: Any, **_kw: Any) -> None:
    """``init`` listener: the shared listeners, then L3's."""
    hooks.register_level(environment, "l3", _on_init, finish=_on_finish, block=rag_block,
                         test_start=_on_test_start)


class RagUser(LLMUser):
    """Asks the RAG endpoint one question after another (closed loop, no think time)."""

    level = "l3"
    scenario = "rag"
    level_listeners = (add_arguments, register)

    def __init__(self, environment: Any) -> None:
        super().__init__(environment)
        self.rag = rag_settings(environment)
        self.dialect = RagDialect(self.rag.wire)
        docs = corpus(Path(self.rag.corpus)) if Path(self.rag.corpus).is_file() else {}
        self.claims = {doc_id: doc.claims for doc_id, doc in docs.items() if doc.claims}
        self.stats: RagStats | None = (None if self.runtime.is_worker
                                       else _stats(environment, self.rag.recall_k))

    def initial_items(self) -> list[Item]:
        """The RAG questions (``--dataset`` or the bundled ones), filtered and sampled like any dataset."""
        return selected_items(rag_settings(self.environment).questions, self.settings)

    @classmethod
    def sent_items(cls, environment: Any) -> tuple[str, list[Item]]:
        questions = rag_settings(environment).questions
        return Path(questions).name, selected_items(questions, get_runtime(environment).settings)

    @classmethod
    def preflight_request(cls, environment: Any, settings: Settings) -> tuple[Any, Any]:
        """L3's preflight: the first question, in the endpoint's own shape (--rag-path, its template)."""
        dialect = RagDialect(rag_settings(environment).wire)
        question = selected_items(rag_settings(environment).questions, settings)[0]
        return dialect, dialect.build(question, preflight_options(settings))

    @classmethod
    def check_inputs(cls, options: Any, settings: Settings) -> None:
        """At ``init`` (:mod:`fourfold.levels.inputs`): L3's options, the questions and the corpus."""
        rag = RagSettings.from_options(options, settings)
        selected_items(rag.questions, settings)
        if settings.rag_corpus or Path(rag.corpus).is_file():
            try:
                corpus(Path(rag.corpus))
            except DatasetError:
                raise
            except ValueError as exc:
                raise DatasetError(str(exc)) from None

    @classmethod
    def start_embedded(cls, settings: Settings) -> tuple[str, list[Any]]:
        """The simulator (answering the questions from the dataset) and the reference RAG service."""

        questions = resolve_path(settings.dataset, DEFAULT_QUESTIONS)
        simulator = start_simulator(profile=settings.sim_profile, seed=settings.sim_seed,
                                    extra_args=["--prompts", str(questions),
                                                *simulator_gateway_args(settings)])
        extra = (["--corpus", str(resolve_path(settings.rag_corpus, DEFAULT_CORPUS))]
                 if settings.rag_corpus else [])
        try:
            service = start_rag_service(simulator.url, retriever=settings.rag_retriever or None,
                                        rerank=settings.rag_rerank or None, top_k=settings.rag_top_k,
                                        extra_args=extra, profile=settings.sim_profile)
        except BaseException:
            simulator.stop()
            raise
        return service.url, [simulator, service]

    def annotate(self, gold: list[str], record: RequestRecord) -> None:
        """The RAG facts of a finished record, before it reaches the sinks."""
        annotate(record, record.extra.get("retrieved_ids") or [], gold, self.rag.recall_k, self.claims)
        if self.stats is not None:
            self.stats.add(record)

    @task
    def ask(self) -> None:
        item = self.next_item()
        gold = item.meta.get("gold_ids")
        gold_ids = [str(g) for g in gold] if isinstance(gold, list) else []
        self.request(item, annotate=functools.partial(self.annotate, gold_ids))


# ---- listeners: the rag block of the run ----
def _rag_environment(environment: Any) -> bool:
    return any(isinstance(cls, type) and issubclass(cls, RagUser) for cls in environment.user_classes)


def rag_settings(environment: Any) -> RagSettings:
    """The environment's RagSettings (read at test start; on first use before that)."""
    return state_of(environment).setdefault(RagSettings, lambda: RagSettings.from_options(
        environment.parsed_options, get_runtime(environment).settings))


def _stats(environment: Any, k: int) -> RagStats:
    stats = state_of(environment).get(RagStats)
    if stats is None or stats.k != k:
        stats = state_of(environment).put(RagStats(k))
    return stats


def _on_parser(parser: Any, **_kw: Any) -> None:
    register_options(parser)


def _on_init(environment: Any, **_kw: Any) -> None:
    if not _rag_environment(environment):
        return
    options = environment.parsed_options
    runtime = get_runtime(environment)
    rag = rag_settings(environment)           # a bad template or path spec stops the run here
    runtime.extras.meta["dialect"] = "rag"
    if runtime.is_worker:
        return
    environment.events.worker_report.add_listener(functools.partial(_on_worker_report, environment))
    if getattr(options, "fourfold_embedded", False):
        s = Settings.from_options(options)
        retriever, rerank = stages(s.sim_profile, s.rag_retriever or None, s.rag_rerank or None)
        runtime.extras.meta["embedded_rag_service"] = {"retriever": retriever, "rerank": rerank,
                                                      "top_k": s.rag_top_k}
    _describe(environment, runtime, rag)


def _describe(environment: Any, runtime: Any, rag: RagSettings) -> None:
    """The ``rag`` block of meta.json (written at test start): dataset, corpus, k, wire, service."""
    runtime.extras.meta["rag"] = {"questions": rag.questions, "corpus": rag.corpus, "recall_k": rag.recall_k,
                                 "wire": asdict(rag.wire), "service": _service_config(environment, rag)}


def _on_test_start(environment: Any, **_kw: Any) -> None:
    """Options may have changed in the web UI's form: read them again (meta.json is already out)."""
    if not _rag_environment(environment):
        return
    runtime = get_runtime(environment)
    rag = state_of(environment).put(RagSettings.from_options(environment.parsed_options, runtime.settings))
    if not runtime.is_worker:
        _describe(environment, runtime, rag)
        state_of(environment).put(RagStats(rag.recall_k))


def _service_config(environment: Any, rag: RagSettings) -> dict[str, Any] | None:
    """The reference service's ``/v1/rag/config`` when the target has one (best effort)."""
    if not environment.host or rag.wire.path != "/v1/rag":
        return None

    try:
        response = httpx.get(environment.host.rstrip("/") + "/v1/rag/config", timeout=2.0)
        return response.json() if response.status_code == 200 else None
    except (httpx.HTTPError, ValueError):
        return None


def _on_worker_report(environment: Any, client_id: str, data: dict[str, Any], **_kw: Any) -> None:
    """Master: the workers' records (already shipped for the run log) feed the rag block too."""
    stats = state_of(environment).get(RagStats)
    if stats is not None:
        for raw in (data.get("fourfold") or {}).get("records") or ():
            stats.add(RequestRecord.from_dict(raw))


def rag_block(environment: Any) -> dict[str, Any]:
    """``{"rag": block}`` of this test's RagStats so far (a master's: fed by the workers' records);
    what :func:`_on_finish` writes into summary.json, and the web UI's live L3 panel."""
    stats = state_of(environment).get(RagStats)
    runtime = find_runtime(environment)
    if stats is None or runtime is None or runtime.is_worker:
        return {}
    block = stats.summary()
    described = runtime.extras.meta.get("rag") or {}
    block["service"] = described.get("service") or runtime.extras.meta.get("embedded_rag_service")
    block["questions_file"], block["corpus_file"] = described.get("questions"), described.get("corpus")
    return {"rag": block}


def _on_finish(environment: Any, **_kw: Any) -> None:
    """Each test's end (``hooks.finish_test``, before its summary is written): the rag block of this
    test's RagStats (made anew at each test start) into ``runtime.extras.summary``, and on the console."""
    runtime = find_runtime(environment)
    found = rag_block(environment)
    if not found or runtime is None or runtime.finished:
        return
    runtime.extras.summary.update(found)
    print(format_rag(found["rag"]), file=sys.stdout if environment.parsed_options is not None else sys.stderr)
