"""The process exit code of a web-UI session with several tests: the last test's SLO verdict
(:func:`fourfold.levels.slogate.finish`, called at each test's end), as Locust's own
``--exit-code-on-error`` counts only the last test's errors."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from fourfold.gates.slo import parse_spec
from fourfold.levels import slogate
from fourfold.levels.state import state_of
from tests.unit.test_slo import _summary

MEETS, MISSES, NO_SLO = "ttft_p95<=450ms", "ttft_p95<=400ms", ""      # the summary's TTFT p95 is 430 ms


def _session(specs: list[str], exit_code_before: int | None = None) -> int | None:
    """Finish one test per spec in one process; the exit code Locust would use (None: its own rules)."""
    environment = SimpleNamespace(process_exit_code=exit_code_before)
    runtime = SimpleNamespace(is_worker=False, writer=None, settings=SimpleNamespace(junit=""))
    for spec in specs:
        state_of(environment).put(slogate.Gate(source=spec, slos=parse_spec(spec) if spec else []))
        slogate.finish(environment, runtime, _summary())
    return environment.process_exit_code


@pytest.mark.parametrize(("specs", "code"), [
    ([MISSES], 3),
    ([MEETS], None),
    ([MISSES, MEETS], None),          # Stop, New: the second test met its SLO
    ([MEETS, MISSES], 3),
    ([MISSES, NO_SLO], None),         # the second test had no --slo: no verdict, no 3
    ([MISSES, MEETS, MISSES], 3),
])
def test_the_exit_code_is_the_last_tests_verdict(specs: list[str], code: int | None, capsys) -> None:
    assert _session(specs) == code
    assert capsys.readouterr().out.count("MISSED") == sum(s == MISSES for s in specs)


def test_a_code_set_by_someone_else_is_kept_when_the_slo_is_met() -> None:
    assert _session([MEETS], exit_code_before=1) == 1


def _sweep(capacity: float | None, rates: int = 2, converged: bool = True) -> dict:
    return {"rates": [{"offered_rps": 6.0 + i} for i in range(rates)], "capacity_rps": capacity,
            "bracket_rps": [capacity or 0.0, 9.0], "converged": converged, "stopped": "-t ended the test"}


@pytest.mark.parametrize(("sweep", "code", "says"), [
    (_sweep(8.55), 0, "capacity 8.55 requests/s, bracket [8.55, 9.00] (converged)"),
    (_sweep(8.0, converged=False), 0,
     "capacity 8.00 requests/s, bracket [8.00, 9.00] (not converged: -t ended"),
    (_sweep(None), 3, "no rate of 2 met it (exit 3)"),
    (_sweep(None, rates=0), 3, "the test stopped before any rate was judged (exit 3)"),
    ({**_sweep(None, rates=1), "rates": [{"offered_rps": 6.0, "inconclusive": True}],
      "stopped": "inconclusive at 6/s: no request completed"}, 3,
     "no rate could be judged (inconclusive at 6/s: no request completed) (exit 3)"),
])
def test_a_sweep_run_is_judged_per_rate_not_as_a_whole(sweep: dict, code: int, says: str, capsys) -> None:
    decision = slogate.sweep_decision({"l2": {"sweep": sweep}})
    assert decision is not None and decision[0] == code and says in decision[1]
    environment = SimpleNamespace(process_exit_code=None)
    state_of(environment).put(slogate.Gate(MISSES, parse_spec(MISSES)))
    runtime = SimpleNamespace(is_worker=False, writer=None, settings=SimpleNamespace(junit=""))
    slogate.finish(environment, runtime, {**_summary(), "l2": {"sweep": sweep}})   # the whole run misses
    out = capsys.readouterr().out
    assert environment.process_exit_code == (code or None)
    assert "MISSED" not in out and says in out and "judged per rate" in out


def test_a_run_without_a_sweep_has_no_per_rate_decision() -> None:
    assert slogate.sweep_decision(_summary()) is None
    assert slogate.sweep_decision({"l2": {"ladder": {}}}) is None
