"""Server-metrics sampler: the target's Prometheus /metrics and local nvidia-smi, once a second.

Runs as one greenlet on the local runner or the master (the target is one server, however many
workers load it). Each tick appends ``{"t_s": unix seconds, "source.metric": value, ...}``; at the
end the series goes to ``server_metrics.json`` and a per-metric summary into ``summary.json``.
A target without /metrics or a machine without nvidia-smi just yields fewer columns. Several
``--metrics-url`` (an engine's /metrics and a DCGM exporter's) merge into one row per tick.
"""

from __future__ import annotations

import logging
import shutil
import subprocess
import time
from collections.abc import Sequence
from typing import Any

import gevent
import httpx

from fourfold.levels.options import metrics_url_list
from fourfold.measure.prom import (
    NVIDIA_SMI_ARGS,
    canonical_metrics,
    parse_nvidia_smi,
    parse_prometheus,
    summarize_series,
)

log = logging.getLogger("fourfold")


class Sampler:
    """Samples each of ``metrics_urls`` (in order) and nvidia-smi once per ``interval_s``.

    A canonical metric two URLs both give is taken from the first URL listed (``--metrics-url``'s
    order: list the engine's /metrics before an exporter's). Errors are kept per URL (the last one
    seen, in the summary's ``errors``) and logged once per URL, not once per sample.
    """

    def __init__(self, metrics_urls: Sequence[str] | str, interval_s: float = 1.0,
                 nvidia_smi: str | None = None) -> None:
        self.metrics_urls = [metrics_urls] if isinstance(metrics_urls, str) else list(metrics_urls)
        self.metrics_urls = [url for url in self.metrics_urls if url]
        self.interval_s = interval_s
        self.nvidia_smi = nvidia_smi
        self.rows: list[dict[str, float]] = []
        self.errors: dict[str, str] = {}          # URL (or "nvidia_smi") -> its last error
        self._logged: set[str] = set()
        self._client = httpx.Client(timeout=httpx.Timeout(max(interval_s, 1.0)))
        self._greenlet: gevent.Greenlet | None = None

    def _error(self, source: str, message: str) -> None:
        self.errors[source] = message
        if source not in self._logged:
            self._logged.add(source)
            log.warning("fourfold: server metrics from %s: %s (said once; the run goes on without them)",
                        source, message)

    def _scrape(self, url: str) -> dict[str, float]:
        try:
            response = self._client.get(url)
        except httpx.HTTPError as exc:
            self._error(url, f"{exc.__class__.__name__}: {exc}")
            return {}
        if response.status_code != 200:
            self._error(url, f"HTTP {response.status_code} from {url}")
            return {}
        return canonical_metrics(parse_prometheus(response.text))

    def sample_once(self) -> dict[str, float]:
        row: dict[str, float] = {"t_s": round(time.time(), 3)}
        for url in self.metrics_urls:
            for key, value in self._scrape(url).items():
                row.setdefault(f"server.{key}", value)          # the first URL listed wins
        if self.nvidia_smi:
            try:
                out = subprocess.run([self.nvidia_smi, *NVIDIA_SMI_ARGS[1:]], capture_output=True,
                                     text=True, timeout=5, check=False)
                for key, value in parse_nvidia_smi(out.stdout).items():
                    row[f"nvidia_smi.{key}"] = value
            except (OSError, subprocess.SubprocessError) as exc:
                self._error("nvidia_smi", str(exc))
        self.rows.append(row)
        return row

    def _loop(self) -> None:
        while True:
            started = time.monotonic()
            self.sample_once()
            gevent.sleep(max(0.0, self.interval_s - (time.monotonic() - started)))

    def start(self) -> Sampler:
        self._greenlet = gevent.spawn(self._loop)
        return self

    def stop(self) -> dict[str, Any]:
        if self._greenlet is not None:
            self._greenlet.kill(block=True, timeout=2)
            self._greenlet = None
        self._client.close()
        return self.summary()

    def summary(self) -> dict[str, Any]:
        """The ``server_metrics`` block of summary.json over the samples so far."""
        return {"metrics_urls": list(self.metrics_urls), "nvidia_smi": bool(self.nvidia_smi),
                "errors": dict(self.errors), "metrics": summarize_series(list(self.rows))}

    def series(self) -> list[dict[str, float]]:
        return list(self.rows)


def start_sampler(runtime: Any) -> Sampler | None:
    urls = list(metrics_url_list(runtime.settings.metrics_url))
    if urls == ["off"]:
        return None
    if not urls:
        host = (runtime.environment.host or "").rstrip("/")
        urls = [f"{host}/metrics"] if host else []
    nvidia_smi = shutil.which("nvidia-smi")
    if not urls and not nvidia_smi:
        return None
    return Sampler(urls, runtime.settings.sample_interval_s, nvidia_smi).start()
