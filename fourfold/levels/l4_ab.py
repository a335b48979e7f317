"""Sticky A/B assignment (pure): which variant a user sees, for its whole life.

The article's roll-out (§4.3) sends a share of users to the candidate and keeps each user on the
same version. Here a user's variant is a function of its key and a seed only: the SHA-256 of
``"<seed>:<user key>"`` read as a number in [0, 1) is compared with the share of variant A. No
per-request randomness, no state: the same user key always lands on the same variant, on any
process or machine, and changing the seed reshuffles users without changing the proportions.

Variant ``A`` is the baseline (``--host``), ``B`` the candidate (``--ab-host``).
"""

from __future__ import annotations

import hashlib

from fourfold.errors import SplitError

VARIANTS = ("A", "B")


def parse_split(text: str | float) -> float:
    """The share of users on variant A: ``"0.95"``, ``"95/5"``, ``"50/50"``, ``"95%"`` -> 0.95, 0.95,
    0.5, 0.95."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        share = float(text)
    else:
        raw = str(text).strip()
        try:
            if "/" in raw:
                left, right = (float(part) for part in raw.split("/", 1))
                if left < 0 or right < 0 or left + right <= 0:
                    raise SplitError(raw)
                share = left / (left + right)
            elif raw.endswith("%"):
                share = float(raw[:-1]) / 100
            else:
                share = float(raw)
        except ValueError as exc:
            raise SplitError(f"--ab-split {raw!r}: expected the share of users on variant A as "
                             "0.95, 95%, or A/B weights such as 95/5 or 50/50") from exc
    if not 0.0 <= share <= 1.0:
        raise SplitError(f"--ab-split {text!r}: the share of variant A must be between 0 and 1")
    return share


def bucket(user_key: str, seed: int = 0) -> float:
    """The user's fixed position in [0, 1)."""
    digest = hashlib.sha256(f"{seed}:{user_key}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2.0**64


def assign_variant(user_key: str, share_a: float, seed: int = 0) -> str:
    """``"A"`` when the user's bucket falls below ``share_a``, else ``"B"``."""
    return VARIANTS[0] if bucket(user_key, seed) < share_a else VARIANTS[1]


__all__ = ["VARIANTS", "SplitError", "assign_variant", "bucket", "parse_split"]
