"""``--prometheus-port``: fourfold's figures for Prometheus to scrape, served by the run itself.

On a standalone runner or a master (never a worker: a master's LLMStats already hold its workers'
merged deltas), :func:`register` binds ``--prometheus-host:--prometheus-port`` at ``init`` (a port
that cannot be bound is one line and exit 2, before any load) and serves ``GET /metrics`` from a
gevent WSGI server on the process's hub: each scrape renders the live aggregates
(:func:`fourfold.measure.promexport.render`, only the exported bounds: well under a millisecond a
group) and the levels' live blocks, the ones the web UI reads. It stops at ``quitting``, after the
run's summary.json is written, and ``--prometheus-linger`` seconds later, so a last scrape can
see the final figures (``fourfold_test_finished 1``). docs/prometheus.md lists the series.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Any

import gevent
from gevent.pywsgi import WSGIServer

from fourfold.errors import UsageError
from fourfold.levels.ladder import STEP_ATTR
from fourfold.levels.runtime import Runtime, live_blocks
from fourfold.levels.state import state_of
from fourfold.measure.promexport import CONTENT_TYPE, level_gauges, render

__all__ = ["Exporter", "register", "scrape"]

log = logging.getLogger("fourfold")
StartResponse = Callable[[str, list[tuple[str, str]]], Any]


def scrape(environment: Any, runtime: Runtime) -> str:
    """The exposition text of ``runtime``'s figures now."""
    runner = environment.runner
    users = getattr(runner, "user_count", None) if runner is not None else None
    step = getattr(environment.parsed_options, STEP_ATTR, None)
    gauges = level_gauges(live_blocks(environment), users=users, ladder_step=step,
                          finished=runtime.finished)
    return render(runtime.stats, gauges)


class Exporter:
    """The /metrics server of one Environment."""

    def __init__(self, environment: Any, runtime: Runtime, host: str, port: int, linger_s: float) -> None:
        self.environment = environment
        self.runtime = runtime
        self.linger_s = linger_s
        self.server = WSGIServer((host, port), self.app, log=None, error_log=log)
        self.scrapes = 0

    @property
    def address(self) -> tuple[str, int]:
        host, port = self.server.address[:2]
        return str(host), int(port)

    def start(self) -> None:
        self.server.start()         # binds now (OSError when it cannot), then accepts on the hub

    def app(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "")
        if path not in ("/metrics", "/"):
            start_response("404 Not Found", [("Content-Type", "text/plain")])
            return [b"not found: fourfold serves /metrics\n"]
        if path == "/":
            start_response("200 OK", [("Content-Type", "text/plain")])
            return [b"fourfold: Prometheus metrics at /metrics\n"]
        try:
            body = scrape(self.environment, self.runtime).encode()
        except Exception:  # noqa: BLE001 - a scrape must never take the run down
            log.exception("fourfold: rendering /metrics failed")
            start_response("500 Internal Server Error", [("Content-Type", "text/plain")])
            return [b"fourfold: rendering /metrics failed (see the run's log)\n"]
        self.scrapes += 1
        start_response("200 OK", [("Content-Type", CONTENT_TYPE), ("Content-Length", str(len(body)))])
        return [body]

    def on_quitting(self, **_kw: Any) -> None:
        """After the summary (this listener is attached before fourfold's own ``quitting`` one, and
        Locust fires ``quitting`` in reverse): ``--prometheus-linger`` seconds more, then stop."""
        if self.linger_s > 0:
            log.info("fourfold: /metrics stays up %g s for a last scrape (--prometheus-linger)",
                     self.linger_s)
            gevent.sleep(self.linger_s)
        self.server.stop(timeout=1)


def register(environment: Any, runtime: Runtime) -> Exporter | None:
    """Start the exporter when ``--prometheus-port`` is given (not on a worker); call at ``init``,
    before fourfold's ``quitting`` listener is attached."""
    settings = runtime.settings
    if not settings.prometheus_port or runtime.is_worker:
        return None
    exporter = Exporter(environment, runtime, settings.prometheus_host, settings.prometheus_port,
                        settings.prometheus_linger_s)
    try:
        exporter.start()
    except OSError as exc:
        error = UsageError(f"--prometheus-port {settings.prometheus_port}: cannot listen on "
                           f"{settings.prometheus_host}:{settings.prometheus_port} ({exc.strerror or exc})")
        error.show()
        raise SystemExit(error.exit_code) from None
    state_of(environment).put(exporter)
    environment.events.quitting.add_listener(exporter.on_quitting)
    host, port = exporter.address
    log.info("fourfold: Prometheus metrics at http://%s:%d/metrics", host, port)
    return exporter
