"""L4 user session flow: multi-turn users, completion rate, rounds, sticky A/B.

Each :class:`SessionUser` plays one persona through session scripts (``--dataset``, default
``data/sessions/sessions.jsonl``): it sends the opening question, keeps the chat history and
sends all of it every turn (1, 3, 5, ... messages), waits the persona's think time between turns
(× ``--think-scale``), and writes each follow-up with the pure rules of :mod:`fourfold.levels.l4_scripts`
(string checks of which goal facts the answers contain: nothing that could block the gevent
hub). A session ends ``completed``, at ``max_turns``, or ``abandoned`` when a response failed
or was slower than the persona's patience.

Every turn is one record (scenario ``session``, or ``session@A`` / ``session@B`` under A/B, so
latency histograms and Locust's rows split by variant) with ``record.variant`` and, in
``record.extra``: ``session_id``, ``turn``, ``followup``, ``messages``, ``facts_total``,
``facts_new``, ``facts_covered`` and ``final``. The last turn of an ended session has
``final: true`` and ``outcome``, ``session_completed``, ``abandoned``, ``abandon_reason``,
``rounds``, ``session_duration_ms``; ``fourfold score`` scores those final answers against the
script's reference. Session aggregates per variant (:mod:`fourfold.levels.l4_stats`) go to
``summary.json`` → ``sessions`` and are printed at the end.

Sticky A/B (``--ab-split``): a user's variant is a hash of its key and ``--ab-seed``
(:mod:`fourfold.levels.l4_ab`), fixed for its life; A sends to ``--host``, B to ``--ab-host``. With no
``--host``, two simulators start: A with ``--sim-profile`` (baseline), B with ``--ab-profile``
(candidate).
"""

from __future__ import annotations

import atexit
import logging
import random
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

import gevent
from locust import task
from locust.exception import StopUser
from locust.runners import STATE_RUNNING, STATE_SPAWNING, LocalRunner, WorkerRunner

from fourfold.data import DATA_DIR
from fourfold.errors import ScriptError, UsageError
from fourfold.levels import hooks
from fourfold.levels.base import LLMUser, make_client, simulator_gateway_args
from fourfold.levels.l4_ab import SplitError, assign_variant
from fourfold.levels.l4_options import SessionSettings, show_in_web_ui
from fourfold.levels.l4_scripts import Conversation, SessionScript, script_from_dict
from fourfold.levels.l4_stats import SessionStats, format_sessions
from fourfold.levels.options import Settings
from fourfold.levels.runtime import find_runtime, get_runtime
from fourfold.levels.state import state_of
from fourfold.measure.record import RequestRecord
from fourfold.measure.stats import end_s
from fourfold.targets.launch import start_simulator
from fourfold.workloads.items import Item, jsonl_objects

log = logging.getLogger("fourfold")
DEFAULT_SESSIONS = DATA_DIR / "sessions" / "sessions.jsonl"
WIRE_KEY = "fourfold_sessions"
_SCRIPTS: dict[str, dict[str, SessionScript]] = {}


def session_scripts(path: str) -> dict[str, SessionScript]:
    """Scripts of a session dataset by id, loaded once per process: a DatasetError or ScriptError
    naming the file and line when unusable."""
    if path not in _SCRIPTS:
        scripts = {}
        for n, raw in jsonl_objects(path):
            try:
                item = Item.from_dict(raw)
                data = {**item.meta, "id": item.id, "prompt": item.prompt,
                        "reference": item.references[0] if item.references else "",
                        "max_tokens": item.max_tokens}
                scripts[item.id] = script_from_dict(data)
            except ValueError as exc:        # ScriptError is one
                raise ScriptError(f"{path}:{n}: {exc}") from None
        if not scripts:
            raise ScriptError(f"{path}: no session scripts (the file is empty, or holds only blank lines "
                              "and # comments)")
        _SCRIPTS[path] = scripts
    return _SCRIPTS[path]


