"""Locust event listeners for every fourfold level, attached explicitly (never on import).

A locustfile attaches them with Locust's own events, as Locust's contrib modules do::

    events.init_command_line_parser.add_listener(RagUser.add_arguments)   # fourfold's options
    events.init.add_listener(RagUser.register)                            # everything below

:func:`add_arguments` and :func:`register` are the shared halves that every level's pair calls
first; both are idempotent per parser and per environment.

- ``init_command_line_parser``: fourfold's options (:mod:`fourfold.levels.options`).
- ``init``: the environment's Runtime; with no ``--host`` (local runner or master), the level's
  embedded targets (the LLM simulator, and for L3 the reference RAG service) start on loopback
  and ``environment.host`` points at them, so workers and the web UI form see the address.
- ``test_start``: settings re-read (workers receive the master's options only now), a new test
  begun (after a finished one: new statistics and a new run directory), the run directory opened,
  the server-metrics sampler started for levels that want it, the load generator's health sampler
  started (local runner and workers: :mod:`fourfold.measure.loadgen`).
- ``test_stopping``: the health sampler stopped, before Locust's stop sequence holds the hub.
- ``test_stop``: sampler stopped; a worker ships its last records at once; with the web UI (Stop)
  the test is finished: the levels' blocks, ``summary.json``, the LLM summary printed
  (:func:`finish_test`). Each web-UI test has its own run directory.
- ``quitting``: users stopped, the current test finished (a headless run's only one; nothing when
  the web UI's last test was stopped already), embedded targets stopped; then ``--prometheus-port``'s
  server stops (after ``--prometheus-linger``).
"""

from __future__ import annotations

import atexit
import gc
import logging
import signal
import sys
from dataclasses import replace
from typing import Any

import gevent
from locust.runners import STATE_RUNNING, STATE_SPAWNING

from fourfold.adapters.locust import build_default_args_once, send_stats_now
from fourfold.errors import UsageError
from fourfold.levels import abort, inputs, livequality, prometheus, slogate, watchdog, webui, webui_report
from fourfold.levels import options as _options
from fourfold.levels.history_add import add_to_history
from fourfold.levels.ledger import worker_lines
from fourfold.levels.mixrun import register as register_mix
from fourfold.levels.options import Settings
from fourfold.levels.runtime import find_runtime, get_runtime
from fourfold.levels.runtime import register as register_runtime
from fourfold.levels.state import state_of
from fourfold.levels.telemetry_sampler import start_sampler
from fourfold.measure.console import format_summary
from fourfold.measure.loadgen import console_line
from fourfold.rundir.provenance import client_facts, dataset_facts
from fourfold.rundir.runlog import check_run_base
from fourfold.targets.launch import start_simulator

log = logging.getLogger("fourfold")
_embedded: list[Any] = []          # handles with .stop() of targets this process started


def simulator_running() -> bool:
    """True when this process (or, on a worker, the master) runs against the embedded simulator."""
    return bool(_embedded) or _EMBEDDED_FLAG.get("on", False)


_EMBEDDED_FLAG: dict[str, bool] = {}


def _llm_user_classes(environment: Any) -> list[Any]:
    return [cls for cls in environment.user_classes if hasattr(cls, "start_embedded")]


def _on_parser(parser: Any, **_kw: Any) -> None:
    _options.register(parser)


def _deliver_sigint_to_main() -> None:
    """Ctrl-C as a gevent signal watcher that raises KeyboardInterrupt in the main greenlet.

    Python's own SIGINT handler raises KeyboardInterrupt at whatever bytecode runs when the signal
    comes: with the reactor's reads running as hub callbacks, that can be the middle of a read,
    leaving the hub in a state Locust's shutdown then waits on (seen as a run that does not stop
    on SIGINT, ~1 in 2 full test-suite runs). Delivered from a watcher, the interrupt reaches the
    main greenlet where Locust expects it (``main_greenlet.join()`` → ``shutdown()``). Left alone
    when something already replaced the default handler (``--processes`` forwards SIGINT to its
    children with its own)."""


    if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        return
    main = gevent.get_hub().parent
    gevent.signal_handler(signal.SIGINT, lambda: main.throw(KeyboardInterrupt))


