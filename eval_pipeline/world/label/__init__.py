"""The built-in label world: a record label's royalty operation with an exact answer key.

Its names are imported when first used (PEP 562), so that importing one light module of
the package (``versions``) does not load the generator and polars.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from eval_pipeline.world.label.config import (
        SUPPORTED_CURRENCIES,
        LabelWorldConfig,
        label_config,
        load_label_config,
    )
    from eval_pipeline.world.label.plugin import TRUTH_TABLES, WORLD_TABLES, LabelWorld
    from eval_pipeline.world.label.versions import GENERATOR_VERSION

_WHERE = {
    "SUPPORTED_CURRENCIES": "config",
    "LabelWorldConfig": "config",
    "label_config": "config",
    "load_label_config": "config",
    "GENERATOR_VERSION": "versions",
    "TRUTH_TABLES": "plugin",
    "WORLD_TABLES": "plugin",
    "LabelWorld": "plugin",
}

__all__ = [
    "GENERATOR_VERSION",
    "SUPPORTED_CURRENCIES",
    "TRUTH_TABLES",
    "WORLD_TABLES",
    "LabelWorld",
    "LabelWorldConfig",
    "label_config",
    "load_label_config",
]


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(f"{__name__}.{_WHERE[name]}"), name)
