"""Every error fourfold raises on purpose, in one tree; each class carries its exit code and prints
itself (the click pattern). This module imports nothing of fourfold, so every layer can use it.

    FourfoldError (1)                     raised on purpose; `fourfold` prints it on one line and exits
      ├── UsageError (2)                  wrong arguments or input the user can fix
      │    ├── SLOSpecError *             a malformed SLO spec or SLO file
      │    ├── UnknownDialect *           a dialect name that is not registered (lists the valid ones)
      │    ├── RunDirError                a run directory, or a file in it, that cannot be read
      │    │    ├── RecordsFormatError *  records.jsonl holds a line that is JSON but not a record
      │    │    └── SchemaError *         records or meta written by a newer fourfold
      │    ├── ProfileError *             a simulator profile name, file or override
      │    ├── FaultError *               an injected fault's name, rate or parameter
      │    ├── ScriptError *              an L4 session script
      │    ├── DatasetError *             a dataset file (prompts, questions, corpus, sessions):
      │    │                              file:line and what
      │    ├── OptionError *              an option value out of its range (negative, NaN, not 'Name: value')
      │    └── SplitError *               an L4 A/B split (--ab-split)
      ├── GateFailed (3)                  an SLO, quality floor or probe threshold was missed
      ├── ModelUnavailable (1)            the embedding model, or the library that runs it, is missing
      ├── TargetStartError † (1)          an embedded target did not start (the message has its stderr)
      │    ├── SimulatorStartError †
      │    └── RagServiceStartError †
      └── UpstreamError (1)               the RAG service's model server failed (``status``: HTTP status)

    * also a ValueError, † also a RuntimeError: what callers caught before the tree existed.

The same fault raises the same class on every path: a damaged records.jsonl is a
RecordsFormatError whether `fourfold compare`, `fourfold score` or a reader of
``fourfold.rundir.runread`` finds it; a summary.json or meta.json that is not a JSON object is a
RunDirError for `check`, `score` and `compare` alike. The modules that raise a class re-export it
(``from fourfold.reports.records import RecordsFormatError`` keeps working); the CLI re-exports
the tree.

Not in the tree, on purpose: exceptions that never leave the code that raises them. A server's
bad request becomes its HTTP error answer (``fourfold.targets.sim.httpio.HttpParseError``,
``fourfold.targets.sim.wire.WireError``, ``fourfold.targets.rag.server.BadRequest``); the rest are private
control flow (``fourfold.client.transport`` retries a ``fourfold.client.h1wire.StaleConnection`` on a fresh
connection; ``fourfold.levels.runtime._RequestFailed``, ``fourfold.reports.cache._Uncacheable``). Bad input
from a server under test is never an exception here at all: it is a record's ``error_class``.
"""

from __future__ import annotations

import re
import sys
from typing import IO, ClassVar


class FourfoldError(Exception):
    """Base of every error fourfold raises on purpose; ``exit_code`` is the process's exit status."""

    exit_code: ClassVar[int] = 1

    def show(self, file: IO[str] | None = None) -> None:
        """Print ``fourfold: error: <message>`` (to stderr unless ``file`` is given)."""
        print(f"fourfold: error: {self}", file=sys.stderr if file is None else file)


class UsageError(FourfoldError):
    """Wrong arguments or input the user can fix; the message says what and how, on one line: a
    control character or lone surrogate in it (a file name, a value the user typed) is shown escaped,
    so the line stays one line and prints on any terminal."""

    exit_code = 2

    def __str__(self) -> str:
        return _UNPRINTABLE.sub(lambda m: ascii(m.group())[1:-1], super().__str__())


_UNPRINTABLE = re.compile("[\x00-\x1f\x7f\ud800-\udfff]")


class GateFailed(FourfoldError):
    """An SLO, a quality floor or a probe's threshold was missed."""

    exit_code = 3


# ---- usage: specs, names and files the user gave ----

class SLOSpecError(UsageError, ValueError):
    """A malformed SLO spec or SLO file (the message names the clause or key)."""


class UnknownDialect(UsageError, ValueError):
    """A dialect name that is not registered; the message lists the valid ones."""


class RunDirError(UsageError):
    """A run directory, or a file in it, that cannot be read; the message names the file and what is wrong."""


class RecordsFormatError(RunDirError, ValueError):
    """records.jsonl holds a line that is JSON but not a fourfold record (message: file, line, problem)."""


class SchemaError(RunDirError, ValueError):
    """A record or a run directory written by a newer fourfold than the one reading it."""


class ProfileError(UsageError, ValueError):
    """A simulator profile name, file or override that cannot be used (the message says why)."""


class FaultError(UsageError, ValueError):
    """A fault name, rate or parameter that cannot be used (the message lists the valid ones)."""


class ScriptError(UsageError, ValueError):
    """A session script that cannot be used (the message names the script and the field)."""


class DatasetError(UsageError, ValueError):
    """A dataset file that cannot be used (the message names the file, the line and what is wrong)."""


class OptionError(UsageError, ValueError):
    """An option value that cannot be used (negative, NaN, out of range; the message names the option)."""


class SplitError(UsageError, ValueError):
    """An A/B split that cannot be read (the message shows the accepted forms)."""


# ---- the environment: models and embedded targets ----

class ModelUnavailable(FourfoldError):
    """The embedding model (or the library that runs it) is not installed; the message says what to
    install."""


class TargetStartError(FourfoldError, RuntimeError):
    """An embedded target did not print its listening line in time (the message includes its stderr)."""


class SimulatorStartError(TargetStartError):
    """The LLM simulator did not start."""


class RagServiceStartError(TargetStartError):
    """The reference RAG service did not start."""


class UpstreamError(FourfoldError):
    """The RAG service's model server failed: ``status`` is its HTTP status, or 502 when it could
    not be reached or its stream broke."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status

    def __reduce__(self) -> tuple[type[UpstreamError], tuple[int, str]]:
        return type(self), (self.status, str(self))


__all__ = [
    "DatasetError",
    "FaultError",
    "FourfoldError",
    "GateFailed",
    "ModelUnavailable",
    "OptionError",
    "ProfileError",
    "RagServiceStartError",
    "RecordsFormatError",
    "RunDirError",
    "SLOSpecError",
    "SchemaError",
    "ScriptError",
    "SimulatorStartError",
    "SplitError",
    "TargetStartError",
    "UnknownDialect",
    "UpstreamError",
    "UsageError",
]
