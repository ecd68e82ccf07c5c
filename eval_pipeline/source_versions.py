"""Code versions derived from the source an asset runs, so editing it makes the asset stale.

A hand-written version string is only as current as the last person who remembered to bump
it. Here an asset's code version is a hash of the source of its adapter module and of every
module of this package that module imports, directly or through others, at module level or
inside a function (import statements are read from the text, nothing is executed). Editing a
scoring function therefore changes the scores' code version, and Dagster marks them, and
what is derived from them, stale.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import re
from collections.abc import Iterable
from functools import cache
from pathlib import Path

PACKAGE = "eval_pipeline"
PACKAGE_DIR = Path(__file__).resolve().parent
VERSION_CHARS = 16
"""Hex characters of the SHA-256 kept in a version (64 bits: no accidental collision)."""


class SourceVersionError(Exception):
    """A module named as an asset's source is not a module of this package."""


def module_file(name: str, package_dir: Path = PACKAGE_DIR) -> Path | None:
    """The file of module `name` of this package (None: not a module, e.g. a function)."""
    parts = name.split(".")
    if parts[0] != PACKAGE:
        return None
    # os.path, not pathlib: an asset's closure asks here about every name its modules
    # import (about 14,000 times a definitions load), and pathlib's parsing was most of
    # the code versions' cost in every process that loads the definitions.
    base = os.path.join(package_dir, *parts[1:])
    for candidate in (base + ".py", os.path.join(base, "__init__.py")):
        if os.path.isfile(candidate):
            return Path(candidate)
    return None


IMPORT_STATEMENT = re.compile(
    r"^[ \t]*(?:from[ \t]+(\.*)([\w.]*)[ \t]+import[ \t]+(\([^)]*\)|[^\n#;]*)"
    r"|import[ \t]+([^\n#;]*))",
    re.MULTILINE,
)
"""An import statement at the start of a line, at any indent (so inside functions too).
Read as text, not parsed: 60 times faster than `ast` over the package at every definitions
load, and the same modules on every file of it (a test compares the two); a line in a
string that looks like an import can only add a module, never hide one."""


def _imported(name: str, file: Path) -> set[str]:
    """Every module of this package that `file` (module `name`) imports, anywhere in it."""
    stat = file.stat()
    return _imported_in(name, file, stat.st_mtime_ns, stat.st_size)


@cache
def _imported_in(name: str, file: Path, _mtime_ns: int, _size: int) -> set[str]:
    """`_imported`, read once per file version (every adapter's closure shares modules)."""
    is_package = file.name == "__init__.py"
    found: set[str] = set()
    for match in IMPORT_STATEMENT.finditer(file.read_text(encoding="utf-8")):
        dots, module, names, plain = match.groups()
        if plain is not None:
            found.update(part.split(" as ")[0].strip() for part in plain.split(","))
            continue
        if dots:
            anchor = name.split(".")
            anchor = anchor[: len(anchor) - len(dots) + (1 if is_package else 0)]
            base = ".".join([*anchor, module] if module else anchor)
        else:
            base = module
        found.add(base)
        # `from package import module` imports the module too
        for part in names.strip("()").split(","):
            imported = part.split(" as ")[0].strip()
            if imported:
                found.add(f"{base}.{imported}")
    modules = {module for module in found if module.split(".")[0] == PACKAGE}
    parents = {parent for module in modules for parent in _parents(module)}
    return {m for m in modules | parents if m != name}


def _parents(module: str) -> list[str]:
    """The packages importing `module` runs first (a.b.c: a, then a.b)."""
    parts = module.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts))]


def import_closure(roots: Iterable[str], package_dir: Path = PACKAGE_DIR) -> dict[str, Path]:
    """The modules `roots` run: themselves and every package module they import, by name."""
    closure: dict[str, Path] = {}
    pending = list(roots)
    for root in roots:
        if module_file(root, package_dir) is None:
            raise SourceVersionError(f"{root!r} is not a module of the {PACKAGE} package")
        pending.extend(_parents(root))
    looked_up: set[str] = set()
    """Every name asked about in this walk, module or not: `from eval_pipeline.x import f`
    names `eval_pipeline.x.f`, which each module importing it would otherwise send to
    `module_file` again (about 800 look-ups an asset instead of about 200)."""
    while pending:
        name = pending.pop()
        if name in looked_up:
            continue
        looked_up.add(name)
        file = module_file(name, package_dir)
        if file is None:
            continue  # `from eval_pipeline.x import function`: x itself is in the set
        closure[name] = file
        pending.extend(_imported(name, file) - looked_up)
    return dict(sorted(closure.items()))


def source_version(*roots: str, package_dir: Path = PACKAGE_DIR) -> str:
    """SHA-256 (first 16 hex characters) over the names and bytes of `import_closure`."""
    return closure_version(import_closure(roots, package_dir))


def closure_version(closure: dict[str, Path]) -> str:
    hasher = hashlib.sha256()
    for name, file in closure.items():
        for part in (name.encode(), file.read_bytes()):
            hasher.update(len(part).to_bytes(8, "little"))
            hasher.update(part)
    return hasher.hexdigest()[:VERSION_CHARS]


def plugin_source_version(module: str) -> str:
    """SHA-256 (first 16 hex characters) over the source of the package a plugin's entry
    point module is in (the module alone when it is in no package): a world installed from
    another distribution runs code this package's import closure cannot see."""
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None or not spec.origin.endswith(".py"):
        raise SourceVersionError(f"plugin module {module!r} has no Python source to version")
    origin = Path(spec.origin)
    if (origin.parent / "__init__.py").is_file():
        files = sorted(
            path for path in origin.parent.rglob("*.py") if "__pycache__" not in path.parts
        )
    else:
        files = [origin]
    stats = tuple((file, file.stat().st_mtime_ns, file.stat().st_size) for file in files)
    return _files_version(origin.parent, stats)


@cache
def _files_version(root: Path, stats: tuple[tuple[Path, int, int], ...]) -> str:
    """`plugin_source_version`, read once per version of the files (every asset whose code
    finds worlds asks for it at definitions load)."""
    hasher = hashlib.sha256()
    for file, _, _ in stats:
        for part in (file.relative_to(root).as_posix().encode(), file.read_bytes()):
            hasher.update(len(part).to_bytes(8, "little"))
            hasher.update(part)
    return hasher.hexdigest()[:VERSION_CHARS]
