"""Content-Encoding of a response body, undone piece by piece.

fourfold asks for ``Accept-Encoding: identity``, but gateways and proxies that compress every
``text/*`` type send a gzip'd event stream anyway. httpx's ``iter_raw`` and fourfold's own transport
hand over the bytes as they came, so :func:`decode_pieces` undoes gzip / deflate per received piece
(one ``zlib`` decompressor across the pieces): each piece's decoded bytes keep that piece's receive
time, so TTFT and ITL stay the times the compressed bytes arrived. An encoding fourfold cannot
decode (``br``, ``zstd``), or bytes that do not decompress, make the response a ``malformed_stream``;
a body that inflates past the response cap (``StreamLimits.max_response_bytes``, 16 MiB, as for raw
bytes) is ``too_large``, inflated no further than the cap.
"""

from __future__ import annotations

import sys
import zlib

IDENTITY = ("", "identity")


def decode_pieces(pieces: list[bytes], content_encoding: str,
                  max_bytes: int | None = None) -> tuple[list[bytes], str, str]:
    """``(decoded pieces, "", "")``; or, when the encoding cannot be undone, ``(pieces,
    "malformed_stream", why)``; or, when the decoded body would pass ``max_bytes`` (a compression
    bomb: zeros inflate ~1000x), ``(the decoded pieces up to the cap, "too_large", why)``: no more
    than ``max_bytes`` is ever inflated."""
    encoding = content_encoding.strip().lower()
    if encoding in IDENTITY:
        return pieces, "", ""
    if encoding in ("gzip", "x-gzip"):
        decoder = zlib.decompressobj(16 + zlib.MAX_WBITS)
    elif encoding == "deflate":
        decoder = None        # zlib-wrapped (RFC 9110) or, from some servers, raw deflate: see below
    else:
        return pieces, "malformed_stream", f"unsupported Content-Encoding {encoding[:40]!r}"
    cap = sys.maxsize - 1 if max_bytes is None else max_bytes
    out: list[bytes] = []
    total = 0
    try:
        for piece in pieces:
            if decoder is None:    # deflate: the first bytes tell zlib-wrapped from raw
                decoder = zlib.decompressobj(zlib.MAX_WBITS if piece[:1] == b"\x78" else -zlib.MAX_WBITS)
            data = decoder.decompress(piece, cap - total + 1)   # one byte past the room left: over the cap
            out.append(data)
            total += len(data)
            if total > cap:
                break
        else:
            if decoder is not None and out:
                tail = decoder.flush()
                out[-1] += tail
                total += len(tail)
    except zlib.error as exc:
        return pieces, "malformed_stream", f"Content-Encoding {encoding!r}: body does not decompress ({exc})"
    if total > cap:                   # the excess is all in the last piece (its data, or the flush)
        out[-1] = out[-1][:len(out[-1]) - (total - cap)]
        return out, "too_large", f"decoded ({encoding}) body passed {cap} bytes"
    return out, "", ""