def _on_init(environment: Any, **_kw: Any) -> None:
    _deliver_sigint_to_main()
    build_default_args_once()                # a worker's spawn messages: no 250 ms stall each
    inputs.check_or_exit(environment)        # options and datasets: one line, exit 2, before anything starts
    runtime = register_runtime(environment)
    abort.register(environment, runtime)     # --abort-on-error-rate: a run whose every request fails stops
    prometheus.register(environment, runtime)   # --prometheus-port: /metrics (its quitting listener first)
    if not runtime.is_worker:                # writes the run directory: fail now, not at the first record
        try:
            check_run_base(runtime.settings.run_dir)
        except UsageError as exc:            # one line, exit 2 (Locust's event hooks let SystemExit through)
            exc.show()
            raise SystemExit(exc.exit_code) from None

        webui_report.register(environment)  # LLM metrics in Locust's HTML report and --csv files
    if getattr(environment, "web_ui", None) is not None:   # local runner or master with the web UI
        webui.register(environment)
    classes = _llm_user_classes(environment)
    if classes:
        runtime.level = classes[0].level
    if not runtime.is_worker and classes:
        _preflight(environment, runtime, classes[0])
        _start_embedded_mirror(environment, runtime)
    if runtime.is_worker or environment.host or not classes:
        return
    host, handles = classes[0].start_embedded(runtime.settings)
    _embedded.extend(handles)
    atexit.register(stop_embedded)
    environment.host = host
    for cls in environment.user_classes:
        cls.host = host
    if environment.parsed_options is not None:
        environment.parsed_options.host = host
        environment.parsed_options.fourfold_embedded = True
    runtime.extras.meta["embedded_target"] = {"profile": runtime.settings.sim_profile,
                                             "seed": runtime.settings.sim_seed}
    log.info("fourfold: no --host given; embedded target running at %s", host)


def _preflight(environment: Any, runtime: Any, cls: Any) -> None:
    """One request to each target the user gave before a headless run starts
    (:mod:`fourfold.levels.preflight`); a misconfigured one is one line and exit 2. Not for embedded
    targets, ``--no-preflight``, or a web UI (its start form can still change the host)."""
    settings, options = runtime.settings, environment.parsed_options
    if settings.no_preflight or options is None or not getattr(options, "headless", False):
        return
    targets = [(environment.host, "--host")] if environment.host else []
    if settings.mirror_host and not settings.mirror_host.startswith("sim:"):
        targets.append((settings.mirror_host, "--mirror-host"))
    try:
        for url, option in targets:
            runtime.extras.meta.setdefault("preflight", []).append(
                cls.run_preflight(environment, settings, url, option))
    except UsageError as exc:
        exc.show()
        raise SystemExit(exc.exit_code) from None
    if targets:      # summary.json too: the requests the targets saw beyond the records
        checked = runtime.extras.meta["preflight"]
        runtime.extras.on_finish(lambda _env: runtime.extras.summary.update(
            preflight={"requests": sum(entry["requests"] for entry in checked), "targets": len(checked)}))


def _start_embedded_mirror(environment: Any, runtime: Any) -> None:
    """``--mirror-host sim:<profile>`` starts a second simulator with that profile as the mirror."""
    mirror = runtime.settings.mirror_host
    if not mirror.startswith("sim:"):
        return


    simulator = start_simulator(profile=mirror[4:] or "candidate", seed=runtime.settings.sim_seed)
    _embedded.append(simulator)
    atexit.register(stop_embedded)
    runtime.settings = replace(runtime.settings, mirror_host=simulator.url)
    if environment.parsed_options is not None:
        environment.parsed_options.mirror_host = simulator.url
    runtime.extras.meta["embedded_mirror"] = {"profile": mirror[4:] or "candidate", "url": simulator.url}
    log.info("fourfold: mirror simulator (%s) running at %s", mirror[4:] or "candidate", simulator.url)


def _freeze_heap(**_kw: Any) -> None:
    """Move every object alive now (modules, Locust, and once spawned the users and their clients)
    out of the cyclic collector's reach (``gc.freeze``: a list splice, no pause). A full collection
    then walks only what the run itself creates: at 256 streams it walked ~80k start-up objects
    every few seconds and held the hub 30-100 ms, long enough for streams' tokens to arrive
    unread and merge into one read (one stamp for several tokens)."""
    gc.freeze()


