"""SLO verdicts rendered: the plain-text table printed at the end of a run, and JUnit XML (pure).

JUnit: one ``<testsuite name="fourfold.slo">`` with one ``<testcase>`` per SLO. ``classname``
is ``fourfold.slo.<scope>`` (Aggregated or level:scenario), ``name`` the SLO
(``ttft_p95 <= 450 ms``). A missed SLO, or one with no value to judge, has a ``<failure>``
whose message names the SLO and the measured value; a quality clause in a live run is
``<skipped>``. CI systems (GitHub, GitLab, Jenkins) show each SLO as a test.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence

from fourfold.gates.slo import Verdict
from fourfold.gates.slo_verdict import exit_code

_STATUS_TEXT = {"pass": "pass", "miss": "MISSED", "no_data": "NO DATA", "not_scored": "NOT SCORED",
                "skipped": "skipped"}


def format_verdicts(verdicts: Sequence[Verdict], *, title: str = "fourfold SLO gate") -> str:
    """A fixed-width table, one line per SLO, a headline with the outcome and the exit code,
    and a line per failed or skipped SLO saying why."""
    failed = [v for v in verdicts if v.failed]
    code = exit_code(verdicts)
    outcome = (f"{len(failed)} of {len(verdicts)} failed (exit code {code})" if failed
               else f"all {sum(v.status == 'pass' for v in verdicts)} met")
    rows = [("SLO", "scope", "measured", "verdict")]
    rows += [(v.slo.label, v.slo.target, v.slo.format_value(v.measured), _STATUS_TEXT[v.status])
             for v in verdicts]
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    lines = [f"{title}: {outcome}"]
    for row in rows:
        lines.append("  " + "  ".join(f"{cell:<{w}}" if i != 2 else f"{cell:>{w}}"
                                      for i, (cell, w) in enumerate(zip(row, widths))).rstrip())
    lines += [f"  - {v.message}" for v in verdicts if v.reason]
    return "\n".join(lines)


def junit_xml(verdicts: Sequence[Verdict], *, suite: str = "fourfold.slo",
              properties: Mapping[str, str] | None = None, timestamp: str = "") -> str:
    """JUnit XML text (UTF-8, with an XML declaration) for ``verdicts``."""
    failures = sum(v.failed for v in verdicts)
    skipped = sum(v.status == "skipped" for v in verdicts)
    counts = {"tests": str(len(verdicts)), "failures": str(failures), "errors": "0", "skipped": str(skipped)}
    root = ET.Element("testsuites", {"name": "fourfold", **counts})
    attrs = {"name": suite, **counts, "time": "0"}
    if timestamp:
        attrs["timestamp"] = timestamp
    testsuite = ET.SubElement(root, "testsuite", attrs)
    if properties:
        props = ET.SubElement(testsuite, "properties")
        for name, value in properties.items():
            ET.SubElement(props, "property", {"name": name, "value": str(value)})
    for verdict in verdicts:
        case = ET.SubElement(testsuite, "testcase", {"classname": f"{suite}.{verdict.slo.target}",
                                                     "name": verdict.slo.label, "time": "0"})
        if verdict.failed:
            failure = ET.SubElement(case, "failure", {"message": verdict.message, "type": verdict.status})
            failure.text = (f"SLO {verdict.slo.clause} at {verdict.slo.target}\n"
                            f"threshold: {verdict.slo.op} {verdict.slo.format_value(verdict.slo.threshold)}\n"
                            f"measured: {verdict.slo.format_value(verdict.measured)}\n"
                            + (f"reason: {verdict.reason}\n" if verdict.reason else ""))
        elif verdict.status == "skipped":
            ET.SubElement(case, "skipped", {"message": verdict.reason})
        else:
            ET.SubElement(case, "system-out").text = verdict.message
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"


__all__ = ["format_verdicts", "junit_xml"]
