"""The front door: README.md stays short and every command, path and link in it (and in docs/) is real.

- README.md has at most 200 lines, and the headline web-UI command sits near the top;
- its first code block is the two commands; the test one is exactly what ``.ci/run`` runs;
- every relative link in README.md and docs/*.md names an existing file (and an existing heading
  when it has a ``#fragment`` into a Markdown file); every docs page is linked from the README;
- every ``fourfold COMMAND`` in their code is a real subcommand, every level it names a real level;
- every locustfile they name exists.

The helpers are pure functions over text; the table-driven tests at the bottom check that they
catch what they are meant to catch.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from fourfold.cli import COMMANDS
from fourfold.levels.livequality import QUALITY_TAB_KEY
from fourfold.levels.webui import LEVEL_TAB_KEY, SLO_TAB_KEY, TAB_KEY
from fourfold.locustfiles import LOCUSTFILE_DIR, LOCUSTFILES

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").glob("*.md"))
MAX_README_LINES = 200

_FENCE = re.compile(r"^(```|~~~)")
_INLINE_CODE = re.compile(r"(`+)(.+?)\1")
_LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
# a command position: the start of a line or span, or after &&, ;, | or $( (a path before it is fine)
_COMMAND = re.compile(r"(?:^|&&|;|\||\$\()\s*(?:[\w.~/-]*/)?fourfold +([a-z][a-z-]*)"
                      r"(?: +([a-z0-9][a-z0-9-]*))?", re.MULTILINE)
_SHELL = {"bash", "sh", "shell", "console"}
_LOCUSTFILE_PATH = re.compile(r"(?<![\w/])locustfiles/([\w.-]+\.py)")
_LOCUSTFILE_NAME = re.compile(r"(?<![\w/.])(l[1-4]_[a-z_]+\.py)\b")


def fenced_blocks(text: str, languages: set[str] | None = None) -> list[list[str]]:
    """The lines of each fenced code block (``` or ~~~), in order; only those whose info string is
    one of ``languages`` when given."""
    blocks: list[list[str]] = []
    current: list[str] | None = None
    fence = language = ""
    for line in text.splitlines():
        stripped = line.strip()
        if current is None:
            match = _FENCE.match(stripped)
            if match:
                current, fence, language = [], match.group(1), stripped[3:].strip()
        elif stripped.startswith(fence):
            if languages is None or language in languages:
                blocks.append(current)
            current = None
        else:
            current.append(line)
    return blocks


def prose(text: str) -> str:
    """The text outside fenced code blocks and inline code spans (where Markdown links live)."""
    lines: list[str] = []
    inside = False
    for line in text.splitlines():
        if _FENCE.match(line.strip()):
            inside = not inside
            continue
        if not inside:
            lines.append(_INLINE_CODE.sub("", line))
    return "\n".join(lines)


def shell_code(text: str) -> str:
    """The lines of every shell code block (```bash ...), then every inline code span, one per line."""
    spans = [m.group(2).strip() for m in _INLINE_CODE.finditer(_outside_fences(text))]
    return "\n".join([line.strip() for block in fenced_blocks(text, _SHELL) for line in block] + spans)


def _outside_fences(text: str) -> str:
    lines, inside = [], False
    for line in text.splitlines():
        if _FENCE.match(line.strip()):
            inside = not inside
        elif not inside:
            lines.append(line)
    return "\n".join(lines)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = _INLINE_CODE.sub(lambda m: m.group(2), heading.strip().lstrip("#").strip()).lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(text: str) -> set[str]:
    return {slug(line) for line in _outside_fences(text).splitlines() if re.match(r"#{1,6} ", line)}


def broken_links(page: Path) -> list[str]:
    """Relative links of one Markdown page whose file (or heading, for a ``#fragment``) is missing."""
    problems = []
    text = page.read_text(encoding="utf-8")
    for target in _LINK.findall(prose(text)):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):         # http:, https:, mailto:
            continue
        path_part, _, fragment = target.partition("#")
        resolved = (page.parent / path_part).resolve() if path_part else page
        if not resolved.exists():
            problems.append(f"{page.name}: {target} (no such file)")
        elif fragment and resolved.suffix == ".md" and fragment not in anchors(resolved.read_text("utf-8")):
            problems.append(f"{page.name}: {target} (no such heading)")
    return problems


def commands_named(text: str) -> list[tuple[str, str | None]]:
    """(subcommand, its first argument or None) for every ``fourfold SUBCOMMAND`` in command position
    in shell code blocks and inline code (not in program output, comments or prose)."""
    return [(m.group(1), m.group(2)) for m in _COMMAND.finditer(shell_code(text))]


