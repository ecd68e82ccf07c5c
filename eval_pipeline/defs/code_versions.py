"""Each asset's code version: a readable label and the source its adapter runs.

Here, in the definitions, rather than in :mod:`eval_pipeline.source_versions`: an asset
whose code finds world plugins also folds in every installed world's versions, and the
world registry itself reads plugin source versions, so the hashing module stays below it.
"""

from __future__ import annotations

import hashlib

from eval_pipeline.source_versions import (
    PACKAGE,
    VERSION_CHARS,
    closure_version,
    import_closure,
)
from eval_pipeline.world import world_code_versions

WORLD_REGISTRY = f"{PACKAGE}.world"
"""The module that finds world plugins: code that imports it may run any installed world."""


def asset_code_version(label: str, adapter_module: str) -> str:
    """An asset's code version: a readable label (a stage, a spec's version) and the source
    version of the adapter module that defines it (and so of everything it runs). When what
    it runs finds world plugins, every installed world's versions and source are folded in:
    a world's code is reached through its entry point, not through an import."""
    closure = import_closure([adapter_module])
    version = closure_version(closure)
    if WORLD_REGISTRY in closure:
        hasher = hashlib.sha256(version.encode())
        for world in world_code_versions():
            hasher.update(b"\0" + world.encode())
        version = hasher.hexdigest()[:VERSION_CHARS]
    return f"{label}@{version}"
