"""Content-Encoding of a response body, undone piece by piece.

fourfold asks for ``Accept-Encoding: identity``, but gateways and proxies that compress every
``text/*`` type send a gzip'd event stream anyway. httpx's ``iter_raw`` and fourfold's own transport
hand over the bytes as they came, so :func:`decode_pieces` undoes gzip / deflate per received piece
(one ``zlib`` decompressor across the pieces): each piece's decoded bytes keep that piece's receive
time, so TTFT and ITL stay the times the compressed bytes arrived. An encoding fourfold cannot
decode (``br``, ``zstd``), or bytes that do not decompress, make the response a ``malformed_stream``.
"""

from __future__ import annotations

import zlib

IDENTITY = ("", "identity")


def decode_pieces(pieces: list[bytes], content_encoding: str) -> tuple[list[bytes], str]:
    """``(decoded pieces, "")``, or ``(pieces, why)`` when the encoding cannot be undone."""
    encoding = content_encoding.strip().lower()
    if encoding in IDENTITY:
        return pieces, ""
    if encoding in ("gzip", "x-gzip"):
        decoder = zlib.decompressobj(16 + zlib.MAX_WBITS)
    elif encoding == "deflate":
        decoder = None        # zlib-wrapped (RFC 9110) or, from some servers, raw deflate: see below
    else:
        return pieces, f"unsupported Content-Encoding {encoding[:40]!r}"
    out: list[bytes] = []
    try:
        for piece in pieces:
            if decoder is None:    # deflate: the first bytes tell zlib-wrapped from raw
                decoder = zlib.decompressobj(zlib.MAX_WBITS if piece[:1] == b"\x78" else -zlib.MAX_WBITS)
            out.append(decoder.decompress(piece))
        if decoder is not None:
            tail = decoder.flush()
            if tail and out:
                out[-1] += tail
    except zlib.error as exc:
        return pieces, f"Content-Encoding {encoding!r}: body does not decompress ({exc})"
    return out, ""
