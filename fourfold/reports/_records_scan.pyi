"""Types of the compiled records scanner (reports/_records_scan.c, which documents each value)."""

def scan(
    block: bytes | bytearray | memoryview, start: int, columns: tuple[tuple[bytes, int], ...], tail: bytes,
    no_extra_tail: bytes, cut_key: bytes, offsets_key: bytes, text_key: bytes, text_end: bytes, mark1: bytes,
    mark2: bytes, /,
) -> tuple[bytes, tuple[list[str | None], ...], bytes, bytes, bytes, bytes, bytes, bytes, bytes, bytes]: ...
def parse_numbers(text: bytes | bytearray | memoryview, /) -> bytes: ...
