"""Types of the compiled records scanner (reports/_records_scan.c, which documents each value)."""

def scan(
    block: bytes | bytearray | memoryview, start: int, columns: tuple[tuple[bytes, int], ...],
    extra_keys: tuple[bytes, ...], max_schema: int, /,
) -> tuple[bytes, tuple[list[str | None], ...], bytes, bytes, bytes, bytes, bytes, bytes]: ...
