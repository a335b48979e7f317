"""Are the two sides of a comparison comparable? What differs between their runs' meta.json (pure).

``fourfold compare`` reads each side's runs and, before any table, says what differs
(:func:`differences`, printed by :func:`render_lines`). Two kinds of difference:

- **sent**: what was sent to the target differs (the dataset's content hash, max tokens,
  streaming, ignore-EOS, users and spawn rate or the open-loop arrival process and rate, think
  time, duration, level and scenarios, dialect, endpoint, model). The sides then measured
  different workloads, and every row may differ for that reason alone: a loud warning.
- **setup**: where it ran differs (the target, the fourfold version, the client machine). Normal in
  a comparison (the target is what is compared), worth a note.

A side of several runs is compared as the set of its runs' values: a field whose values differ
*within* a side is reported too (its values shown as ``{a, b}``). A field that the metas of either
side lack (runs of older versions) is skipped. The facts come from the writer's side of
meta.json (``fourfold.levels.runtime.Runtime.meta``, ``fourfold.rundir.provenance``).

:func:`too_few_requests` is the small-sample check a row makes before it gives a verdict.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

SENT, SETUP = "sent", "setup"
MIN_REQUESTS = 30
HASH_SHOWN = 8                       # hex digits of a dataset hash shown
Reader = Callable[[dict[str, Any]], "tuple[Any, str] | None"]   # meta -> (value compared, value shown)


@dataclass(frozen=True)
class MetaDifference:
    """One meta.json field whose values differ between (or within) the sides."""

    field: str               # "dataset", "max tokens", "client CPU count", ...
    kind: str                # SENT or SETUP
    baseline: str            # the baseline's value, or its runs' values as "{a, b}"
    candidate: str


# ---- reading one meta.json: a field's value to compare (None: not known) and how it is shown ----
def _get(meta: dict[str, Any], *path: str) -> Any:
    value: Any = meta
    for key in path:
        if not isinstance(value, dict):
            return None
        value = value.get(key)
    return value


def _show(value: Any) -> str:
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, (list, tuple)):
        return ", ".join(_show(v) for v in value) if value else "none"
    return str(value)


def _key(value: Any) -> Any:
    """A hashable form of a JSON value (lists inside)."""
    if isinstance(value, list):
        return tuple(_key(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((k, _key(v)) for k, v in value.items()))
    return value


def _open_loop(meta: dict[str, Any]) -> bool:
    return _get(meta, "l2", "open_loop") is True


def _dataset(meta: dict[str, Any]) -> tuple[Any, str] | None:
    digest = meta.get("dataset_sha256")
    if not isinstance(digest, str) or not digest:
        return None
    name = meta.get("dataset_name")
    return digest, f"sha256 {digest[:HASH_SHOWN]}…" + (f" of {name}" if name else "")


def _max_tokens(meta: dict[str, Any]) -> tuple[Any, str] | None:
    settings = meta.get("settings")
    if not isinstance(settings, dict) or "max_tokens" not in settings:
        return None
    value = settings["max_tokens"]
    return value, "the items' own" if value is None else _show(value)


def _ignore_eos(meta: dict[str, Any]) -> Any:
    forced, never = _get(meta, "settings", "ignore_eos"), _get(meta, "settings", "no_ignore_eos")
    if forced is None and never is None:
        return None
    return "forced" if forced else "never" if never else "default"


def _arrivals(meta: dict[str, Any]) -> Any:
    arrivals = _get(meta, "l2", "arrivals")
    if not _open_loop(meta) or not isinstance(arrivals, dict):
        return None
    kind = arrivals.get("kind")
    return f"{kind} (burstiness {_show(arrivals.get('burstiness'))})" if kind == "gamma" else kind


def _target(meta: dict[str, Any]) -> Any:
    """An embedded target by what it is (its loopback URL changes from run to run), else the URL."""
    embedded = meta.get("embedded_target")
    if isinstance(embedded, dict):
        described = f"embedded simulator (profile {embedded.get('profile')}, seed {embedded.get('seed')})"
        rag = meta.get("embedded_rag_service")
        if isinstance(rag, dict):
            described += f" + RAG service ({rag.get('retriever')}, rerank {rag.get('rerank')})"
        return described
    return meta.get("target") or None


def _plain(fn: Callable[[dict[str, Any]], Any]) -> Reader:
    def read(meta: dict[str, Any]) -> tuple[Any, str] | None:
        value = fn(meta)
        return None if value is None else (_key(value), _show(value))
    return read


def _at(*path: str, unless_open_loop: bool = False, when_open_loop: bool = False,
        older: tuple[str, ...] = ()) -> Reader:
    """The value at ``path``, else at ``older`` (where older runs, or another level, keep it)."""
    def read(meta: dict[str, Any]) -> Any:
        if (unless_open_loop and _open_loop(meta)) or (when_open_loop and not _open_loop(meta)):
            return None
        value = _get(meta, *path)
        return _get(meta, *older) if value is None and older else value
    return _plain(read)


# field, kind, reader
FIELDS: tuple[tuple[str, str, Reader], ...] = (
    ("dataset", SENT, _dataset),
    ("max tokens", SENT, _max_tokens),
    ("streaming", SENT, _at("settings", "stream")),
    ("ignore EOS", SENT, _plain(_ignore_eos)),
    ("users", SENT, _at("locust", "users", unless_open_loop=True)),
    ("spawn rate", SENT, _at("locust", "spawn_rate", unless_open_loop=True)),
    ("arrival process", SENT, _plain(_arrivals)),
    ("arrival rate", SENT, _at("l2", "arrivals", "rate_rps", when_open_loop=True)),
    ("think time", SENT, _at("l2", "think_time_s", unless_open_loop=True)),
    ("L4 think scale", SENT, _at("l4", "think_scale")),
    ("L4 sessions per user", SENT, _at("l4", "sessions_per_user")),
    ("duration", SENT, _at("locust", "run_time")),
    ("level", SENT, _at("level")),
    ("scenarios", SENT, _at("scenarios")),
    ("dialect", SENT, _at("dialect")),
    ("endpoint", SENT, _at("endpoint", older=("rag", "wire", "path"))),
    ("model", SENT, _at("model")),
    ("target", SETUP, _plain(_target)),
    ("fourfold version", SETUP, _at("versions", "fourfold")),
    ("client hostname", SETUP, _at("client", "hostname")),
    ("client CPU model", SETUP, _at("client", "cpu_model")),
    ("client CPU count", SETUP, _at("client", "cpu_count")),
    ("client platform", SETUP, _at("client", "platform", older=("versions", "platform"))),
    ("client Python", SETUP, _at("client", "python", older=("versions", "python"))),
)


def _values(metas: Sequence[dict[str, Any]], read: Reader) -> dict[Any, str]:
    """The distinct values of one field over ``metas`` (value -> how the first run with it shows it)."""
    found: dict[Any, str] = {}
    for meta in metas:
        value = read(meta) if isinstance(meta, dict) else None
        if value is not None:
            found.setdefault(value[0], value[1])
    return found


def _side(values: dict[Any, str]) -> str:
    shown = list(values.values())
    return shown[0] if len(shown) == 1 else "{" + ", ".join(shown) + "}"


def differences(baseline_metas: list[dict[str, Any]],
                candidate_metas: list[dict[str, Any]]) -> list[MetaDifference]:
    """Every field of :data:`FIELDS` whose values differ between the sides or within one, in the
    table's order (sent before setup); a field either side's metas lack is skipped."""
    found = []
    for name, kind, read in FIELDS:
        baseline, candidate = _values(baseline_metas, read), _values(candidate_metas, read)
        if not baseline or not candidate:
            continue
        if len(baseline) == 1 and baseline.keys() == candidate.keys():
            continue
        found.append(MetaDifference(name, kind, _side(baseline), _side(candidate)))
    return found


def render_lines(diffs: Sequence[MetaDifference]) -> list[str]:
    """The terminal's and the report's lines: one warning for what was sent, one note for the setup."""
    lines = []
    for kind, opening in ((SENT, "warning: the sides sent different workloads: "),
                          (SETUP, "note: the sides ran on different setups: ")):
        parts = [f"{d.field} (baseline {d.baseline}, candidate {d.candidate})"
                 for d in diffs if d.kind == kind]
        if parts:
            lines.append(opening + "; ".join(parts))
    return lines


def too_few_requests(label: str, n: int, minimum: int = MIN_REQUESTS) -> str | None:
    """A line saying that ``label`` (a side, a group) has too few requests for a verdict, or None."""
    if n >= minimum:
        return None
    return (f"warning: {label} has {n} request{'' if n == 1 else 's'}, fewer than {minimum}: "
            "too few for a verdict")


__all__ = ["FIELDS", "MIN_REQUESTS", "SENT", "SETUP", "MetaDifference", "differences", "render_lines",
           "too_few_requests"]
