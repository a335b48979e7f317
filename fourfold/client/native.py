"""The optional C steps of the read path (``fourfold/client/_hotpath.c``) and the Python code each
one mirrors, in the order a response meets them:

- :data:`drain`: the reactor's poll and kernel-stamped reads with each reader's bookkeeping
  (``Reactor.drain`` in :mod:`~fourfold.client.reactor`); twin: the Python loop over
  ``Reader.on_ready`` reading with ``socket.recvmsg``. Linux only.
- :data:`take_chunks`: the queued reads of a chunked body made of whole chunks with content
  (``RawStream._read_chunked`` in :mod:`~fourfold.client.h1body`); twin: that loop's
  ``ChunkedDecoder`` step, which takes every read.
- :data:`scan_events`: after the body has ended, its split into SSE events, the content template
  match, the strict UTF-8 decode and the crediting of each delta to its chunk
  (``JsonEventParser.feed_chunks`` in :mod:`~fourfold.client.dialects.jsonevents`); twin: the
  same loop in Python.
- :data:`offsets_ms`: the counted chunks' offsets in ms, rounded as ``round(x, 3)``; twin:
  :func:`offsets_ms_py`.

``setup.py`` compiles ``_hotpath`` where a C compiler is found (``optional=True``: the install goes
on without it). Where it is missing, :data:`drain`, :data:`take_chunks` and :data:`scan_events`
are None and the Python code runs, :data:`offsets_ms` is :func:`offsets_ms_py`: same results,
slower. ``tests/unit/test_hotpath.py`` holds each C function against its Python twin.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

try:
    from fourfold.client import _hotpath  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - no C compiler at install time
    _hotpath = None

__all__ = ["drain", "offsets_ms", "offsets_ms_py", "scan_events", "take_chunks"]


def offsets_ms_py(times: list[int], counts: list[int], t0: int) -> list[float]:
    """Each counted chunk's offset from ``t0`` in ms, rounded to the microsecond."""
    return [round((t - t0) / 1e6, 3) for t, n in zip(times, counts) if n]


offsets_ms: Callable[[list[int], list[int], int], list[float]] = (
    _hotpath.offsets_ms if _hotpath is not None else offsets_ms_py)
scan_events: Callable[..., Any] | None = _hotpath.scan_events if _hotpath is not None else None
# RawStream._read_chunked's whole-chunk step; None: the Python loop takes every piece
take_chunks: Callable[..., tuple[int, int, int]] | None = (
    _hotpath.take_chunks if _hotpath is not None else None)
# Reactor.drain's poll and reads (Linux); None: the Python loop over Reader.on_ready
drain: Callable[..., tuple[int, int]] | None = (
    getattr(_hotpath, "drain", None) if _hotpath is not None else None)
