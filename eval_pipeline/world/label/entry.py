"""The label world's entry point (`eval_pipeline.worlds` group, `label`): the same
registration any third-party world makes. Light: the world itself is imported when used."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from eval_pipeline.errors import ConfigError
from eval_pipeline.records import FrozenRecord
from eval_pipeline.world import WorldRegistration
from eval_pipeline.world.base import WorldPlugin
from eval_pipeline.world.label.config import MAX_SCALE
from eval_pipeline.world.label.versions import CATEGORIES, GENERATOR_VERSION, SUITE_VERSION

if TYPE_CHECKING:
    from eval_pipeline.traces import Check


def _config_model() -> type[FrozenRecord]:
    from eval_pipeline.world.label import LabelWorldConfig

    return LabelWorldConfig


def _trace_checks() -> Mapping[str, Check]:
    from eval_pipeline.world.label.trace_checks import LABEL_CHECKS

    return LABEL_CHECKS


def _plugin_for(config: FrozenRecord | None) -> WorldPlugin:
    from eval_pipeline.world.label import LabelWorld, LabelWorldConfig

    if config is None:
        return LabelWorld()
    if not isinstance(config, LabelWorldConfig):
        raise ConfigError(f"not a label world config: {type(config).__name__}")
    return LabelWorld.from_config(config)


registration = WorldRegistration(
    config_model=_config_model,
    plugin_for=_plugin_for,
    generator_version=GENERATOR_VERSION,
    suite_version=SUITE_VERSION,
    categories=CATEGORIES,
    max_scale=MAX_SCALE,
    trace_checks=_trace_checks,
)
