"""Tokenizing and sentence splitting for retrieval (pure).

One tokenizer serves the index, the queries and the re-ranker, so a word matches itself
everywhere: lower-cased runs of letters and digits, English stop words dropped, and a light
plural fold (``systems`` -> ``system``, ``cities`` -> ``city``). It is deliberately simple: the
corpus is English prose generated from templates, and BM25 only needs stable terms.
"""

from __future__ import annotations

import re

__all__ = ["STOPWORDS", "sentences", "stem", "tokenize"]

_WORD_RE = re.compile(r"[a-z0-9]+")
_SENTENCE_RE = re.compile(r"[^.!?]+(?:[.!?]+|$)")

STOPWORDS = frozenset("""
a an and are as at be been being but by can could did do does for from had has have how i if in
into is it its may of on or our so than that the their them then there these they this those to
was we were what when where which who whom whose why will with would you your about also per
""".split())


def stem(word: str) -> str:
    """Fold a plural to its singular (a light rule, not a real stemmer)."""
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


def tokenize(text: str) -> list[str]:
    """Index terms of ``text``, in order (repeats kept: BM25 counts them)."""
    return [stem(w) for w in _WORD_RE.findall(text.lower()) if w not in STOPWORDS]


def sentences(text: str) -> list[str]:
    """``text`` split after ``.``, ``!`` or ``?`` (a decimal point inside a number stays)."""
    protected = re.sub(r"(?<=\d)\.(?=\d)", "\0", text)
    found = [s.strip().replace("\0", ".") for s in _SENTENCE_RE.findall(protected)]
    return [s for s in found if s]
