"""``--mix`` inside a run: the mix in meta.json, its per-tenant figures in summary.json and live.

On the local runner or the master, :func:`register` attaches a record listener that counts every
record the run directory takes by tenant (:class:`fourfold.measure.mixstats.MixStats`: a master
sees its workers' records, so this needs no shipping of its own), a finisher that writes the
``mix`` block (:func:`fourfold.measure.mixstats.mix_block`) and the same block live for the web UI's
LLM level tab. meta.json's ``mix`` names each entry with its weight and model, never a key or a
secret header's value. Which entry a request takes is decided in the user
(:class:`fourfold.workloads.mix.MixPicker`, ``LLMUser.request``).
"""

from __future__ import annotations

from typing import Any

from fourfold.levels.runtime import Runtime, get_runtime
from fourfold.levels.state import state_of
from fourfold.measure.mixstats import MixStats, mix_block
from fourfold.measure.record import RequestRecord

__all__ = ["MixRun", "register"]

MIX_KEY = "mix"


class MixRun:
    """One environment's mix counts, afresh each test."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.stats: MixStats | None = None

    def begin(self, **_kw: Any) -> None:
        self.stats = None
        mix = self.runtime.settings.mix_entries
        if mix:
            self.runtime.extras.meta[MIX_KEY] = {"sticky": self.runtime.settings.mix_sticky,
                                                 "entries": [e.describe() for e in mix.entries]}

    def offer(self, record: RequestRecord) -> None:
        if not record.tenant:
            return
        if self.stats is None:
            self.stats = MixStats.like(self.runtime.stats)     # its stall threshold and SLO, this test's
        self.stats.add(record)

    def block(self, _environment: Any = None) -> dict[str, Any]:
        settings = self.runtime.settings
        mix = settings.mix_entries
        if not mix:
            return {}
        stats = self.stats or MixStats.like(self.runtime.stats)
        models = {e.name: e.model or settings.model for e in mix.entries}
        return {MIX_KEY: mix_block(stats, mix.weights(), models, settings.mix_sticky)}

    def finish(self, _environment: Any) -> None:
        self.runtime.extras.summary.update(self.block())


def register(environment: Any) -> MixRun | None:
    """Attach the mix's counting to the environment (local runner or master; once)."""
    runtime = get_runtime(environment)
    if runtime.is_worker or state_of(environment).get(MixRun) is not None:
        return None
    run = state_of(environment).put(MixRun(runtime))
    run.begin()
    runtime.extras.on_record(run.offer)
    runtime.extras.on_finish(run.finish)
    runtime.extras.on_block(run.block)
    environment.events.test_start.add_listener(run.begin)
    return run
