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
                found.append(Import(file, node.lineno, node.module))
                found += [
                    Import(file, node.lineno, f"{node.module}.{alias.name}") for alias in node.names
                ]
    return found


def within(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")
