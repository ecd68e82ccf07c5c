"""World plugins: synthetic domains the pipeline generates, fingerprints and answers.

``get_world_plugin(name)`` returns a plugin by name, found through the
``eval_pipeline.worlds`` entry-point group (the built-in label world registers there too);
``load_world_config(path)`` reads a world YAML (its ``plugin`` field picks the plugin's
config model) and ``build_world(config)`` generates the world it describes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from importlib.metadata import EntryPoint
from pathlib import Path
from typing import TYPE_CHECKING, Any

from eval_pipeline.cases.case import CATEGORY_NAME
from eval_pipeline.config import read_yaml, validate_config
from eval_pipeline.errors import ConfigError
from eval_pipeline.plugins import entry_points_of, load_registration
from eval_pipeline.records import FrozenRecord
from eval_pipeline.world.base import AnswerKey, GeneratedWorld, WorldPlugin

if TYPE_CHECKING:
    from eval_pipeline.traces import Check

WORLDS_GROUP = "eval_pipeline.worlds"
"""The entry-point group a world plugin registers under (the built-in label world too):
`[project.entry-points."eval_pipeline.worlds"] my_world = "my_package.world:registration"`,
naming a `WorldRegistration`."""


@dataclass(frozen=True)
class WorldRegistration:
    """What a world's entry point names: its config model (whose `plugin` field is the
    entry point's name, with `seed` and `scale`) and the plugin a validated config builds,
    as callables, so that listing or naming a world imports nothing heavy; and what the
    pipeline reads about the world without building it."""

    config_model: Callable[[], type[FrozenRecord]]
    plugin_for: Callable[[FrozenRecord | None], WorldPlugin]
    generator_version: str
    """Changes when the same seed and scale would give different world tables (part of the
    world assets' code versions)."""
    suite_version: str
    """Changes when the same world would give a different suite."""
    categories: tuple[str, ...]
    """The suite's categories in the order reports list them (empty for a world whose
    categories come from its data: they are listed by name)."""
    max_scale: float = 1.0
    """The largest `scale` the world accepts."""
    trace_checks: Callable[[], Mapping[str, Check]] = dict
    """The world's own trace checks by name (beside the pipeline's), imported when used."""

    def __post_init__(self) -> None:
        bad = [c for c in self.categories if not CATEGORY_NAME.fullmatch(c)]
        if bad or len(set(self.categories)) != len(self.categories):
            raise ConfigError(
                f"a world registration's categories must be distinct names of lower-case "
                f"letters, digits and underscores: {list(self.categories)}"
            )


def _entry_points() -> dict[str, EntryPoint]:
    return entry_points_of(WORLDS_GROUP, "world plugin")


def known_world_plugins() -> tuple[str, ...]:
    """Names ``get_world_plugin`` accepts (every `eval_pipeline.worlds` entry point), sorted."""
    return tuple(sorted(_entry_points()))


def _entry(name: str) -> WorldRegistration:
    registration: WorldRegistration = load_registration(
        WORLDS_GROUP, name, WorldRegistration, "world plugin"
    )
    return registration


def world_registration(name: str) -> WorldRegistration:
    """The registration of the world plugin called `name` (ConfigError if none is)."""
    return _entry(name)


def registered_worlds() -> dict[str, WorldRegistration]:
    """Every installed world's registration, by name (sorted)."""
    return {name: _entry(name) for name in known_world_plugins()}


def world_code_versions() -> tuple[str, ...]:
    """Every installed world as its code versions see it: its name, generator and suite
    versions, and the hash of its plugin's source (`plugin_source_version`)."""
    from eval_pipeline.source_versions import plugin_source_version

    return tuple(
        f"{name}:{registration.generator_version}/{registration.suite_version}:"
        f"{plugin_source_version(_entry_points()[name].module)}"
        for name, registration in registered_worlds().items()
    )


def ordered_categories(present: Iterable[str]) -> list[str]:
    """`present` in the order reports list categories: the order a registered world
    declares them in (worlds by name), then any other by name."""
    wanted = set(present)
    order: list[str] = []
    for registration in registered_worlds().values():
        order.extend(c for c in registration.categories if c in wanted and c not in order)
    return [*order, *sorted(wanted - set(order))]


def get_world_plugin(name: str) -> WorldPlugin:
    """The world plugin called ``name`` with its default settings; an unknown name raises
    ConfigError listing the known ones."""
    return _entry(name).plugin_for(None)


def plugin_of_world(name: str) -> WorldPlugin:
    """The plugin of world `name` as the lanes use it: with the configured world's settings
    when that is the world (a world whose tools or prompt live in its config needs them),
    else with its defaults."""
    from eval_pipeline.paths import default_world_config

    configured = load_world_config(default_world_config())
    if configured.plugin == name:
        return plugin_for_config(configured)
    return get_world_plugin(name)


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
        name = data.get("plugin")
        model = _entry(name).config_model() if isinstance(name, str) else None
        if model is not None and "config_dir" in model.model_fields:
            # A world made of files names them relative to its config.
            data.setdefault("config_dir", str(path.resolve().parent))
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
    "WORLDS_GROUP",
    "AnswerKey",
    "GeneratedWorld",
    "WorldPlugin",
    "WorldRegistration",
    "build_world",
    "fingerprint_tables",
    "get_world_plugin",
    "known_world_plugins",
    "load_world_config",
    "ordered_categories",
    "parse_world_config",
    "plugin_for_config",
    "plugin_of_world",
    "registered_worlds",
    "world_code_versions",
    "world_registration",
]


def __getattr__(name: str) -> Any:
    # polars comes with the fingerprint: imported when first used, so that naming a world
    # module (the Dagster definitions read the versions) does not load it.
    if name == "fingerprint_tables":
        from eval_pipeline.world.fingerprint import fingerprint_tables

        return fingerprint_tables
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
