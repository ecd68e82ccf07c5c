"""The built-in label world: a record label's royalty operation with an exact answer key."""

from eval_pipeline.world.label.config import (
    SUPPORTED_CURRENCIES,
    LabelWorldConfig,
    label_config,
    load_label_config,
)
from eval_pipeline.world.label.plugin import (
    GENERATOR_VERSION,
    TRUTH_TABLES,
    WORLD_TABLES,
    LabelWorld,
)

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
