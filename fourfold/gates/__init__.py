"""Verdicts on a run or a target: SLO specs and their verdicts (``slo``, ``slo_report``), SLO files
and ``fourfold check`` (``gate``), the capacity sweep's search (``sweep``) and the probes of a new version
(``probe``). Imports ``measure``, ``workloads``, ``rundir`` and ``client``."""
