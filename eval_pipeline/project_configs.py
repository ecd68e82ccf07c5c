"""The project's model configs and price book, where the project keeps them.

The model-call layer reads a folder or a file it is given (`providers.config`,
`providers.prices`) and knows nothing of the project's layout; which folders hold the
model configs (the shipped ones, then a world's own, then `EVALP_MODELS_DIR`) and where the
price book is are `paths`' to say, and this module joins the two.
"""

from __future__ import annotations

from pathlib import Path

from eval_pipeline import paths
from eval_pipeline.providers.config import (
    ModelConfigScan,
    scan_model_config_folders,
)
from eval_pipeline.providers.prices import PriceBook, read_price_book


def scan_model_configs(directory: Path | None = None) -> ModelConfigScan:
    """Every model config of `directory`, else of the project's folders
    (`paths.models_dirs()`), invalid files kept with their error."""
    return scan_model_config_folders((directory,) if directory is not None else paths.models_dirs())


def load_price_book(path: Path | None = None) -> PriceBook:
    """The price book at `path`, else the project's (`paths.prices_path()`)."""
    return read_price_book(path or paths.prices_path())
