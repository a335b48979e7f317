"""docs/architecture.md's map names exactly the modules that exist (issue "The house, round two").

The map is the page's first code block: a line that starts with ``name/`` at column 0 opens a
room of ``fourfold/``, one indented by two spaces opens a folder inside it; every ``x.py`` or
``x.c`` named on the lines below belongs to the folder open at that point (a name with a slash
is taken from ``fourfold/``).
"""

from __future__ import annotations

import re
from pathlib import Path

import fourfold

PACKAGE_DIR = Path(fourfold.__file__).resolve().parent
MAP_PAGE = Path(__file__).resolve().parents[2] / "docs" / "architecture.md"
FILE_NAME = re.compile(r"(?<![\w./])((?:[\w]+/)*[\w]+\.(?:py|c))\b")


def map_block(text: str) -> str:
    start = text.index("\n```\n") + 5
    return text[start:text.index("\n```", start)]


def named_modules(block: str) -> set[str]:
    """Paths relative to fourfold/ of every module the map names."""
    top = sub = ""
    named: set[str] = set()
    for line in block.splitlines():
        first = line.split(" ", 1)[0] if not line.startswith(" ") else ""
        if first.endswith("/"):
            top, sub = ("" if first == "fourfold/" else first), ""
        elif line.startswith("  ") and not line.startswith("   ") and line.split()[0].endswith("/"):
            sub = line.split()[0]
        for name in FILE_NAME.findall(line if not first.endswith("/") else line[len(first):]):
            named.add(name if "/" in name else top + sub + name)
    return named


def existing_modules(root: Path = PACKAGE_DIR) -> set[str]:
    found = {p.relative_to(root).as_posix() for p in root.rglob("*.py") if p.name != "__init__.py"}
    return found | {p.relative_to(root).as_posix() for p in root.rglob("*.c")}


def test_the_map_names_every_module() -> None:
    missing = sorted(existing_modules() - named_modules(map_block(MAP_PAGE.read_text(encoding="utf-8"))))
    assert missing == [], f"docs/architecture.md's map does not name: {missing}"


def test_the_map_names_nothing_that_does_not_exist() -> None:
    stale = sorted(named_modules(map_block(MAP_PAGE.read_text(encoding="utf-8"))) - existing_modules())
    assert stale == [], f"docs/architecture.md's map names modules that do not exist: {stale}"


def test_the_parser_reads_rooms_and_folders() -> None:
    block = "measure/       record.py (x), stats.py\n  dialects/    base.py\n" \
            "               more.py\ncli/           demo.py, see measure/rag.py\n"
    assert named_modules(block) == {"measure/record.py", "measure/stats.py", "measure/dialects/base.py",
                                    "measure/dialects/more.py", "cli/demo.py", "measure/rag.py"}
