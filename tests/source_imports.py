"""The imports of every module under inference/, read once with ast, for tests/test_layout_rule.py and test_layout.py."""

from __future__ import annotations

import ast
from pathlib import Path

from inference.core.paths import PROJECT_ROOT

INFERENCE = PROJECT_ROOT / "inference"


def module_name(path: Path) -> str:
    parts = path.relative_to(PROJECT_ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in sorted(INFERENCE.rglob("*.py"))}


def absolute(node: ast.ImportFrom, importer: str) -> str:
    """The module a `from ... import` names, relative imports resolved against the importer."""
    if not node.level:
        return node.module or ""
    package = importer if MODULES[importer].name == "__init__.py" else importer.rpartition(".")[0]
    for _ in range(node.level - 1):
        package = package.rpartition(".")[0]
    return f"{package}.{node.module}" if node.module else package


def named(node: ast.Import | ast.ImportFrom, importer: str) -> set[str]:
    """`import a.b`'s a.b; `from a import b`'s a, and a.b too when b is a module of ours."""
    if isinstance(node, ast.Import):
        return {alias.name for alias in node.names}
    base = absolute(node, importer)
    return {base} | {f"{base}.{alias.name}" for alias in node.names if f"{base}.{alias.name}" in MODULES}


def with_packages(names: set[str]) -> set[str]:
    """Each module and the packages above it: importing a.b.c runs a's and a.b's __init__ first."""
    return {".".join(name.split(".")[: i + 1]) for name in names for i in range(name.count(".") + 1)}


def imports_of(path: Path, importer: str) -> tuple[set[str], list[tuple[int, str]]]:
    """(modules imported at module level, with their packages; [(line, module)] imported inside a function)."""
    module_level, in_functions = set(), []

    def visit(node, in_function: bool):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                names = named(child, importer)
                if in_function:
                    in_functions.extend((child.lineno, name) for name in sorted(names))
                else:
                    module_level.update(with_packages(names))
            visit(child, in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)))

    visit(ast.parse(path.read_text(), filename=str(path)), False)
    return module_level, in_functions


IMPORTS = {name: imports_of(path, name) for name, path in MODULES.items()}


def all_imports(name: str) -> set[str]:
    module_level, in_functions = IMPORTS[name]
    return module_level | {module for _, module in in_functions}
