"""The wheel as a new user gets it: built, installed (not editable) into a fresh virtualenv, and used
from an empty directory that is not the checkout.

The fresh venv borrows the test venv's third-party packages through a ``.pth`` line (so no package is
downloaded or copied again); a ``.pth`` line adds a folder to ``sys.path`` without running the
editable install's finder that lives there, and the fresh venv's own site-packages comes first, so
``import fourfold`` finds the installed wheel and nothing of the checkout.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.packaging.dockerfile import IMAGE_LOCUSTFILES, image_command

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.packaging]

USER_LOCUSTFILE = '''\
"""A user's own locustfile: fourfold's L1 user with a scenario name of its own."""
from locust import events

from fourfold import levels

events.init_command_line_parser.add_listener(levels.ThroughputUser.add_arguments)
events.init.add_listener(levels.ThroughputUser.register)


class MyThroughput(levels.ThroughputUser):
    scenario = "mine"
'''


def _run(command: list[str], cwd: Path, env: dict[str, str],
         timeout: float) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout,
                          check=False)
    assert proc.returncode == 0, \
        f"{' '.join(command)} exited {proc.returncode}\n{(proc.stdout + proc.stderr)[-4000:]}"
    return proc


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """(venv's bin folder, its site-packages, the wheel) for a wheel built from this checkout."""
    base = tmp_path_factory.mktemp("wheel")
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
          "-w", str(base / "dist"), str(REPO)], base, dict(os.environ), 600)
    wheel = next((base / "dist").glob("fourfold-*.whl"))
    venv = base / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", str(venv)], base, dict(os.environ), 120)
    python = venv / "bin" / "python"
    _run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "-q", str(wheel)],
         base, dict(os.environ), 300)
    site = Path(subprocess.check_output([str(python),
                                         "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                                        text=True).strip())
    (site / "_fourfold_test_deps.pth").write_text(sysconfig.get_path("purelib") + "\n")
    return venv / "bin", site, wheel


def _env(bin_dir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "LOCUST_HOST")}
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONUNBUFFERED"] = "1"
    return env


def _files(site: Path) -> set[str]:
    return {str(p.relative_to(site)) for p in site.rglob("*") if "__pycache__" not in p.parts}


def test_the_wheel_holds_one_package_with_its_data_and_extension(installed):
    _, _, wheel = installed
    names = zipfile.ZipFile(wheel).namelist()
    assert {name.split("/")[0] for name in names} == {"fourfold",
                                                      wheel.name.split("-")[0] + "-0.1.0.dist-info"}
    for expected in ("fourfold/data/prompts/prompts.jsonl", "fourfold/data/rag/corpus.jsonl",
                     "fourfold/data/rag/questions.jsonl", "fourfold/data/sessions/sessions.jsonl",
                     "fourfold/targets/profiles/baseline.json", "fourfold/locustfiles/l3_rag.py",
                     "fourfold/locustfiles/l1_throughput.py", "fourfold/data/datasets/sharegpt_sample.json",
                     "fourfold/data/datasets/sharegpt_sample.parquet",
                     "fourfold/data/datasets/openai_sample.jsonl",
                     "fourfold/data/datasets/trace_sample.jsonl", "fourfold/data/grafana/fourfold.json"):
        assert expected in names, expected
    for extension in ("fourfold/reports/_records_scan.", "fourfold/client/_hotpath."):
        assert any(n.startswith(extension) and n.endswith(".so") for n in names), extension


def test_installed_fourfold_is_the_wheel_not_the_checkout(installed, tmp_path):
    bin_dir, site, _ = installed
    code = ("import fourfold, fourfold.reports.recordlines as r, fourfold.client.native as n, "
            "fourfold.levels; print(fourfold.__file__); print(r._records_scan is not None); "
            "print(n.drain is not None); print(n._hotpath.__file__)")
    out = _run([str(bin_dir / "python"), "-c", code], tmp_path, _env(bin_dir), 120).stdout.split()
    assert Path(out[0]).is_relative_to(site) and out[1] == "True" and out[2] == "True"
    assert Path(out[3]).is_relative_to(site)          # the C steps of the wheel, not the checkout's
    located = _run([str(bin_dir / "fourfold"), "locustfile", "l3"], tmp_path,
                   _env(bin_dir), 60).stdout.strip()
    assert Path(located) == site / "fourfold" / "locustfiles" / "l3_rag.py"


def check_quick_demo(out: Path, stdout: str) -> None:
    """``fourfold demo --quick``: both simulator profiles, every level twice (interleaved), every run
    scored, the report in three formats and the article check, every row with an outcome. (The one
    quick demo of the suite: it runs here, from the installed wheel, given relative to a directory
    that is not the checkout.)"""
    for name in ("report.md", "report.html", "report.csv"):
        assert (out / name).is_file(), name
    runs = sorted(p.name.split("-demo-", 1)[1] for p in (out / "runs").iterdir())
    assert runs == sorted(f"{side}-{level}-{rep}" for side in ("baseline", "candidate")
                          for level in ("l1", "l2", "l3", "l4") for rep in (1, 2))
    assert all((path / "scores.jsonl").is_file() for path in (out / "runs").iterdir())   # all scored
    table = [line for line in stdout.splitlines() if line.startswith("| ") and "(ms)" in line]
    assert len(table) >= 10 and any(line.startswith("| TTFT p50 (ms) † |") for line in table)
    report = (out / "report.md").read_text()
    assert all(f"### {group}" in report for group in ("l1:saturation", "l2:closed", "l3:rag", "l4:session"))
    assert "similarity mean" in report and "rounds per session" in report and "retrieval recall@k" in report

    # the demo ends with the article check: the article's 14 rows, each with an outcome (the summary
    # line counts them), at most compliance (cut answers), telemetry... not measured by a quick demo
    check = stdout[stdout.index("## Article check"):]
    rows = [line for line in check.splitlines() if line.startswith("| ") and not line.startswith("| effect")]
    assert len(rows) == 14, check
    found = re.search(r"(\d+) of 14 rows reproduced .*?, (\d+) not reproduced, (\d+) not measured\.",
                      " ".join(check.split()))
    assert found, check
    reproduced, not_reproduced, not_measured = map(int, found.groups())
    assert reproduced + not_reproduced + not_measured == 14 and not_measured <= 4, check
    assert "HTML report: demo/report.html" in stdout
    page = (out / "report.html").read_text()
    assert "<h2>Article check</h2>" in page and "<pre>## Article check" not in page


@pytest.mark.timeout(900)        # the quick demo runs each profile and level twice
def test_demo_stock_and_own_locustfiles_run_from_an_empty_directory(installed, tmp_path):
    bin_dir, site, _ = installed
    env = _env(bin_dir)
    before = _files(site)
    work = tmp_path / "empty"
    work.mkdir()

    demo = _run([str(bin_dir / "fourfold"), "demo", "--quick", "--out", "demo"], work, env, 600)
    check_quick_demo(work / "demo", demo.stdout)

    stock = _run([str(bin_dir / "fourfold"), "locustfile", "l1"], work, env, 60).stdout.strip()
    _run([str(bin_dir / "python"), "-m", "locust", "-f", stock, "--headless", "-u", "2", "-r", "2",
          "-t", "4s", "--max-tokens", "8", "--label", "stock", "--only-summary"], work, env, 120)
    (work / "mine.py").write_text(USER_LOCUSTFILE)
    _run([str(bin_dir / "python"), "-m", "locust", "-f", "mine.py", "--headless", "-u", "2", "-r", "2",
          "-t", "4s", "--max-tokens", "8", "--label", "mine", "--only-summary"], work, env, 120)

    runs = {p.name.split("-", 2)[-1]: p for p in (work / "runs").iterdir()}
    assert set(runs) >= {"stock", "mine"}, sorted(runs)
    for label, scenario in (("stock", "saturation"), ("mine", "mine")):
        summary = json.loads((runs[label] / "summary.json").read_text())
        records = [json.loads(line) for line in (runs[label] / "records.jsonl").read_text().splitlines()]
        assert records and {r["scenario"] for r in records} == {scenario}
        assert sum(1 for r in records if r["error_class"] == "ok" and not r["warmup"]) >= 4, summary
        ok = sum(1 for r in records if r["error_class"] == "ok" and not r["warmup"])
        assert summary["total"]["ok"] == ok and summary["total"]["failures"] == 0
    gate = subprocess.run([str(bin_dir / "fourfold"), "check", str(runs["mine"].relative_to(work)), "--slo",
                           "ttft_p95<=1ms"], cwd=work, env=env, capture_output=True, text=True, timeout=120)
    assert gate.returncode == 3 and "ttft_p95" in gate.stdout, gate.stdout + gate.stderr  # a relative run dir
    assert _files(site) == before, "a command wrote into the installation"


def test_the_container_images_command_runs_from_an_unrelated_directory(installed, tmp_path):
    """The Dockerfile's ENTRYPOINT + CMD and ENV, as the image would run them (no daemon here): its
    locustfile link resolved to the installed package's folder, the run time cut to 4 s."""
    bin_dir, site, _ = installed
    argv, image_env = image_command(REPO / "Dockerfile")
    assert argv[0] == "locust"
    argv = [str(bin_dir / "python"), "-m", "locust", *argv[1:]]
    argv[argv.index("-t") + 1] = "4s"
    env = _env(bin_dir)
    env.update({k: v.replace(IMAGE_LOCUSTFILES, str(site / "fourfold" / "locustfiles"))
                for k, v in image_env.items()})
    assert Path(env["LOCUST_LOCUSTFILE"]).is_file()
    home = tmp_path / "home"
    home.mkdir()
    out = _run([*argv, "--max-tokens", "8"], home, env, 120)
    assert "Traceback" not in out.stdout + out.stderr
    [run] = list((home / "runs").iterdir())
    summary = json.loads((run / "summary.json").read_text())
    meta = json.loads((run / "meta.json").read_text())
    assert summary["total"]["ok"] >= 4 and summary["total"]["failures"] == 0, summary["total"]
    assert summary["records"] == len((run / "records.jsonl").read_text().splitlines())
    assert meta["embedded_target"]["profile"] == "baseline"      # no --host: the embedded simulator answered
