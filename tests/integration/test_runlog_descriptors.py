"""RunWriter with every file descriptor of its process in use, in a process of its own: the spare
descriptor it set aside still writes the records and summary.json (the pure parts, the counted
losses and the retry, are in tests/unit/test_ledger.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

_EXHAUSTED = """
import errno, json, os, resource, sys
from fourfold.measure.record import RequestRecord
from fourfold.rundir.runlog import RunWriter
writer = RunWriter("full", sys.argv[1])
writer.prepare()
writer.append(RequestRecord(request_id="r0"))
resource.setrlimit(resource.RLIMIT_NOFILE, (256, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
try:
    while True:
        os.open(os.devnull, os.O_RDONLY)
except OSError as exc:
    assert exc.errno == errno.EMFILE
writer.flush()
writer.write_summary({"records": writer.records_written, "lost": writer.records_lost})
print(writer.run_dir)
"""


def test_summary_json_is_written_with_every_descriptor_in_use(tmp_path):
    """The real thing, in a process of its own (no pytest, no gevent hub needing a descriptor): the
    descriptor limit reached, then the records and summary.json."""
    done = subprocess.run([sys.executable, "-c", _EXHAUSTED, str(tmp_path)], capture_output=True, text=True,
                          timeout=30, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    run_dir = Path(done.stdout.strip())
    assert json.loads((run_dir / "summary.json").read_text()) == {"records": 1, "lost": 0}
    assert [json.loads(line)["request_id"]
            for line in (run_dir / "records.jsonl").read_text().splitlines()] == ["r0"]
