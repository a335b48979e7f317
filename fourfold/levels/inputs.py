"""Every input a run reads, checked before anything starts: option values and dataset files.

Bad input to fourfold itself is one ``fourfold: error: ...`` line and exit code 2, never a traceback,
and it comes before an embedded target starts, a run directory is made or a user runs (a run that
idles until ``-t`` with every user failing to start is the thing this prevents).

- ``check_or_exit(environment)`` (the ``init`` listener's first step, :mod:`fourfold.levels.hooks`):
  the options into :class:`fourfold.levels.options.Settings` (every number in its range,
  ``--header`` well formed), then each User class's ``check_inputs`` (its level's settings and
  every dataset it will read: prompts, L3 questions and corpus, L4 session scripts). A
  :class:`~fourfold.errors.UsageError` prints its line and exits 2.
- The web UI's start form can change options after that: :func:`guard_web_ui` checks a ``/swarm``
  request's values the same way before Locust applies them, and answers a bad one with the
  line as the form's error message (no test starts, no traceback).
"""

from __future__ import annotations

import argparse
from typing import Any
from urllib.parse import urlsplit

from flask import jsonify, request

from fourfold.client.dialects import RequestOptions, get_dialect
from fourfold.errors import OptionError, UsageError
from fourfold.levels.l4_options import SessionSettings
from fourfold.levels.options import Settings
from fourfold.workloads.items import Item
from fourfold.workloads.tokenizer import load_tokenizer

# --synthetic: the levels whose items are plain prompts; L3 needs questions with gold documents and
# references, L4 scripted conversations with goal facts, which synthetic text has neither of
SYNTHETIC_LEVELS = frozenset({"l1", "l2"})
NOT_SYNTHETIC = {"l3": "questions with gold documents", "l4": "scripted multi-turn sessions"}
# an item to build a request path from (check_host; never sent)
_PROBE_ITEM = Item(id="host-check", messages=({"role": "user", "content": "x"},))
# /swarm form fields Locust handles itself (not options of ours)
_LOCUST_FIELDS = frozenset({"user_count", "spawn_rate", "host", "user_classes", "run_time", "profile",
                            "shape_class"})


def check_options(options: Any, user_classes: list[Any]) -> Settings:
    """The run's Settings from ``options``, after every User class checked its inputs; raises
    :class:`UsageError` (a level's documented ValueError becomes an :class:`OptionError`)."""
    try:
        settings = Settings.from_options(options)
        SessionSettings.from_options(options)     # L4's options are registered for every level
        if settings.tokenizer:                    # all levels count with it (L3/L4 check their own datasets)
            load_tokenizer(settings.tokenizer)
        if any(getattr(cls, "level", "") != "l3" for cls in user_classes):   # L3's host is a RAG service
            check_host(getattr(options, "host", None), settings.dialect)
        seen: set[Any] = set()
        for cls in user_classes:
            check = getattr(cls, "check_inputs", None)
            if check is not None and check.__func__ not in seen:
                seen.add(check.__func__)
                check(options, settings)
            level = getattr(cls, "level", "")
            if settings.synthetic and level not in SYNTHETIC_LEVELS:
                raise OptionError(f"--synthetic is for L1 and L2 ({level.upper()} sends "
                                  f"{NOT_SYNTHETIC.get(level, 'its own items')}); drop it")
    except UsageError:
        raise
    except ValueError as exc:        # GatewaySettings, SessionSettings, RagSettings: ValueError when invalid
        raise OptionError(str(exc)) from None
    except OSError as exc:           # e.g. an @file.json template that cannot be read
        raise UsageError(f"{exc.filename}: cannot read ({exc.strerror or exc})") from None
    return settings


def check_host(host: str | None, dialect_name: str) -> None:
    """Refuse a ``--host`` whose path already holds the first segment of the dialect's request path
    (``http://h:8000/v1`` with ``/v1/chat/completions``: every request a 404 on ``/v1/v1/...``, as
    fast as the target can answer it). One line naming the URL to give instead."""
    path = urlsplit(host or "").path.rstrip("/")
    if not path:
        return
    dialect = get_dialect(dialect_name)
    sent = dialect.build(_PROBE_ITEM, RequestOptions()).path
    first = "/" + sent.lstrip("/").split("/", 1)[0]
    if path == first or path.endswith(first):
        fixed = host.rstrip("/")[:-len(first)] if host else ""
        raise OptionError(f"--host {host} ends in {first}, and the {dialect.name} dialect sends to {sent}: "
                          f"every request would go to {path}{sent}; give --host {fixed or '...'} "
                          f"({first} comes with the dialect)")


def check_or_exit(environment: Any) -> None:
    """``init``: check the options and datasets; on bad input print one line and exit 2.
    With a web UI, also guard its start form (:func:`guard_web_ui`)."""
    try:
        check_options(environment.parsed_options, list(environment.user_classes))
    except UsageError as exc:
        exc.show()
        raise SystemExit(exc.exit_code) from None
    web_ui = getattr(environment, "web_ui", None)
    if web_ui is not None:
        guard_web_ui(environment, web_ui)


def form_options(options: Any, form: Any) -> argparse.Namespace:
    """``options`` with a /swarm form's values applied as Locust applies them (a value keeps the
    option's type); :class:`OptionError` for a value that does not convert."""
    values = dict(vars(options)) if options is not None else {}
    for key, value in form.items():
        if key in _LOCUST_FIELDS or key not in values:
            continue
        current = values[key]
        if isinstance(current, bool):
            values[key] = value == "true"
        elif current is None or isinstance(current, str):
            values[key] = value
        elif not isinstance(current, list):      # (list options, --header, are not in the form)
            try:
                values[key] = type(current)(value)
            except (TypeError, ValueError):
                kind = {int: "an integer", float: "a number"}.get(type(current), type(current).__name__)
                raise OptionError(f"--{key.replace('_', '-')} {value!r}: expected {kind}") from None
    return argparse.Namespace(**values)


def guard_web_ui(environment: Any, web_ui: Any) -> None:
    """Answer a /swarm request whose options are bad with ``{"success": false, "message": line}``
    before Locust applies them (and, for a number that does not convert, before Locust's own
    conversion raises inside the request)."""

    def check_swarm() -> Any:
        if request.method != "POST" or not request.path.rstrip("/").endswith("/swarm"):
            return None
        try:
            check_options(form_options(environment.parsed_options, request.form),
                          list(environment.user_classes))
        except UsageError as exc:
            exc.show()
            return jsonify({"success": False, "message": f"fourfold: error: {exc}", "host": environment.host})
        return None

    web_ui.app.before_request(check_swarm)


__all__ = ["check_options", "check_or_exit", "form_options", "guard_web_ui"]
