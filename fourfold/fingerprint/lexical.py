"""A lexical measure that works for any script: character-bigram F1 against the references.

An embedding model that does not know a script (all-MiniLM-L6-v2 maps ~70 % of Chinese
characters to ``[UNK]``) cannot tell a paraphrase from an unrelated answer in it; counting the
characters an answer shares with its reference can. :func:`char_bigrams` keeps the letters and
digits of a text (``str.isalnum``: CJK characters count, punctuation and spaces do not),
lower-cased, and takes each adjacent pair (a one-character text is its own unigram);
:func:`char_f1` is the multiset F1 of two texts' bigrams; :func:`best_char_f1` the best over
several references (an answer has to match only one of them, as the similarity).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

__all__ = ["best_char_f1", "char_bigrams", "char_f1"]


def char_bigrams(text: str) -> Counter[str]:
    chars = [c for c in text.lower() if c.isalnum()]
    if len(chars) == 1:
        return Counter(chars)
    return Counter(a + b for a, b in zip(chars, chars[1:]))


def char_f1(answer: str, reference: str) -> float | None:
    """F1 of the two texts' character bigrams (multiset overlap); None when either has none."""
    a, r = char_bigrams(answer), char_bigrams(reference)
    total_a, total_r = sum(a.values()), sum(r.values())
    if not total_a or not total_r:
        return None
    overlap = sum((a & r).values())
    return 2.0 * overlap / (total_a + total_r)


def best_char_f1(answer: str, references: Sequence[str]) -> float | None:
    scores = [s for s in (char_f1(answer, ref) for ref in references) if s is not None]
    return max(scores) if scores else None
