"""The run directory, the contract between a run and its reports: writing it (``runlog``), reading
it back (``runread``), which records a reader keeps (``plausible``), keeping secrets out of it
(``secrets``) and what a run sent and from where (``provenance``). Imports ``measure`` and ``workloads``."""