def locustfiles_named(text: str) -> set[str]:
    """``locustfiles/<name>.py`` paths, and bare ``lN_<name>.py`` names on the same line as one
    (a table row: `locustfiles/l2_gateway.py`, `l2_open_loop.py`)."""
    named = set()
    for line in text.splitlines():
        paths = _LOCUSTFILE_PATH.findall(line)
        named |= {f"locustfiles/{name}" for name in paths + (_LOCUSTFILE_NAME.findall(line) if paths else [])}
    return named


def ci_commands(script: str) -> list[str]:
    """The top-level commands of ``.ci/run`` that set up and run the tests (venv, pip, .ci/tests)."""
    return [line.strip() for line in script.splitlines()
            if re.match(_ENV_PREFIX + r"(python3 -m venv|\.venv/bin/pip |\.ci/tests\b)", line.strip())]


# environment assignments before a command (CMAKE_ARGS="..." .venv/bin/pip ...: llama.cpp's build flags)
_ENV_PREFIX = r"""(?:[A-Z_][A-Z0-9_]*=(?:"[^"]*"|'[^']*'|\S+) +)*"""


def program(command: str) -> str:
    """The program a command line runs, past any ``NAME=value`` assignments before it."""
    return next(word for word in shlex.split(command) if not re.match(r"[A-Z_][A-Z0-9_]*=", word))


# ----------------------------------------------------------------------------- the repository's docs

def _readme() -> str:
    return README.read_text(encoding="utf-8")


def test_readme_is_short() -> None:
    lines = _readme().splitlines()
    assert len(lines) <= MAX_README_LINES, f"README.md has {len(lines)} lines; move detail into docs/"


def test_headline_web_ui_command_near_the_top() -> None:
    lines = _readme().splitlines()
    first = next(i for i, line in enumerate(lines) if "locust -f locustfiles/l3_rag.py" in line)
    assert first < 40, f"the headline command first appears at line {first + 1}"
    assert any('locust -f "$(fourfold locustfile l3)"' in line for line in lines[:40])


def test_first_code_block_is_set_up_and_run_then_set_up_and_test() -> None:
    block = [line for line in fenced_blocks(_readme())[0] if line.strip()]
    assert len(block) == 2, block
    main_job, tests = (line.split(" && ") for line in block)
    ci = ci_commands((ROOT / ".ci" / "run").read_text(encoding="utf-8"))
    assert [program(c) for c in ci] == ["python3", ".venv/bin/pip", ".ci/tests"], ci
    assert tests == ci, "README's test command must be exactly what .ci/run runs"
    assert main_job[0] == ci[0]
    pip = shlex.split(main_job[1])
    assert pip[:2] == [".venv/bin/pip", "install"] and "-c" in pip
    assert pip[pip.index("-c") + 1] == "constraints-cpu.txt"
    assert (ROOT / "constraints-cpu.txt").is_file()
    assert main_job[-1] == ".venv/bin/fourfold demo"



def test_cpu_torch_advice_installs_into_the_venv() -> None:
    """The CPU-torch line runs before either README line, so it makes ``.venv`` itself and uses its pip
    (a bare ``pip`` would put torch in whatever environment the shell has)."""
    advice = [line for line in shell_code(_readme()).splitlines() if "download.pytorch.org/whl/cpu" in line]
    assert advice, "README.md no longer says how to get CPU-only torch"
    for line in advice:
        steps = line.split(" && ")
        assert steps[0] == "python3 -m venv .venv", line
        pip = shlex.split(steps[1])
        assert pip[:3] == [".venv/bin/pip", "install", "torch==2.13.0"], line
        assert pip[pip.index("--index-url") + 1] == "https://download.pytorch.org/whl/cpu"
    pin = (ROOT / "constraints-cpu.txt").read_text(encoding="utf-8")
    assert "torch==2.13.0" in pin.splitlines()
    assert [line for line in pin.splitlines() if "pip install" in line and ".venv/bin/pip" not in line] == []


def test_every_web_ui_tab_has_its_address_in_the_docs() -> None:
    """Each tab fourfold adds to Locust's web UI opens at ``/?tab=KEY``; docs/webui.md gives every one,
    the README the LLM and LLM level tabs'."""
    webui = (ROOT / "docs" / "webui.md").read_text(encoding="utf-8")
    keys = [TAB_KEY, SLO_TAB_KEY, LEVEL_TAB_KEY, QUALITY_TAB_KEY]
    assert [key for key in keys if f"`/?tab={key}`" not in webui] == []
    assert "`/?tab=llm`" in _readme() and "`/?tab=level`" in _readme()

@pytest.mark.parametrize("page", [README, *DOCS], ids=lambda p: p.name)
def test_relative_links_resolve(page: Path) -> None:
    assert broken_links(page) == []


def test_every_docs_page_is_linked_from_the_readme() -> None:
    linked = {(ROOT / target.partition("#")[0]).resolve() for target in _LINK.findall(prose(_readme()))}
    assert [page.name for page in DOCS if page.resolve() not in linked] == []


