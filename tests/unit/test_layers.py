"""Dependencies point down, and modules stay small (issue "The house", docs/architecture.md).

Every module under ``fourfold/`` is parsed with :mod:`ast` (never imported) and each of its
imports, including those inside functions and ``if TYPE_CHECKING:`` blocks, is checked against
the layer table below: a module may import its own layer and the layers it lists, nothing above.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import fourfold

PACKAGE_DIR = Path(fourfold.__file__).resolve().parent
OLD_TOP_LEVEL = ("measure", "levels", "reports", "fingerprint", "targets", "client", "workloads", "rundir", "gates")

# layer -> the fourfold layers it may import (besides itself); a layer is fourfold.<first name>
LAYERS: dict[str, frozenset[str]] = {
    "errors": frozenset(),
    "data": frozenset(),
    "adapters": frozenset(),                 # other libraries' insides (test_adapters.py): at the bottom
    "measure": frozenset({"errors", "data", "adapters"}),
    "workloads": frozenset({"errors", "data", "adapters", "measure"}),
    "rundir": frozenset({"errors", "data", "adapters", "measure", "workloads"}),
    "client": frozenset({"errors", "data", "adapters", "measure", "workloads", "rundir"}),
    "gates": frozenset({"errors", "data", "adapters", "measure", "workloads", "rundir", "client"}),
    "fingerprint": frozenset({"errors", "data", "adapters", "measure", "workloads", "rundir"}),
    "targets": frozenset({"errors", "data", "adapters", "fingerprint"}),
    "reports": frozenset({"errors", "data", "adapters", "measure", "workloads", "rundir", "gates", "fingerprint"}),
    "levels": frozenset({"errors", "data", "adapters", "measure", "workloads", "rundir", "client", "gates",
                         "fingerprint", "targets"}),
    "locustfiles": frozenset({"errors", "data", "levels"}),
    "cli": frozenset({"errors", "data", "adapters", "measure", "workloads", "rundir", "client", "gates",
                      "fingerprint", "targets", "reports", "levels", "locustfiles"}),
    "__main__": frozenset({"cli"}),
    "__init__": frozenset(),
}

MAX_LINES = 450
# module (relative to fourfold/) -> why it may be longer: the reason docs/architecture.md gives under
# "Module size"
LONG_MODULES: dict[str, str] = {}


def module_name(path: Path, root: Path = PACKAGE_DIR) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def layer_of(module: str) -> str:
    parts = module.split(".")
    if len(parts) == 1:                      # fourfold/__init__.py
        return "__init__"
    return parts[1]


def imported_modules(path: Path, root: Path = PACKAGE_DIR) -> list[tuple[int, str]]:
    """(line, absolute module name) of every import in ``path``; relative imports resolved."""
    module = module_name(path, root)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - (node.level - 1)]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            found.append((node.lineno, source))
            # `from fourfold import levels` imports fourfold.levels
            if source == "fourfold":
                found += [(node.lineno, f"fourfold.{alias.name}") for alias in node.names]
    return found


def violations(path: Path, root: Path = PACKAGE_DIR) -> list[str]:
    """What ``path`` (a module under ``root``, the fourfold package) imports that its layer may not."""
    layer = layer_of(module_name(path, root))
    allowed = LAYERS[layer] | {layer}
    where = path.relative_to(root.parent)
    found = []
    for lineno, name in imported_modules(path, root):
        top, _, rest = name.partition(".")
        if top in OLD_TOP_LEVEL:
            found.append(f"{where}:{lineno}: imports the old top-level package {name!r}; use fourfold.{name}")
        elif top == "fourfold" and rest:
            target = rest.split(".")[0]
            if target not in allowed:
                found.append(f"{where}:{lineno}: {layer} imports {name} ({target} is not below {layer})")
    return found


def modules() -> list[Path]:
    return sorted(PACKAGE_DIR.rglob("*.py"))


def test_every_module_has_a_layer() -> None:
    unknown = sorted({layer_of(module_name(p)) for p in modules()} - set(LAYERS))
    assert unknown == [], f"give these a row in LAYERS: {unknown}"


def test_no_module_imports_upward() -> None:
    found = [line for path in modules() for line in violations(path)]
    assert found == [], "\n".join(found)


# the checker itself, on small sources: each case must be caught (or let through) as stated
@pytest.mark.parametrize(("relative", "source", "expected"), [
    ("measure/x.py", "from fourfold.errors import UsageError\n", 0),
    ("measure/x.py", "def f():\n    from fourfold.levels import base\n", 1),
    ("measure/x.py", "import fourfold.reports.load\n", 1),
    ("measure/x.py", "from fourfold import reports\n", 1),
    ("measure/x.py", "from ..reports import load\n", 1),
    ("measure/x.py", "from . import sse\n", 0),
    ("client/dialects/x.py", "from .. import sse\n", 0),
    ("targets/x.py", "from fourfold.client.dialects import get_dialect\n", 1),
    ("targets/x.py", "from fourfold.fingerprint.embedder import Embedder\n", 0),
    ("errors.py", "import fourfold.data\n", 1),
    ("reports/x.py", "from measure.record import RequestRecord\n", 1),
    ("locustfiles/x.py", "from fourfold.levels import RagUser\n", 0),
    ("locustfiles/x.py", "from fourfold.measure import stats\n", 1),
    ("cli/x.py", "from fourfold.levels import base\nfrom fourfold.reports import load\n", 0),
])
def test_the_checker_catches_upward_imports(tmp_path: Path, relative: str, source: str,
                                            expected: int) -> None:
    root = tmp_path / "fourfold"
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(source, encoding="utf-8")
    assert len(violations(path, root)) == expected, violations(path, root)


def test_modules_stay_under_the_line_limit() -> None:
    long = {}
    for path in modules():
        lines = len(path.read_text(encoding="utf-8").splitlines())
        if lines > MAX_LINES:
            long[path.relative_to(PACKAGE_DIR).as_posix()] = lines
    unexplained = {name: n for name, n in long.items() if name not in LONG_MODULES}
    assert unexplained == {}, f"over {MAX_LINES} lines: split them by concept, or say why in " \
                              f"docs/architecture.md (Module size) and list them here"
    stale = sorted(set(LONG_MODULES) - set(long))
    assert stale == [], f"no longer over {MAX_LINES} lines: take them out of LONG_MODULES"


def test_every_long_module_is_explained_in_the_architecture_page() -> None:
    text = (Path(__file__).resolve().parents[2] / "docs" / "architecture.md").read_text(encoding="utf-8")
    section = " ".join(text.partition("\n## Module size\n")[2].partition("\n## ")[0].split())
    missing = [name for name, why in LONG_MODULES.items() if f"- `{name}`: {why}" not in section]
    assert missing == [], f"docs/architecture.md's 'Module size' section lacks the reason of {missing}"


def public_classes(root: Path = PACKAGE_DIR) -> dict[str, list[str]]:
    """class name -> the modules (relative to fourfold/) that define a public class of that name."""
    found: dict[str, list[str]] = {}
    for path in sorted(root.rglob("*.py")):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                found.setdefault(node.name, []).append(path.relative_to(root).as_posix())
    return found


def test_no_two_classes_share_a_name() -> None:
    """A class name means one thing in fourfold: `Settings` is the run's options, not also a report's."""
    shared = {name: where for name, where in public_classes().items() if len(where) > 1}
    assert shared == {}, f"rename one of each: {shared}"


def test_no_two_modules_share_a_name_across_the_client_side_rooms() -> None:
    """The rooms users look in (measure, workloads, rundir, client, gates, reports, fingerprint, levels)
    hold no two modules of one name: `sampler`, `sample` and `sampling` once meant three things."""
    rooms = ("measure", "workloads", "rundir", "client", "gates", "reports", "fingerprint", "levels")
    seen: dict[str, list[str]] = {}
    for room in rooms:
        for path in sorted((PACKAGE_DIR / room).rglob("*.py")):
            if path.name != "__init__.py":
                seen.setdefault(path.stem, []).append(path.relative_to(PACKAGE_DIR).as_posix())
    # rag: one concept seen from three sides (its measurements, its groundedness, its dialect);
    # base: a package's abstract base (the dialect contract, the Locust User)
    allowed = {"rag", "base"}
    shared = {stem: where for stem, where in seen.items() if len(where) > 1 and stem not in allowed}
    assert shared == {}, f"rename one of each: {shared}"
