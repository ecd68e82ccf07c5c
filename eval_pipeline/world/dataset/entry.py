"""The dataset world's entry point (`eval_pipeline.worlds` group, `dataset`)."""

from __future__ import annotations

from eval_pipeline.errors import ConfigError
from eval_pipeline.records import FrozenRecord
from eval_pipeline.world import WorldRegistration
from eval_pipeline.world.base import WorldPlugin
from eval_pipeline.world.dataset.config import GENERATOR_VERSION, SUITE_VERSION


def _config_model() -> type[FrozenRecord]:
    from eval_pipeline.world.dataset.config import DatasetWorldConfig

    return DatasetWorldConfig


def _plugin_for(config: FrozenRecord | None) -> WorldPlugin:
    from eval_pipeline.world.dataset.config import DatasetWorldConfig
    from eval_pipeline.world.dataset.plugin import DatasetWorld

    if config is not None and not isinstance(config, DatasetWorldConfig):
        raise ConfigError(f"not a dataset world config: {type(config).__name__}")
    return DatasetWorld(config)


registration = WorldRegistration(
    config_model=_config_model,
    plugin_for=_plugin_for,
    generator_version=GENERATOR_VERSION,
    suite_version=SUITE_VERSION,
    categories=(),
    max_scale=1.0,
)
