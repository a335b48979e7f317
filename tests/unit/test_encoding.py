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
    out, error, why = decode_pieces(pieces, "gzip")
    assert error == why == "" and b"".join(out) == BODY and len(out) == len(pieces)


def test_deflate_zlib_wrapped_and_raw_both_decode():
    raw = zlib.compressobj(wbits=-zlib.MAX_WBITS)
    raw_data = raw.compress(BODY) + raw.flush()
    for data in (zlib.compress(BODY), raw_data):
        out, error, why = decode_pieces(_split(data, 50), " Deflate ")
        assert error == why == "" and b"".join(out) == BODY


def test_identity_is_untouched_and_unknown_or_broken_encodings_say_why():
    assert decode_pieces([b"a", b"b"], "identity") == ([b"a", b"b"], "", "")
    pieces, error, why = decode_pieces([b"\x00\x01"], "br")
    assert pieces == [b"\x00\x01"]
    assert (error, why) == ("malformed_stream", "unsupported Content-Encoding 'br'")
    pieces, error, why = decode_pieces([b"not gzip at all"], "gzip")
    assert pieces == [b"not gzip at all"] and error == "malformed_stream" \
        and why.startswith("Content-Encoding 'gzip': body does not decompress")


def test_a_compression_bomb_is_inflated_no_further_than_the_cap():
    bomb = gzip.compress(b"\0" * (64 << 20))                  # 64 MiB of zeros in ~64 KiB
    assert len(bomb) < 100_000
    cap = 1 << 20
    out, error, why = decode_pieces(_split(bomb, 4096), "gzip", cap)
    assert error == "too_large" and why == "decoded (gzip) body passed 1048576 bytes"
    assert sum(map(len, out)) == cap and set(b"".join(out)) == {0}


def test_a_body_exactly_at_the_cap_decodes_whole_and_one_byte_more_does_not():
    for encoding, compress in (("gzip", gzip.compress), ("deflate", zlib.compress)):
        out, error, why = decode_pieces(_split(compress(BODY), 64), encoding, len(BODY))
        assert (error, why) == ("", "") and b"".join(out) == BODY
        out, error, _ = decode_pieces(_split(compress(BODY), 64), encoding, len(BODY) - 1)
        assert error == "too_large" and b"".join(out) == BODY[:-1]
