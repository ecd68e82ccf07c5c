"""World plugins: synthetic domains the pipeline generates, fingerprints and answers.

``get_world_plugin(name)`` returns a plugin by name (the label world is built in);
``load_world_config(path)`` reads a world YAML (its ``plugin`` field picks the plugin's
config model) and ``build_world(config)`` generates the world it describes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from eval_pipeline.config import read_yaml, validate_config
from eval_pipeline.errors import ConfigError
from eval_pipeline.records import FrozenRecord
from eval_pipeline.world.base import AnswerKey, GeneratedWorld, WorldPlugin


@dataclass(frozen=True)
class _Entry:
    config_model: Callable[[], type[FrozenRecord]]
    plugin_for: Callable[[FrozenRecord | None], WorldPlugin]


def _label_config_model() -> type[FrozenRecord]:
    from eval_pipeline.world.label import LabelWorldConfig

    return LabelWorldConfig


def _label_plugin(config: FrozenRecord | None) -> WorldPlugin:
    from eval_pipeline.world.label import LabelWorld, LabelWorldConfig

    if config is None:
        return LabelWorld()
    if not isinstance(config, LabelWorldConfig):
        raise ConfigError(f"not a label world config: {type(config).__name__}")
    return LabelWorld.from_config(config)


_REGISTRY: dict[str, _Entry] = {"label": _Entry(_label_config_model, _label_plugin)}


def known_world_plugins() -> tuple[str, ...]:
    """Names ``get_world_plugin`` accepts, sorted."""
    return tuple(sorted(_REGISTRY))


def _entry(name: str) -> _Entry:
    entry = _REGISTRY.get(name)
    if entry is None:
        raise ConfigError(
            f"unknown world plugin {name!r}; known: {', '.join(known_world_plugins())}"
        )
    return entry


def get_world_plugin(name: str) -> WorldPlugin:
    """The world plugin called ``name`` with its default settings; an unknown name raises
    ConfigError listing the known ones."""
    return _entry(name).plugin_for(None)


def parse_world_config(data: Any, source: str) -> FrozenRecord:
    """Validate a world config mapping; its ``plugin`` field picks the model."""
    if not isinstance(data, dict):
        raise ConfigError(f"invalid config {source}: expected a mapping, got {type(data).__name__}")
    name = data.get("plugin")
    if not isinstance(name, str):
        raise ConfigError(
            f"invalid config {source}: plugin: missing or not a string "
            f"(known: {', '.join(known_world_plugins())})"
        )
    return validate_config(_entry(name).config_model(), data, source)


def load_world_config(path: Path, *, seed: int | None = None, scale: float | None = None) -> Any:
    """Read a world YAML, apply ``seed``/``scale`` overrides, validate (ConfigError names the
    file and field). Returns the plugin's config model, e.g. ``LabelWorldConfig``."""
    data = read_yaml(path)
    if isinstance(data, dict):
        if seed is not None:
            data["seed"] = seed
        if scale is not None:
            data["scale"] = scale
    return parse_world_config(data, str(path))


def plugin_for_config(config: Any) -> WorldPlugin:
    """The plugin a validated world config describes (with the config's settings)."""
    name = getattr(config, "plugin", None)
    if not isinstance(name, str):
        raise ConfigError(f"not a world config: {type(config).__name__}")
    return _entry(name).plugin_for(config)


def build_world(config: Any) -> GeneratedWorld:
    """Generate the world a validated config describes."""
    return plugin_for_config(config).generate(config.seed, config.scale)


__all__ = [
    "AnswerKey",
    "GeneratedWorld",
    "WorldPlugin",
    "build_world",
    "fingerprint_tables",
    "get_world_plugin",
    "known_world_plugins",
    "load_world_config",
    "parse_world_config",
    "plugin_for_config",
]


def __getattr__(name: str) -> Any:
    # polars comes with the fingerprint: imported when first used, so that naming a world
    # module (the Dagster definitions read the versions) does not load it.
    if name == "fingerprint_tables":
        from eval_pipeline.world.fingerprint import fingerprint_tables

        return fingerprint_tables
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
