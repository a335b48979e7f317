"""Content-Encoding undone per received piece (fourfold.client.encoding)."""

from __future__ import annotations

import gzip
import zlib

from fourfold.client.encoding import decode_pieces

BODY = b"".join(b'data: {"choices":[{"delta":{"content":"w%d "}}]}\n\n' % i
                for i in range(50)) + b"data: [DONE]\n\n"


def _split(data: bytes, size: int) -> list[bytes]:
    return [data[i:i + size] for i in range(0, len(data), size)]


def test_gzip_pieces_decode_to_the_body_and_keep_one_piece_per_received_piece():
    pieces = _split(gzip.compress(BODY), 37)
    out, why = decode_pieces(pieces, "gzip")
    assert why == "" and b"".join(out) == BODY and len(out) == len(pieces)


def test_deflate_zlib_wrapped_and_raw_both_decode():
    raw = zlib.compressobj(wbits=-zlib.MAX_WBITS)
    raw_data = raw.compress(BODY) + raw.flush()
    for data in (zlib.compress(BODY), raw_data):
        out, why = decode_pieces(_split(data, 50), " Deflate ")
        assert why == "" and b"".join(out) == BODY


def test_identity_is_untouched_and_unknown_or_broken_encodings_say_why():
    assert decode_pieces([b"a", b"b"], "identity") == ([b"a", b"b"], "")
    pieces, why = decode_pieces([b"\x00\x01"], "br")
    assert pieces == [b"\x00\x01"] and why == "unsupported Content-Encoding 'br'"
    pieces, why = decode_pieces([b"not gzip at all"], "gzip")
    assert pieces == [b"not gzip at all"] \
        and why.startswith("Content-Encoding 'gzip': body does not decompress")