class SessionRun:
    """Per-environment L4 state: session aggregates, settings, the embedded variant-B target."""

    def __init__(self, environment: Any) -> None:
        self.environment = environment
        self.stats = SessionStats()
        self.settings = SessionSettings.from_options(environment.parsed_options)
        self.handles: list[Any] = []
        self.printed = False

    def publish(self) -> None:
        """Refresh ``summary.json``'s ``sessions`` block (local runner / master)."""
        runtime = find_runtime(self.environment)
        if runtime is not None and not runtime.is_worker:
            runtime.extras.summary["sessions"] = self.stats.summary()

    def user_done(self) -> None:
        """A user finished its --sessions-per-user; a local run stops once every user has."""
        runner = self.environment.runner
        if isinstance(runner, LocalRunner):
            gevent.spawn(self._stop_when_idle, runner)

    def _stop_when_idle(self, runner: Any) -> None:
        gevent.sleep(0.2)       # let the stopping users' greenlets leave the runner's group
        if runner.state == STATE_RUNNING and runner.user_count == 0:
            options = self.environment.parsed_options
            log.info("fourfold: every user finished its sessions; stopping the run")
            if options is None or options.headless:
                runner.quit()
            else:
                runner.stop()

    # ---- distributed: workers ship session deltas with Locust's stats report ----
    def on_report_to_master(self, client_id: str, data: dict[str, Any]) -> None:
        data[WIRE_KEY] = self.stats.take_wire()

    def on_worker_report(self, client_id: str, data: dict[str, Any]) -> None:
        wire = data.get(WIRE_KEY)
        if wire:
            self.stats.merge_wire(wire)
            self.publish()

    def stop_targets(self) -> None:
        while self.handles:
            handle = self.handles.pop()
            try:
                handle.stop()
            except Exception:  # noqa: BLE001 - shutting down: report, keep going
                log.exception("fourfold: stopping the variant-B simulator failed")


def sessions_block(environment: Any) -> dict[str, Any]:
    """``{"sessions": ...}`` so far (what :meth:`SessionRun.publish` writes): the web UI's L4 panel."""
    run = state_of(environment).get(SessionRun)
    return {"sessions": run.stats.summary()} if run is not None else {}


def get_session_run(environment: Any) -> SessionRun:
    return state_of(environment).setdefault(SessionRun, lambda: SessionRun(environment))


def _simulator_args(settings: Settings) -> list[str]:
    args = list(simulator_gateway_args(settings))
    if settings.dataset:
        args += ["--sessions", str(Path(settings.dataset).resolve())]
    return args


def add_arguments(parser: Any, **_kw: Any) -> None:
    """``init_command_line_parser`` listener: the shared options (L4's among them, parsed by every
    level), and L4's shown in the web UI's start form (other levels' forms leave them out)."""
    hooks.add_arguments(parser)
    show_in_web_ui(parser)


def register(environment: Any, **_kw: Any) -> None:
    """``init`` listener: the shared listeners, then L4's (its options are among the shared ones)."""
    hooks.register_level(environment, "l4", _on_init, finish=_on_finish, block=sessions_block,
                         test_start=_on_test_start, quitting=_on_quitting)


