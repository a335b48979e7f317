"""The Dockerfile against the checkout, without a container daemon: the base image is the Locust
version fourfold is tested with, every COPY'd path exists and is not ignored, fourfold goes in as a
wheel (never editable), torch comes from the CPU index at constraints-cpu.txt's pin, and the image's
locustfile is a stock one. (tests/packaging/test_wheel.py runs the image's command.)"""

from __future__ import annotations

import fnmatch
import re
import shlex
import tomllib

import locust
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from tests.conftest import REPO
from tests.packaging.dockerfile import IMAGE_LOCUSTFILES, image_command, stages

DOCKERFILE = REPO / "Dockerfile"


def _ignored() -> list[str]:
    lines = (REPO / ".dockerignore").read_text().splitlines()
    return [line.strip().rstrip("/") for line in lines if line.strip() and not line.startswith("#")]


def _is_ignored(path: str, patterns: list[str]) -> bool:
    parts = path.removeprefix("./").strip("/").split("/")
    prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    return any(fnmatch.fnmatch(p, pat) or fnmatch.fnmatch(p, pat.removeprefix("**/")) for p in prefixes
               for pat in patterns)


def test_every_stage_is_the_locust_image_fourfold_is_tested_with():
    bases = [rest.split()[0] for stage in stages(DOCKERFILE) for word, rest in stage if word == "FROM"]
    assert bases == [f"locustio/locust:{locust.__version__}"] * 2, bases
    [spec] = [d for d in tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
              if re.match(r"locust\b", d)]
    assert Version(locust.__version__) in SpecifierSet(spec.removeprefix("locust"))
    assert f"locustio/locust:{locust.__version__}" in (REPO / "docs" / "distributed.md").read_text()


def test_the_build_context_holds_what_is_copied_and_nothing_local():
    patterns = _ignored()
    for required in (".git", ".venv", "runs", "reports-out", "**/__pycache__"):
        assert required in patterns, required
    copied = [shlex.split(rest) for stage in stages(DOCKERFILE) for word, rest in stage
              if word == "COPY" and "--from=" not in rest]
    sources = [src for args in copied for src in args[:-1]]
    assert {"pyproject.toml", "setup.py", "fourfold", "constraints-cpu.txt"} <= set(sources), sources
    for src in sources:
        assert (REPO / src).exists(), src
        assert not _is_ignored(src, patterns), src
    for local in (".venv/bin/python", "runs/x/records.jsonl", "reports-out/r.md", ".git/HEAD",
                  "fourfold/__pycache__/cli.cpython-311.pyc",
                  "fourfold/reports/_records_scan.cpython-311.so"):
        assert _is_ignored(local, patterns), local


def test_fourfold_goes_in_as_a_wheel_with_cpu_torch_at_the_constraint_pin():
    build, final = stages(DOCKERFILE)
    runs = " && ".join(rest for word, rest in build if word == "RUN")
    assert re.search(r"pip wheel --no-deps \. -w /wheels", runs), runs
    installs = " && ".join(rest for word, rest in final if word == "RUN")
    assert ("--index-url https://download.pytorch.org/whl/cpu -r /tmp/constraints-cpu.txt" in installs
            and "-c /tmp/constraints-cpu.txt /wheels/fourfold-*.whl" in installs), installs
    assert installs.index("whl/cpu") < installs.index("/wheels/fourfold-"), "torch must come first"
    assert " -e " not in installs and "--editable" not in installs
    pins = [line for line in (REPO / "constraints-cpu.txt").read_text().splitlines()
            if line.strip() and not line.startswith("#")]
    assert pins and all(line.startswith("torch") for line in pins), pins  # all of it comes from the CPU index
    assert ("COPY", "--from=build /wheels /wheels") in final


def test_the_images_locustfile_is_a_stock_one_linked_from_the_package():
    _, final = stages(DOCKERFILE)
    argv, env = image_command(DOCKERFILE)
    assert argv[0] == "locust" and "-f" not in argv
    path = env["LOCUST_LOCUSTFILE"]
    assert path.startswith(IMAGE_LOCUSTFILES + "/")
    assert (REPO / "fourfold" / "locustfiles" / path.rsplit("/", 1)[1]).is_file()
    runs = " && ".join(rest for word, rest in final if word == "RUN")
    assert f'ln -s "$(dirname "$(fourfold locustfile l1)")" {IMAGE_LOCUSTFILES}' in runs
