"""Secrets: the credentials a run was configured with, kept out of everything the run writes.

A run's credentials are the ``--api-key`` (or ``FOURFOLD_API_KEY``) and the value of every
``--header`` the user did not mark public with ``--header-public``; for ``Bearer X``, ``Basic X``
(and ``Token``, ``ApiKey``, ``Key``) only the token X, so the scheme word stays readable. Each one
also counts in its JSON-escaped and URL-encoded forms, and a Basic token in its decoded
``user:password`` form (and the password).

:class:`Secrets` replaces them by ``***``:

- :meth:`Secrets.scrub` in one string: every occurrence of a secret, and every run of at least
  :data:`MIN_CHARS` characters that equals the *start* of one. The second rule is for text cut to
  a length somewhere fourfold cannot scrub first (a parser's 120-character excerpt of a bad
  event, a wire error's 32-character quote): the cut may end inside a key, and what is left of it
  is still removed; in a record's error_detail also 3 to 5 such characters that close a quoted
  excerpt (``b'...sk-p'``), so at most two characters of a key survive such a cut. fourfold's own
  cuts (error detail 512 chars, the 16 KiB text cap, the plan header's 256, a content type's 100)
  come after the scrub, so they cannot leave anything.
- :meth:`Secrets.scrub_record`: every string of a ``RequestRecord`` (text, error_detail,
  finish_reason, endpoint, ...) and every string and dict key nested in its dicts and lists
  (plan, server_timing names, extra), in place.
- :meth:`Secrets.scrub_obj`: the same over plain JSON-like data (``meta.json``).

Values shorter than :data:`MIN_CHARS` are no secrets here: replacing ``on`` or ``v2`` in every
answer would blank ordinary words (``meta.json`` still shows every configured header value as
``***``, whatever its length).

The process remembers every set built by :meth:`Secrets.configured` (:func:`known`): the
meta.json redaction and a client built without ``make_client`` scrub the same values.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import json
import re
import urllib.parse
from collections.abc import Iterable, Mapping
from typing import Any

from fourfold.measure.record import RequestRecord

REDACTED = "***"
MIN_CHARS = 6
_CUT_END_CHARS = 3        # fewer characters of a key closing a quoted excerpt are left as they are
CLIENT_ATTR = "fourfold_secrets"     # make_client attaches a run's Secrets to its httpx client here
_TOKEN_SCHEMES = frozenset({"bearer", "basic", "token", "apikey", "key"})
_SECRET_PARTS = ("api_key", "apikey", "authorization", "secret", "password", "passwd", "cookie",
                 "credential", "private_key", "bearer")


def is_secret_key(name: str) -> bool:
    """A field or header name that holds a credential: api_key, Authorization, *_token, *_key, ...
    (``-`` is read as ``_``; max_tokens, output_tokens and tokenizer are not)."""
    key = str(name).lower().replace("-", "_")
    return (key.endswith("token") or key.endswith("_key") or key == "auth" or key.endswith("_auth")
            or any(part in key for part in _SECRET_PARTS))


def credential_forms(value: str) -> list[str]:
    """What of one configured value must never be written: ``"Bearer X"`` gives X; each form also
    JSON-escaped and URL-encoded; a Basic token also decoded (``user:password``, and the password)."""
    value = value.strip()
    scheme, _, token = value.partition(" ")
    if token.strip() and scheme.lower() in _TOKEN_SCHEMES:
        value = token.strip()
        if scheme.lower() == "basic":
            try:
                decoded = base64.b64decode(value, validate=True).decode("utf-8")
            except (binascii.Error, ValueError):
                decoded = ""
            if decoded:
                return [*_escaped(value), *_escaped(decoded), *_escaped(decoded.partition(":")[2])]
    return _escaped(value)


def _escaped(value: str) -> list[str]:
    return [value, json.dumps(value, ensure_ascii=False)[1:-1], json.dumps(value)[1:-1],
            urllib.parse.quote(value, safe=""), urllib.parse.quote_plus(value)] if value else []


class Secrets:
    """A set of credential values and their removal from strings, records and JSON-like data."""

    __slots__ = ("_cut_end", "_heads", "_probes", "_repr_safe", "values")

    def __init__(self, values: Iterable[str] = ()) -> None:
        kept = {v for v in values if isinstance(v, str) and len(v) >= MIN_CHARS}
        self.values: tuple[str, ...] = tuple(sorted(kept, key=lambda v: (-len(v), v)))   # longest first
        grouped: dict[str, list[str]] = {}
        for value in self.values:
            grouped.setdefault(value[:MIN_CHARS], []).append(value)
        # (first MIN_CHARS characters, every secret that starts with them)
        self._probes = tuple((head, tuple(same)) for head, same in grouped.items())
        self._heads = tuple(grouped)
        # a probe that repr() writes as it is, in any string, can be looked for in repr(container) first
        self._repr_safe = all(c.isprintable() and c not in "'\"\\" for head in self._heads for c in head)
        # 3 to MIN_CHARS - 1 characters that begin a secret, closing a quoted excerpt (b'...KEY_S')
        starts = sorted({v[:n] for v in self.values for n in range(_CUT_END_CHARS, MIN_CHARS)}, key=len,
                        reverse=True)
        self._cut_end = (re.compile("(?:" + "|".join(map(re.escape, starts))
                                    + r""")(?=['"](?:$|[\s),:;.]))""") if starts else None)

    @classmethod
    def configured(cls, api_key: str = "", header_values: Iterable[str] = (),
                   public_values: Iterable[str] = ()) -> Secrets:
        """A run's credentials (the API key, the non-public ``--header`` values); remembered by the
        process (:func:`known`), like the ``--header-public`` values, which a client built without
        ``make_client`` then does not take for secrets by their header's name."""
        _PUBLIC.update(value.strip() for value in public_values)
        found: list[str] = []
        for raw in (api_key, *header_values):
            if raw:
                found += credential_forms(raw)
        secrets = cls(found)
        _remember(secrets)
        return secrets

    @classmethod
    def from_named_headers(cls, headers: Mapping[str, str]) -> Secrets:
        """The values of headers whose *name* says credential (:func:`is_secret_key`)."""
        found: list[str] = []
        for name, value in headers.items():
            if value and is_secret_key(name) and value.strip() not in _PUBLIC:
                found += credential_forms(value)
        return cls(found)

    def __bool__(self) -> bool:
        return bool(self.values)

    def __repr__(self) -> str:      # never the values themselves
        return f"Secrets({len(self.values)} values)"

    def __or__(self, other: Secrets) -> Secrets:
        if not other.values or set(other.values) <= set(self.values):
            return self
        if not self.values:
            return other
        return Secrets((*self.values, *other.values))

    # ---- scrubbing ----
    def scrub(self, text: str) -> str:
        """``text`` with every secret, and every run of >= MIN_CHARS characters that starts one,
        replaced by ``***`` (the same object when there was nothing to replace)."""
        if not self._found_in(text):
            return text
        for secret in self.values:              # whole ones first, longest first
            if secret in text:
                text = text.replace(secret, REDACTED)
        for probe, secrets in self._probes:     # then what is left of one (a cut)
            if probe in text:
                text = _redact_starts(text, probe, secrets)
        return text

    def scrub_record(self, record: RequestRecord) -> RequestRecord:
        """Every string of ``record``, nested ones and dict keys included, scrubbed in place."""
        if not self._probes:
            return record
        strings = [getattr(record, name) for name in _STRING_FIELDS]
        try:
            suspect = self._found_in("\0".join(strings))     # one search over all fields first
        except TypeError:                                    # a str field holding something else
            suspect = True
        if suspect:
            for name, value in zip(_STRING_FIELDS, strings):
                if value:
                    clean = self.scrub(value) if isinstance(value, str) else self.scrub_obj(value)
                    if clean is not value:
                        setattr(record, name, clean)
        if record.error_detail and self._cut_end is not None and isinstance(record.error_detail, str):
            # a parser's or the wire reader's excerpt, cut to a length before fourfold saw it
            record.error_detail = self._cut_end.sub(REDACTED, record.error_detail)
        for name in _NESTED_FIELDS:
            value = getattr(record, name)
            if value and self._may_hold(value):
                setattr(record, name, self.scrub_obj(value))
        return record

    def _found_in(self, text: str) -> bool:
        for head in self._heads:
            if head in text:
                return True
        return False

    def _may_hold(self, obj: Any) -> bool:
        """False only when no string in ``obj`` can hold a secret (its repr shows every string)."""
        if not self._repr_safe:
            return True
        try:
            return self._found_in(repr(obj))
        except (RecursionError, ValueError):
            return True

    def scrub_obj(self, obj: Any) -> Any:
        """``obj`` (str, or dicts/lists/tuples of anything) with every string and dict key
        scrubbed. Dicts and lists are changed in place; a tuple holding something to scrub comes
        back as a list. Iterative: a deep structure costs no recursion."""
        if not self._probes:
            return obj
        if isinstance(obj, str):
            return self.scrub(obj)
        if isinstance(obj, tuple):
            obj = list(obj)
        if not isinstance(obj, (dict, list)):
            return obj
        stack: list[dict[Any, Any] | list[Any]] = [obj]
        seen: set[int] = set()
        while stack:
            container = stack.pop()
            if id(container) in seen:
                continue
            seen.add(id(container))
            if isinstance(container, dict):
                for key in list(container):
                    value = container[key]
                    clean = self._leaf(value, stack)
                    new_key = self.scrub(key) if isinstance(key, str) else key
                    if new_key is not key:
                        del container[key]
                        container[new_key] = clean
                    elif clean is not value:
                        container[key] = clean
            else:
                for i, value in enumerate(container):
                    clean = self._leaf(value, stack)
                    if clean is not value:
                        container[i] = clean
        return obj

    def _leaf(self, value: Any, stack: list[Any]) -> Any:
        if isinstance(value, str):
            return self.scrub(value) if value else value
        if isinstance(value, tuple):
            value = list(value)
        if isinstance(value, (dict, list)):
            stack.append(value)
        return value


def _redact_starts(text: str, probe: str, secrets: tuple[str, ...]) -> str:
    """Replace every run in ``text`` that begins with ``probe`` and goes on as one of ``secrets``
    does (the longest such run)."""
    parts: list[str] = []
    start = 0
    i = text.find(probe)
    while i >= 0:
        n = len(probe)
        for secret in secrets:
            m, limit = len(probe), min(len(secret), len(text) - i)
            while m < limit and text[i + m] == secret[m]:
                m += 1
            n = max(n, m)
        parts += [text[start:i], REDACTED]
        start = i + n
        i = text.find(probe, start)
    parts.append(text[start:])
    return "".join(parts)


NO_SECRETS = Secrets()
_KNOWN: list[Secrets] = [NO_SECRETS]
_PUBLIC: set[str] = set()
_NAMED_CACHE: dict[tuple[tuple[str, str], ...], Secrets] = {}
_NUMERIC = frozenset({"bool", "int", "float", "int | None", "float | None", "bool | None", "list[float]"})
_STRING_FIELDS = tuple(f.name for f in dataclasses.fields(RequestRecord) if f.type == "str")
_NESTED_FIELDS = tuple(f.name for f in dataclasses.fields(RequestRecord)
                       if f.type != "str" and f.type not in _NUMERIC)


def _remember(secrets: Secrets) -> None:
    _KNOWN[0] = _KNOWN[0] | secrets


def known() -> Secrets:
    """Every credential configured in this process so far."""
    return _KNOWN[0]


def attach(client: Any, secrets: Secrets) -> Any:
    """Give ``client`` (an httpx client) the run's Secrets; :func:`for_request` finds them there."""
    setattr(client, CLIENT_ATTR, secrets)
    return client


def for_request(client: Any, request_headers: Mapping[str, str] | None = None) -> Secrets:
    """The secrets of one request: the client's (attached by ``make_client``; for a client built
    otherwise, the process's configured ones plus its credential-named headers), plus the values of
    credential-named headers the request itself adds."""
    secrets = getattr(client, CLIENT_ATTR, None)
    if secrets is None:
        headers = getattr(client, "headers", None) or {}
        secrets = known() | _named(dict(headers.items()))
        attach(client, secrets)
    return secrets | _named(request_headers) if request_headers else secrets


def _named(headers: Mapping[str, str]) -> Secrets:
    key = tuple(headers.items())
    found = _NAMED_CACHE.get(key)
    if found is None:
        if len(_NAMED_CACHE) > 256:
            _NAMED_CACHE.clear()
        found = _NAMED_CACHE[key] = Secrets.from_named_headers(headers)
    return found


__all__ = ["MIN_CHARS", "NO_SECRETS", "REDACTED", "Secrets", "attach", "credential_forms", "for_request",
           "is_secret_key", "known"]
