"""fourfold's own modules read as syntax trees, parsed and walked once per test process for every
test that reads the source (tests/unit/test_layers.py, test_adapters.py): ~240 modules, each parsed
and walked four times over before (2.2 s of the unit tests')."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

IMPORTS = (ast.Import, ast.ImportFrom)
FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)


@functools.cache
def _parsed(path: Path, size: int, mtime_ns: int) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def parsed(path: Path) -> ast.Module:
    """``path``'s syntax tree, parsed once for every check of this file (while it is unchanged)."""
    stat = path.stat()
    return _parsed(path, stat.st_size, stat.st_mtime_ns)


@functools.cache
def _walked(tree: ast.Module) -> tuple[ast.AST, ...]:
    return tuple(ast.walk(tree))


def nodes(path: Path) -> tuple[ast.AST, ...]:
    """Every node of ``path``'s tree, in ``ast.walk``'s order."""
    return _walked(parsed(path))


def imports(path: Path) -> list[ast.Import | ast.ImportFrom]:
    """Every import statement in ``path``, at any depth."""
    return [node for node in nodes(path) if isinstance(node, IMPORTS)]


def in_functions(path: Path) -> list[ast.Import | ast.ImportFrom]:
    """The imports of ``path`` that sit inside a function (a def's lines hold its whole body)."""
    spans = [(node.lineno, node.end_lineno or node.lineno) for node in nodes(path)
             if isinstance(node, FUNCTIONS)]
    return [node for node in imports(path) if any(first < node.lineno <= last for first, last in spans)]