class SessionUser(LLMUser):
    """One persona at a time through multi-turn sessions (see the module docstring)."""

    level = "l4"
    scenario = "session"
    level_listeners = (add_arguments, register)
    default_dataset = DEFAULT_SESSIONS
    dataset_hint = "L4 needs session scripts: see fourfold/data/sessions/README.md"

    def __init__(self, environment: Any) -> None:
        super().__init__(environment)
        self.session_run = get_session_run(environment)
        self.session_settings = self.session_run.settings
        self.scripts = self.check_dataset(self.settings.dataset or str(self.default_dataset))
        runner = environment.runner
        worker = f"w{runner.worker_index}-" if isinstance(runner, WorkerRunner) else ""
        self.user_key = f"{worker}u{self.user_id}"
        ab = self.session_settings
        if ab.ab_share_a is not None:
            self.variant = assign_variant(self.user_key, ab.ab_share_a, ab.ab_seed)
            if self.variant == "B":
                self.client.close()
                self.client = make_client(self.settings, ab.ab_host)
        self.think_rng = random.Random(f"{ab.ab_seed}:{self.user_key}")
        self.sessions_started = 0

    @classmethod
    def check_dataset(cls, path: str) -> dict[str, SessionScript]:
        """The dataset's session scripts (ValueError naming the problem; a subclass reads its own kind)."""
        return session_scripts(path)

    @classmethod
    def check_inputs(cls, options: Any, settings: Settings) -> None:
        """At ``init`` (:mod:`fourfold.levels.inputs`): L4's options and the session scripts."""
        SessionSettings.from_options(options)
        cls.check_dataset(settings.dataset or str(cls.default_dataset))

    @classmethod
    def start_embedded(cls, settings: Settings) -> tuple[str, list[Any]]:
        simulator = start_simulator(profile=settings.sim_profile, seed=settings.sim_seed,
                                    extra_args=_simulator_args(settings))
        return simulator.url, [simulator]

    @property
    def scenario_name(self) -> str:
        return f"{self.scenario}@{self.variant}" if self.variant else self.scenario

    def script_of(self, item: Item) -> SessionScript:
        return self.scripts[item.id]

    def on_start(self) -> None:
        item = self.items[self.user_id % len(self.items)]
        while self._warmups_left > 0:      # warm-up: the opening question alone, outside any session
            self.request(Item(id=item.id,
                              messages=({"role": "user", "content": self.script_of(item).opening},),
                              references=item.references, max_tokens=item.max_tokens),
                         scenario=self.scenario_name)

    def think(self, script: SessionScript) -> None:
        low, high = script.persona.think_time_s
        seconds = self.think_rng.uniform(low, high) * self.session_settings.think_scale
        if seconds > 0:
            gevent.sleep(seconds)

    @task
    def one_session(self) -> None:
        self.session()

    def session(self) -> None:
        """One session of the next script (a subclass plays its own kind: levels.l4_agent)."""
        item = self.next_item()
        script = self.script_of(item)
        self.sessions_started += 1
        session_id = f"{self.user_key}-s{self.sessions_started}"
        stats = self.session_run.stats          # look the variant up per event: a worker's report resets it
        stats.variant(self.variant).started()
        conversation = Conversation(script, self.session_settings.patience_scale)
        first_start_s: list[float] = []

        def after_turn(record: RequestRecord) -> None:
            if not first_start_s:
                first_start_s.append(record.started_at)
            new = conversation.answer(record.text, ok=record.ok, ttft_ms=record.ttft_ms, e2e_ms=record.e2e_ms)
            extra = record.extra
            extra["facts_new"] = list(new)
            extra["facts_covered"] = len(conversation.covered)
            verdict = conversation.verdict
            if verdict.ended:
                duration_ms = max(0.0, (end_s(record) - first_start_s[0]) * 1000)
                extra.update(final=True, outcome=verdict.outcome,
                             session_completed=verdict.outcome == "completed",
                             abandoned=verdict.outcome == "abandoned", abandon_reason=verdict.abandon_reason,
                             rounds=conversation.turns, session_duration_ms=round(duration_ms, 3))
                stats.variant(self.variant).ended(verdict.outcome, conversation.turns, duration_ms,
                                                  verdict.abandon_reason)

        try:
            while not conversation.verdict.ended:
                if conversation.turns:
                    self.think(script)
                turn = conversation.next_turn()
                history = conversation.ask(turn)
                extra = {"session_id": session_id, "turn": conversation.turns, "followup": turn.followup,
                         "messages": len(history), "facts_total": len(script.facts), "final": False}
                self.request(Item(id=script.id, messages=history, references=item.references,
                                  max_tokens=item.max_tokens),
                             scenario=self.scenario_name, extra=extra, annotate=after_turn)
        finally:
            if not conversation.verdict.ended:
                stats.variant(self.variant).cut()        # the run stopped mid-session
            self.session_run.publish()
        limit = self.session_settings.sessions_per_user
        if limit and self.sessions_started >= limit:
            self.session_run.user_done()
            raise StopUser()


# ---- Locust listeners (attached by SessionUser.register from the locustfile's init listener) ----
def _l4_class(environment: Any) -> type[SessionUser] | None:
    found = [c for c in environment.user_classes if isinstance(c, type) and issubclass(c, SessionUser)]
    return found[0] if found else None


def _is_l4(environment: Any) -> bool:
    return _l4_class(environment) is not None