def _on_test_start(environment: Any, **_kw: Any) -> None:
    _freeze_heap()
    runtime = get_runtime(environment)
    runtime.begin_test()                     # after a Stop in the web UI: a new test, a new run directory
    runtime.settings = Settings.from_options(environment.parsed_options)
    _stand_down(environment)
    slogate.configure(environment, runtime)
    # the load generator's CPU and event-loop lag (summary: generator); a master sends no load
    runtime.generator.start(sample=not runtime.is_master)
    if getattr(environment.parsed_options, "fourfold_embedded", False):
        _EMBEDDED_FLAG["on"] = True
    if runtime.is_worker:
        state_of(environment).put(watchdog.arm(environment, runtime))   # a hub held for good ends the run
        return
    classes = _llm_user_classes(environment)
    runtime.extras.meta.update(sent_facts(environment, classes))
    try:
        runtime.open_run()
    except OSError as exc:     # checked at init, so something changed since: go on, counting each record lost
        log.error("fourfold: cannot create a run directory in %s (%s); records will be counted as lost",
                  runtime.settings.run_dir, exc.strerror or exc)
    if classes and any(cls.samples_server_metrics for cls in classes):
        runtime.sampler = start_sampler(runtime)
    # armed last: hashing a large dataset above may hold the hub for a while, and that is no hang
    state_of(environment).put(watchdog.arm(environment, runtime))


def sent_facts(environment: Any, classes: list[Any]) -> dict[str, Any]:
    """meta.json's facts about what this test sends and from where (``fourfold compare`` checks that
    the sides agree, :mod:`fourfold.reports.comparability`): the dataset's name, item count and
    content hash over every User class's items (:mod:`fourfold.rundir.provenance`), the classes'
    scenarios and the ``client`` machine. Once per test, on the process that writes meta.json."""

    facts: dict[str, Any] = {"dataset_name": None, "dataset_items": None, "dataset_sha256": None,
                             "dataset_cache_hit_share": None,
                             "scenarios": sorted({str(getattr(cls, "scenario", "")) for cls in classes}),
                             "client": client_facts()}
    sources: dict[str, Any] = {}
    try:
        for cls in classes:
            if hasattr(cls, "sent_items"):
                name, items = cls.sent_items(environment)
                sources.setdefault(name, items)
    except (UsageError, OSError, ValueError) as exc:     # checked at init: only a changed file gets here
        log.error("fourfold: the dataset could not be read again for meta.json's dataset_sha256: %s", exc)
        return facts
    return {**facts, **dataset_facts(sources)} if sources else facts


def _on_test_stop(environment: Any, **_kw: Any) -> None:
    """The test's users are stopped. A worker ships its last records now (before it tells the
    master it stopped, so they reach the master before the master's own ``test_stop``). With the
    web UI (Stop, or the end of ``--run-time``) the test is finished here: summary.json into its
    run directory; headless runs finish at ``quitting``, as the process exits."""

    runtime = get_runtime(environment)
    runtime.generator.stop()
    runtime.stop_background()
    if runtime.is_worker:
        _report_now(environment)
        return
    sampler = getattr(runtime, "sampler", None)
    if sampler is not None:
        runtime.sampler = None
        runtime.extras.summary["server_metrics"] = sampler.stop()
        try:
            runtime.open_run().write_json("server_metrics.json", sampler.series())
        except OSError as exc:
            log.error("fourfold: server_metrics.json not written: %s", exc.strerror or exc)
    options = environment.parsed_options
    if options is not None and not getattr(options, "headless", False) and not runtime.quitting:
        finish_test(environment)


def _stand_down(environment: Any) -> None:
    """The orderly stop has begun: the watchdog (:mod:`fourfold.levels.watchdog`) stands down."""
    dog = state_of(environment).get(watchdog.HubWatchdog)
    if dog is not None:
        dog.stand_down()


def _on_test_stopping(environment: Any, **_kw: Any) -> None:
    """Stop the generator's health sampler before Locust's stop sequence holds the hub."""
    _stand_down(environment)
    runtime = find_runtime(environment)
    if runtime is not None:
        runtime.generator.stop()


def _report_now(environment: Any) -> None:
    """Worker: send the stats report (and with it this test's last records) to the master now."""
    try:
        send_stats_now(environment.runner)
    except Exception as exc:  # noqa: BLE001 - the master is gone: Locust reports that itself
        log.debug("fourfold: the last report of the test was not sent: %s", exc)


def _on_quitting(environment: Any, **_kw: Any) -> None:
    _stand_down(environment)
    runtime = find_runtime(environment)
    if runtime is None:
        return
    if runtime.is_worker:
        log.info("fourfold worker: %d records measured, %d shipped to the master (worker %s)",
                 runtime.records_seen, runtime.shipping.records_shipped + len(runtime.shipping.pending),
                 environment.runner.client_id)
        return
    runtime.quitting = True
    _stop_users_first(environment)
    _on_test_stop(environment)
    finish_test(environment)
    stop_embedded()


