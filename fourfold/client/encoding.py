"""Content-Encoding of a response body, undone piece by piece.

fourfold asks for ``Accept-Encoding: identity``, but gateways and proxies that compress every
``text/*`` type send a gzip'd event stream anyway. httpx's ``iter_raw`` and fourfold's own transport
hand over the bytes as they came, so :func:`decode_pieces` undoes gzip / deflate per received piece
(one ``zlib`` decompressor across the pieces): each piece's decoded bytes keep that piece's receive
time, so TTFT and ITL stay the times the compressed bytes arrived. An encoding fourfold cannot
decode (``br``, ``zstd``), or bytes that do not decompress, make the response a ``malformed_stream``;
a body that inflates past the response cap (``StreamLimits.max_response_bytes``, 16 MiB, as for raw
bytes) is
``too_large``, inflated no further than the cap.
"""

from __future__ import annotations

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
    out: list[bytes] = []
    total = 0
    try:
        for piece in pieces:
            if decoder is None:    # deflate: the first bytes tell zlib-wrapped from raw
                decoder = zlib.decompressobj(zlib.MAX_WBITS if piece[:1] == b"\x78" else -zlib.MAX_WBITS)
            if max_bytes is None:
                data = decoder.decompress(piece)
            else:                  # one byte past the room left tells "over the cap" (0 would mean no cap)
                data = decoder.decompress(piece, max_bytes - total + 1)
            total += len(data)
            if max_bytes is not None and total > max_bytes:
                out.append(data[:len(data) - (total - max_bytes)])
                return out, "too_large", f"decoded ({encoding}) body passed {max_bytes} bytes"
            out.append(data)
        if decoder is not None:
            tail = decoder.flush()
            if max_bytes is not None and total + len(tail) > max_bytes:
                tail = tail[:max_bytes - total]
                if out:
                    out[-1] += tail
                return out, "too_large", f"decoded ({encoding}) body passed {max_bytes} bytes"
            if tail and out:
                out[-1] += tail
    except zlib.error as exc:
        return pieces, "malformed_stream", f"Content-Encoding {encoding!r}: body does not decompress ({exc})"
    return out, "", ""