@pytest.mark.parametrize("page", [README, *DOCS], ids=lambda p: p.name)
def test_every_fourfold_command_exists(page: Path) -> None:
    named = commands_named(page.read_text(encoding="utf-8"))
    if page == README:
        assert {"demo", "locustfile", "run", "compare", "score", "check"} <= {name for name, _ in named}
    assert sorted({name for name, _ in named} - set(COMMANDS)) == []
    levels = {arg for name, arg in named if name in ("run", "locustfile") and arg}
    assert sorted(levels - set(LOCUSTFILES)) == []


@pytest.mark.parametrize("page", [README, *DOCS], ids=lambda p: p.name)
def test_every_locustfile_named_exists(page: Path) -> None:
    named = locustfiles_named(page.read_text(encoding="utf-8"))
    if page == README:
        assert "locustfiles/l3_rag.py" in named and len(named) >= 6
    assert sorted(path for path in named if not (ROOT / path).is_file()) == []
    assert sorted(path for path in named if not (LOCUSTFILE_DIR / Path(path).name).is_file()) == []


# ----------------------------------------------------------------------------- the checkers themselves

@pytest.mark.parametrize(("text", "expected"), [
    ("```bash\na\nb\n```\nx\n~~~\nc\n~~~\n", [["a", "b"], ["c"]]),
    ("no code\n", []),
    ("```bash\na\n```\n```\nout\n```\n```python\nx\n```\n", [["a"], ["out"], ["x"]]),
    ("```\n~~~ inside\n```\n", [["~~~ inside"]]),
])
def test_fenced_blocks(text: str, expected: list[list[str]]) -> None:
    assert fenced_blocks(text) == expected


def test_fenced_blocks_of_a_language() -> None:
    assert fenced_blocks("```bash\na\n```\n```\nout\n```\n```sh\nb\n```\n", {"bash", "sh"}) == [["a"], ["b"]]


@pytest.mark.parametrize(("heading", "anchor"), [
    ("## Options", "options"),
    ("### What a comparison looks like", "what-a-comparison-looks-like"),
    ("## The simulator's sessions", "the-simulators-sessions"),
    ("## `fourfold demo` and L1/L2", "fourfold-demo-and-l1l2"),
    ("# Fingerprint: is the answer still as good?", "fingerprint-is-the-answer-still-as-good"),
])
def test_slug(heading: str, anchor: str) -> None:
    assert slug(heading) == anchor


def test_broken_links_finds_missing_files_and_headings(tmp_path: Path) -> None:
    (tmp_path / "other.md").write_text("# Other\n\n## Real heading\n", encoding="utf-8")
    page = tmp_path / "page.md"
    page.write_text("[ok](other.md) [ok](other.md#real-heading) [web](https://x.example/y.md)\n"
                    "[gone](missing.md) [bad](other.md#nope) [self](#top)\n\n# Top\n"
                    "`[in code](also-missing.md)`\n```\n[in a block](missing-too.md)\n```\n",
                    encoding="utf-8")
    assert broken_links(page) == \
        ["page.md: missing.md (no such file)", "page.md: other.md#nope (no such heading)"]


def test_commands_and_locustfiles_named() -> None:
    text = ("fourfold is prose, not a command. Run `fourfold demo --quick`, "
            "not `helm install fourfold x`, or\n"
            '```bash\n.venv/bin/fourfold compare runs/a runs/b\nlocust -f "$(fourfold locustfile l3)"\n'
            "locust -f locustfiles/l9_nope.py   # and l2_open_loop.py; same fourfold version\n"
            "cd /tmp && fourfold sim --port 0\n```\n"
            "```\nfourfold sessions (program output)\n```\n"
            "levels/l2_options.py is no locustfile\n")
    assert commands_named(text) == [("compare", "runs"), ("locustfile", "l3"), ("sim", None), ("demo", None)]
    assert locustfiles_named(text) == {"locustfiles/l9_nope.py", "locustfiles/l2_open_loop.py"}


def test_ci_commands() -> None:
    script = ("#!/usr/bin/env bash\nset -euo pipefail\n"
              "if x; then\n    $SUDO apt-get install -y chromium\nfi\n"
              "python3 -m venv .venv\n.venv/bin/pip install -q -e '.[test]'\n.venv/bin/ruff check fourfold\n"
              ".ci/tests\n")
    assert ci_commands(script) == ["python3 -m venv .venv", ".venv/bin/pip install -q -e '.[test]'",
                                   ".ci/tests"]
    flags = 'CMAKE_ARGS="-DA=OFF -DB=ON" .venv/bin/pip install -q -e .'
    assert ci_commands(script.replace(".venv/bin/pip install -q -e '.[test]'", flags))[1] == flags
    assert program(flags) == ".venv/bin/pip"