def _fail(message: str) -> None:
    """Bad L4 input at ``init``: one ``fourfold: error:`` line and exit 2 (as levels.inputs)."""
    UsageError(message).show()
    raise SystemExit(2)


def _on_init(environment: Any, **_kw: Any) -> None:
    user_class = _l4_class(environment)
    if user_class is None:
        return
    options = environment.parsed_options
    if options is not None and not getattr(options, "dataset", ""):
        options.dataset = str(user_class.default_dataset)      # meta.json then names it, for `fourfold score`
    path = getattr(options, "dataset", "") or str(user_class.default_dataset)
    try:
        run = get_session_run(environment)
    except (SplitError, ValueError) as exc:
        _fail(str(exc))
        return
    try:
        user_class.check_dataset(path)
    except (ValueError, OSError) as exc:      # ScriptError is a ValueError
        _fail(f"--dataset {path}: {exc} ({user_class.dataset_hint})")
        return
    ev = environment.events
    ev.report_to_master.add_listener(run.on_report_to_master)
    ev.worker_report.add_listener(run.on_worker_report)
    runtime = get_runtime(environment)
    if runtime.is_worker:
        return
    settings = run.settings
    if settings.ab and not settings.ab_host:
        if options is None or not getattr(options, "fourfold_embedded", False):
            _fail("--ab-split needs --ab-host URL (variant B's target) when --host is given")
        _start_variant_b(environment, run, runtime.settings)
    runtime.extras.meta["l4"] = asdict(run.settings)
    if settings.ab:
        embedded = bool(getattr(options, "fourfold_embedded", False))
        runtime.extras.meta["ab"] = {
            "share_a": settings.ab_share_a, "seed": settings.ab_seed,
            "variants": {
                "A": {"host": environment.host or "",
                      "profile": runtime.settings.sim_profile if embedded else None},
                "B": {"host": run.settings.ab_host, "profile": settings.ab_profile if embedded else None}}}
    run.publish()


def _start_variant_b(environment: Any, run: SessionRun, settings: Settings) -> None:
    simulator = start_simulator(profile=run.settings.ab_profile, seed=settings.sim_seed,
                                extra_args=_simulator_args(settings))
    run.handles.append(simulator)
    atexit.register(run.stop_targets)
    environment.parsed_options.ab_host = simulator.url      # workers receive it with the master's options
    run.settings = SessionSettings.from_options(environment.parsed_options)
    log.info("fourfold: variant B (profile %s) running at %s", run.settings.ab_profile, simulator.url)


def _on_test_start(environment: Any, **_kw: Any) -> None:
    if _is_l4(environment):
        run = get_session_run(environment)
        run.settings = SessionSettings.from_options(environment.parsed_options)   # workers: the master's
        runtime = find_runtime(environment)
        if runtime is not None and not runtime.is_worker:    # each test its own (web UI: Stop, then New)
            run.stats = SessionStats()
            run.printed = False


def _on_finish(environment: Any, **_kw: Any) -> None:
    """Each test's end (``hooks.finish_test``): this test's ``sessions`` block, on the console too."""
    run = state_of(environment).get(SessionRun)
    runtime = find_runtime(environment)
    if run is None or runtime is None or runtime.is_worker:
        return
    run.publish()
    summary = runtime.extras.summary.get("sessions")
    if summary and not run.printed:
        run.printed = True
        print(format_sessions(summary), file=sys.stderr if environment.parsed_options is None else sys.stdout)


def _on_quitting(environment: Any, **_kw: Any) -> None:
    # Locust fires ``quitting`` in reverse order: this runs before levels.hooks' listener, which
    # writes summary.json (with the ``sessions`` block of _on_finish) after the users stopped here.
    run = state_of(environment).get(SessionRun)
    if run is None:
        return
    runtime = find_runtime(environment)
    if runtime is not None and not runtime.is_worker:
        runner = environment.runner      # a stop signal: stop users before variant B's target goes away
        if runner is not None and runner.state in (STATE_RUNNING, STATE_SPAWNING):
            runtime.quitting = True          # hooks' finish_test writes the summary (after the last reports)
            runner.quit()
    run.stop_targets()


__all__ = ["DEFAULT_SESSIONS", "SessionUser", "get_session_run", "register", "session_scripts",
           "sessions_block"]
