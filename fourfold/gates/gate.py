"""The shell around :mod:`fourfold.gates.slo`: SLO files, JUnit files, gating a finished run directory.

``--slo`` takes an inline spec or the path of an SLO file (TOML, read with the standard
library's ``tomllib``)::

    # ci/slo.toml
    [slo]                              # judged on the Aggregated row
    ttft_p95 = "<= 450 ms"
    interruption_rate = "< 0.5 %"
    similarity_mean = ">= 0.75"        # quality: judged by `fourfold check` after `fourfold score`

    [slo."l1:saturation"]              # one level:scenario
    e2e_p99 = "<= 6 s"

A value is ``"OP NUMBER [UNIT]"`` or a bare number (the metric's natural direction, see
:func:`fourfold.gates.slo.parse_table`). A value that ends in ``.toml`` or names an existing file is
read as a file; anything else is an inline spec.
"""

from __future__ import annotations

import os
import time
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fourfold.errors import RunDirError, SLOSpecError
from fourfold.gates.slo import SLO, Verdict, parse_spec, parse_table
from fourfold.gates.slo_report import format_verdicts, junit_xml
from fourfold.gates.slo_verdict import evaluate, exit_code
from fourfold.rundir.runlog import RECORDS_FILE, SUMMARY_FILE
from fourfold.rundir.runread import read_summary


def is_slo_file(value: str) -> bool:
    text = value.strip()
    return text.lower().endswith(".toml") or ("\n" not in text and os.path.isfile(text))


def load_slo_file(path: str | os.PathLike[str]) -> list[SLO]:
    where = f"SLO file {str(path)!r}"
    try:
        with open(path, "rb") as fh:
            data = tomllib.load(fh)
    except FileNotFoundError:
        raise SLOSpecError(f"{where} does not exist (paths are relative to the directory locust "
                           f"runs in: {os.getcwd()})") from None
    except tomllib.TOMLDecodeError as exc:
        raise SLOSpecError(f"{where} is not valid TOML: {exc}") from None
    table = data.get("slo")
    if not isinstance(table, dict):
        raise SLOSpecError(f"{where}: expected a [slo] table: a line [slo], then lines such as "
                           f"ttft_p95 = \"<= 450 ms\"")
    unknown = sorted(set(data) - {"slo"})
    if unknown:
        raise SLOSpecError(f"{where}: unknown top-level key(s) {unknown}; only [slo] is read")
    return parse_table(table, where=where)


def load_slo(value: str) -> list[SLO]:
    """An inline spec or an SLO file -> SLOs (SLOSpecError, exit code 2, when malformed)."""
    if is_slo_file(value):
        return load_slo_file(value.strip())
    return parse_spec(value)


def write_junit(path: str | os.PathLike[str], verdicts: list[Verdict], **properties: str) -> Path:
    """Write the JUnit XML of ``verdicts`` to ``path`` (parent directories created)."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime())
    target.write_text(junit_xml(verdicts, properties={k: v for k, v in properties.items() if v},
                                timestamp=stamp), encoding="utf-8")
    return target


@dataclass
class CheckResult:
    run_dir: Path
    verdicts: list[Verdict]
    text: str

    @property
    def exit_code(self) -> int:
        return exit_code(self.verdicts)


def check_run(run_dir: str | os.PathLike[str], spec: str | None = None,
              junit: str | None = None) -> CheckResult:
    """Gate a finished run directory (``fourfold check``): its summary.json against ``spec`` (an
    inline spec or SLO file; default: the spec the run was gated with), quality clauses against
    the ``quality`` block that ``fourfold score`` added (missing: a failure). A directory that is
    missing, has no readable summary.json, or whose records.jsonl is missing, not a regular file or
    empty raises :class:`RunDirError`, a bad spec
    :class:`SLOSpecError` (both exit code 2)."""
    path = Path(run_dir)
    if not path.exists():
        raise RunDirError(f"{path}: no such directory")
    if not path.is_dir():
        raise RunDirError(f"{path}: not a directory (give a run directory, runs/<UTC time>-<label>)")
    summary: dict[str, Any] | None = read_summary(path)
    if summary is None:
        hint = ("the run did not finish (no summary.json next to records.jsonl)"
                if (path / RECORDS_FILE).exists() else "it is not a run directory")
        raise RunDirError(f"{str(path)!r} has no {SUMMARY_FILE}: {hint}")
    if summary.get("incomplete"):        # the watchdog ended it (exit 4): no figures to gate
        raise RunDirError(f"{str(path)!r} did not end cleanly: {summary.get('reason') or 'incomplete'}; its "
                          f"{SUMMARY_FILE} holds no figures (fourfold compare still reads its records)")
    records = path / RECORDS_FILE
    if not records.is_file():            # missing, or a FIFO / device / folder: nothing was recorded there
        raise RunDirError(f"{str(records)!r}: {'not a regular file' if records.exists() else 'missing'}; "
                          "a run's verdicts stand on its records")
    if not _has_a_record(records):
        raise RunDirError(f"{str(records)!r} is empty: the run recorded no request, there is nothing to gate")
    if not spec:
        gated = summary.get("slo")
        spec = gated.get("spec") if isinstance(gated, dict) else None
        if not spec or not isinstance(spec, str):
            raise SLOSpecError("no --slo given and the run was not gated with one; "
                               "pass --slo 'ttft_p95<=450ms,...' or --slo ci/slo.toml")
    slos = load_slo(spec)
    groups = summary.get("groups") or []
    if not isinstance(summary.get("total") or {}, dict) or not isinstance(groups, list) \
            or not all(isinstance(group, dict) for group in groups):
        raise RunDirError(f"{path / SUMMARY_FILE}: not a fourfold summary (\"total\" must be an object and "
                          "\"groups\" a list of objects); the run directory is damaged")
    try:
        verdicts = evaluate(slos, summary, quality="require")
    except (AttributeError, TypeError, ValueError) as exc:     # a summary.json of the wrong shape
        raise RunDirError(f"{path / SUMMARY_FILE}: not a fourfold summary ({exc}); the run directory "
                          "is damaged") from None
    text = format_verdicts(verdicts, title=f"fourfold check {path.name}")
    if junit:
        write_junit(junit, verdicts, run_dir=str(path), spec=spec)
    return CheckResult(path, verdicts, text)


def _has_a_record(records: Path) -> bool:
    """Anything but whitespace within the file's first MiB (a run writes one record a line)."""
    with records.open("rb") as fh:
        return bool(fh.read(1 << 20).strip())


__all__ = ["CheckResult", "check_run", "is_slo_file", "load_slo", "load_slo_file", "write_junit"]
