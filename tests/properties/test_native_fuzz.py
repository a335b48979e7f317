"""Both C steps against their Python twins on random input (hypothesis and seeded damage): the records
scanner (reports/_records_scan.c) reads any number as ``json`` does and any damaged file as the
fallback does; the hot path (client/_hotpath.c) rounds any times and parses any body as the Python
loops do. The fixed cases are in tests/unit/test_records_native.py and test_hotpath.py; .ci/asan
runs all three files under AddressSanitizer."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fourfold.client import native as client
from fourfold.reports.records import read_record_table
from tests.unit.test_hotpath import same, vllm
from tests.unit.test_records_native import assert_same_table, awkward_records, needs_scanner, scanned_offsets

INT64 = st.integers(-(2**63), 2**63 - 1)
needs_hotpath = pytest.mark.skipif(client._hotpath is None, reason="fourfold.client._hotpath was not built")
# (absurd times in the damaged lines: measure.metrics casts them to int64, the reader drops them)
pytestmark = pytest.mark.filterwarnings("ignore:invalid value encountered in cast:RuntimeWarning")


@needs_scanner
@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.floats(allow_nan=False, allow_infinity=False),
                          st.integers(-10**20, 10**20),
                          st.decimals(allow_nan=False, allow_infinity=False, places=3).map(float)),
                max_size=40))
def test_numbers_parse_as_json_does(values):
    parsed = scanned_offsets(",".join(json.dumps(v) for v in values))
    expected = np.array([float(json.loads(json.dumps(v))) for v in values], dtype=np.float64)
    assert parsed.tobytes() == expected.tobytes()              # bit for bit, -0.0 included


@needs_scanner
@pytest.mark.parametrize("seed", range(24))
def test_damaged_lines_read_the_same(tmp_path, seed):
    """Random damage (a byte replaced, dropped or added in one line of ten): both paths give the
    same table, or both refuse the file the same way (a line that still parses as JSON but is no
    longer a record). Blocks of 16 KiB cut the ~50 KB file in four, so damage also falls next to
    a block's edge (smaller blocks cost ~10 ms each on both paths; the ordinary and awkward files
    above are read in blocks down to 700 bytes)."""
    rng = random.Random(seed)
    out = []
    for line in awkward_records():
        data = bytearray(line.encode())
        if data and rng.random() < 0.1:
            i = rng.randrange(len(data))
            op = rng.random()
            if op < 0.4:
                data[i] = rng.choice(b'"\\,:{}[]0123456789.eE-ntf \xff\x01')
            elif op < 0.7:
                del data[i]
            else:
                data.insert(i, rng.choice(b'"\\,:{}[]09.e-\xc3'))
        out.append(bytes(data))
    path = tmp_path / "records.jsonl"
    path.write_bytes(b"\n".join(out) + b"\n")
    results = []
    for native in (True, False):
        try:
            results.append(read_record_table(path, native=native, block_bytes=16384))
        except Exception as exc:  # noqa: BLE001 - compared below
            results.append(exc)
    native_result, fallback_result = results
    if isinstance(native_result, Exception) or isinstance(fallback_result, Exception):
        assert type(native_result) is type(fallback_result), (native_result, fallback_result)
        assert str(native_result) == str(fallback_result)
    else:
        assert_same_table(native_result, fallback_result)


@needs_hotpath
@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(-(2**66), 2**66) | INT64, min_size=1, max_size=6),
       INT64 | st.integers(-(2**70), 2**70))
def test_offsets_match_python_over_the_whole_int64_range_and_beyond(times: list[int], t0: int) -> None:
    """``t - t0`` overflows int64 where Python's ints do not: the C step then computes as Python."""
    counts = [1] * len(times)
    assert client._hotpath.offsets_ms(list(times), counts, t0) == client.offsets_ms_py(times, counts, t0)


@needs_hotpath
@settings(max_examples=300, deadline=None)
@given(parts=st.lists(st.one_of(
    st.sampled_from([b"data: ", b"data:", b"\n\n", b"\n", b"{", b"}", b"[DONE]", b'"x"', b",", b" ", b'"',
                     b"\\", vllm("t"), vllm(""), vllm("\u00e9"), vllm("t")[:-2],
                     b'{"usage":{"completion_tokens":3}}', b'{"choices":[{"delta":{"content":1}}]}',
                     b'{"error":{"message":"boom"}}']),
    st.binary(max_size=6)), max_size=24), cut=st.integers(1, 9))
def test_random_bodies(parts: list[bytes], cut: int) -> None:
    raw = b"".join(parts)
    chunks = [raw[i:i + cut] for i in range(0, len(raw), cut)]
    with pytest.MonkeyPatch.context() as monkeypatch:
        same(chunks, monkeypatch, max_event_bytes=256)
