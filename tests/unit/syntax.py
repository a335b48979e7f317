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


@functools.cache
def _statements(tree: ast.Module) -> tuple[tuple[ast.stmt, bool], ...]:
    """Every statement of ``tree`` at any depth, with whether it sits inside a function. Only the
    statement lists are followed (an import is a statement), not the expressions: a tenth of the
    nodes ``ast.walk`` visits."""
    found: list[tuple[ast.stmt, bool]] = []
    stack: list[tuple[ast.AST, bool]] = [(tree, False)]
    while stack:
        node, inside = stack.pop()
        inner = inside or isinstance(node, FUNCTIONS)
        for name in ("body", "orelse", "finalbody", "handlers", "cases"):
            for child in getattr(node, name, ()) or ():
                if isinstance(child, ast.stmt):
                    found.append((child, inner))
                if isinstance(child, (ast.stmt, ast.ExceptHandler, ast.match_case)):
                    stack.append((child, inner))
    return tuple(found)


def imports(path: Path) -> list[ast.Import | ast.ImportFrom]:
    """Every import statement in ``path``, at any depth."""
    return [node for node, _ in _statements(parsed(path)) if isinstance(node, IMPORTS)]


def in_functions(path: Path) -> list[ast.Import | ast.ImportFrom]:
    """The imports of ``path`` that sit inside a function."""
    return [node for node, inside in _statements(parsed(path)) if inside and isinstance(node, IMPORTS)]