def finish_test(environment: Any) -> dict[str, Any] | None:
    """Close the current test (once; not on workers): the levels' blocks (``finish`` listeners of
    :func:`register_level`, the last registered first), summary.json, the console summary and the
    SLO verdicts. The summary, or None when the test was already finished."""

    runtime = get_runtime(environment)
    if runtime.is_worker or runtime.finished:
        return None
    runtime.extras.finish(environment)
    summary = runtime.finish()
    if summary is not None:
        print(format_summary(summary), file=sys.stderr if environment.parsed_options is None else sys.stdout)
        assert runtime.writer is not None
        if summary["records_lost"]:
            print(f"fourfold: {summary['records_lost']} of {summary['records'] + summary['records_lost']} "
                  f"records could not be written "
                  f"({runtime.writer.loss_reason or 'see the log'}); summary.json counts them (records_lost)",
                  flush=True)
        for line in (runtime.backoff.console_line(), *worker_lines(summary.get("workers") or {}),
                     console_line(summary.get("generator"))):
            if line:
                print(line, flush=True)
        print(f"fourfold: run directory {runtime.writer.run_dir}", flush=True)
        settings = runtime.settings
        if settings.history_release:
            add_to_history(runtime.writer.run_dir, settings.history_release, settings.history,
                           settings.history_tags)
    slogate.finish(environment, runtime, summary)
    return summary


def _stop_users_first(environment: Any) -> None:
    """A stop signal (SIGTERM, Ctrl-C) fires ``quitting`` while users still run: stop them (and,
    on a master, collect the workers' last reports) before summary.json is written and the run log
    closed, so every request in flight is recorded as cancelled rather than lost."""

    runner = environment.runner
    if runner is not None and runner.state in (STATE_RUNNING, STATE_SPAWNING):
        runner.quit()


def stop_embedded() -> None:
    while _embedded:
        handle = _embedded.pop()
        try:
            handle.stop()
        except Exception:  # noqa: BLE001 - shutting down: report, keep stopping the rest
            log.exception("fourfold: stopping an embedded target failed")


def first_time(target: Any, key: str) -> bool:
    """True the first time ``key`` is registered on ``target`` (a parser or an environment)."""
    seen: set[str] = target.__dict__.setdefault("_fourfold_registered", set())
    if key in seen:
        return False
    seen.add(key)
    return True


def add_arguments(parser: Any, **_kw: Any) -> None:
    """``init_command_line_parser`` listener: fourfold's shared options, once per parser."""
    if first_time(parser, "fourfold"):
        _on_parser(parser)


def register(environment: Any, **_kw: Any) -> None:
    """``init`` listener: the environment's runtime and embedded targets now, then the shared
    ``test_start``/``test_stop``/``quitting`` listeners on ``environment.events`` (once)."""
    if not first_time(environment, "fourfold"):
        return
    _on_init(environment)
    ev = environment.events
    ev.test_start.add_listener(_on_test_start)
    ev.spawning_complete.add_listener(_freeze_heap)
    ev.test_stopping.add_listener(_on_test_stopping)
    ev.test_stop.add_listener(_on_test_stop)
    ev.quitting.add_listener(_on_quitting)
    # Locust starts --run-time's timer right after init, from the event loop's cached time, which
    # stands where the loop last ran: a start-up longer than -t since then (a first import compiling
    # .pyc, a busy machine) made the timer fire at once, a run of 30 ms and no request. Now, not then.
    gevent.get_hub().loop.update_now()

    livequality.register(environment)      # --score-live: after the shared test_start (run directory open)
    register_mix(environment)              # --mix: per-tenant figures


def register_level(environment: Any, key: str, init: Any = None, finish: Any = None, block: Any = None,
                   **listeners: Any) -> None:
    """A level's ``init`` listener: the shared registration first, then the level's ``init`` work,
    its ``finish`` listener (``fn(environment)``, run by :func:`finish_test` before each test's
    summary is written: the level's block into ``runtime.extras.summary``) and its ``event_name=listener``
    pairs, once per environment. ``block`` (``fn(environment) -> {"rag": {...}}``, ``{}`` when it has
    nothing) is the level's summary block over the data so far, the one its finish listener writes:
    the web UI's live panels (``/fourfold/levels.json``) call it too. Order matters: a level's
    listeners come after the shared ones, so its ``quitting`` listener (fired in reverse) runs
    before the summary."""

    register(environment)
    if not first_time(environment, key):
        return
    if init is not None:
        init(environment)
    if finish is not None:
        get_runtime(environment).extras.on_finish(finish)
    if block is not None:
        get_runtime(environment).extras.on_block(block)
    for event_name, listener in listeners.items():
        getattr(environment.events, event_name).add_listener(listener)
