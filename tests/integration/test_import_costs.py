"""What a process imports. The RAG service imports nothing of the load generator: importing its command,
launcher and server in a fresh interpreter leaves fourfold.measure and fourfold.fingerprint out of
sys.modules (the retrieval itself is tested in tests/unit/test_rag_retrieval.py). The command line
imports the module of the subcommand given, no other."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]


def test_targets_rag_does_not_import_measure():
    code = ("import sys, fourfold.targets.rag.cli, fourfold.targets.rag.launch, fourfold.targets.rag.server; "
            "print(sorted(m for m in sys.modules "
            "if m.startswith(('fourfold.measure', 'fourfold.fingerprint'))))")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_the_command_line_imports_only_the_subcommand_given():
    """``fourfold locustfile l3`` (what ``locust -f "$(fourfold locustfile l3)"`` runs) imports neither
    pandas nor Locust nor the report; ``fourfold compare --help`` imports the report, not Locust."""
    code = ("import sys, contextlib, io; from fourfold.cli import main; out = io.StringIO()\n"
            "with contextlib.redirect_stdout(out): status = main(sys.argv[1:])\n"
            "print(status, sorted(m for m in "
            "('pandas', 'locust', 'fourfold.reports.report', 'fourfold.cli.compare')"
            " if m in sys.modules))")
    def loaded(*args: str) -> str:
        return subprocess.run([sys.executable, "-c", code, *args], cwd=REPO, capture_output=True, text=True,
                              check=True).stdout.strip().splitlines()[-1]
    assert loaded("locustfile", "l3") == "0 []"
    help_out = subprocess.run([sys.executable, "-m", "fourfold", "compare", "--help"], cwd=REPO,
                              capture_output=True, text=True, check=True).stdout
    assert "--fail-on-worse" in help_out and "--min-effect" in help_out
    code_compare = ("import sys\nfrom fourfold import cli\ncli.build_parser(['compare'])\n"
                    "print(sorted(m for m in ('locust', 'fourfold.cli.compare', 'fourfold.cli.demo')"
                    " if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code_compare], cwd=REPO, capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == "['fourfold.cli.compare']"
