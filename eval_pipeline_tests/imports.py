"""Every import in the package's modules, read from their source (nothing is imported):
what the layering tests check."""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

from eval_pipeline.paths import PROJECT_ROOT

PACKAGE = PROJECT_ROOT / "eval_pipeline"


@dataclass(frozen=True)
class Import:
    file: Path
    line: int
    module: str
    """The module imported, in full (`from a.b import c` counts as `a.b` and `a.b.c`)."""
    names: tuple[str, ...] = ()
    """For `from a.b import c, d`'s record of `a.b`: the names imported from it."""

    def __str__(self) -> str:
        return f"{self.file.relative_to(PROJECT_ROOT)}:{self.line} imports {self.module}"


def package_imports(under: Path = PACKAGE) -> list[Import]:
    """Every absolute import in every module below `under`, runtime and type-only alike."""
    found: list[Import] = []
    for file in sorted(under.rglob("*.py")):
        for node in ast.walk(ast.parse(file.read_bytes())):
            if isinstance(node, ast.Import):
                found += [Import(file, node.lineno, alias.name) for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = tuple(alias.name for alias in node.names)
                found.append(Import(file, node.lineno, node.module, names))
                found += [
                    Import(file, node.lineno, f"{node.module}.{alias.name}") for alias in node.names
                ]
    return found


def within(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def module_name(file: Path, root: Path = PROJECT_ROOT) -> str:
    """The dotted name of one of the package's module files (a package by its `__init__`)."""
    parts = file.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph(under: Path = PACKAGE, root: Path = PROJECT_ROOT) -> dict[str, set[str]]:
    """Each module of the package -> the package's modules it imports, anywhere in it (at
    module level, inside a function, or for type checking only). `from pkg import sub`
    imports the module `pkg.sub`, not `pkg`'s own code (else every package that imports
    its submodules would be a circle with each of them)."""
    modules = {module_name(file, root) for file in under.rglob("*.py")}
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for found in package_imports(under):
        if found.module not in modules:
            continue
        if found.names and all(f"{found.module}.{name}" in modules for name in found.names):
            continue
        graph[module_name(found.file, root)].add(found.module)
    for name, imported in graph.items():
        imported.discard(name)
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every set of two or more modules that import one another, directly or through
    others (the strongly connected components, Tarjan's algorithm), each sorted."""
    index: dict[str, int] = {}
    lowest: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = lowest[module] = len(index)
        stack.append(module)
        for imported in sorted(graph[module]):
            if imported not in index:
                visit(imported)
                lowest[module] = min(lowest[module], lowest[imported])
            elif imported in stack:
                lowest[module] = min(lowest[module], index[imported])
        if lowest[module] == index[module]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == module:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return sorted(found)
