"""Where a dataset world's tool modules are, found from the files without running them.

Apart from the tools' loading (`tools`) so that the world config can name its files (their
bytes are part of its version) without importing what runs the tools.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Sequence
from importlib.machinery import ModuleSpec, PathFinder
from pathlib import Path

from eval_pipeline.errors import ConfigError


def spec_in_roots(module_name: str, roots: Sequence[Path]) -> ModuleSpec | None:
    """Where `module_name`'s top-level package or module lies in `roots`, if it does (found
    from the files, not from what this process has imported)."""
    top = module_name.split(".", 1)[0]
    return PathFinder.find_spec(top, [str(root) for root in roots])


def on_import_path(roots: Sequence[Path]) -> None:
    for root in roots:
        if str(root) not in sys.path:
            # Like pytest's rootdir: the user's tool modules are found beside their config.
            sys.path.insert(0, str(root))


def tool_module_files(functions: Sequence[str], roots: Sequence[Path]) -> list[Path]:
    """The source files of the modules of `functions` (`module:function`), found without
    running them."""
    on_import_path(roots)
    files: list[Path] = []
    for function in functions:
        module_name = function.partition(":")[0]
        try:
            spec = (
                spec_in_roots(module_name, roots) if "." not in module_name else None
            ) or importlib.util.find_spec(module_name)
        except (ImportError, ValueError) as error:
            raise ConfigError(f"tools: {function}: cannot find {module_name!r}: {error}") from error
        if spec is None or spec.origin is None:
            raise ConfigError(
                f"tools: {function}: no module {module_name!r} in "
                f"{', '.join(str(r) for r in roots)} or the environment"
            )
        files.append(Path(spec.origin))
    return files
