"""Versions of the config files the pipeline reads, so a run can tell what changed.

Each config family (the world config, the model configs, the price book, the judge,
the gate, the sweep) gets one version: a SHA-256 over its files' names and bytes. The
Dagster definitions observe these as source assets; an asset whose config family's version
moved since its last materialization is stale and the main job runs it again, and an
asset whose inputs did not move is skipped.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable
from pathlib import Path

from eval_pipeline import paths

CONFIG_SUFFIXES = (".yaml", ".yml", ".md")
"""What counts as a config file inside a config folder (the judge's rubric is markdown)."""


def files_version(locations: Iterable[Path]) -> str:
    """SHA-256 over every config file at `locations` (a file, or a folder's config files),
    each framed by its name and length; a missing location is part of the version too."""
    hasher = hashlib.sha256()
    for location in locations:
        if location.is_dir():
            files = sorted(p for p in location.rglob("*") if p.suffix in CONFIG_SUFFIXES)
        else:
            files = [location]
        for file in files:
            name = str(file.relative_to(location) if location.is_dir() else file.name).encode()
            data = file.read_bytes() if file.is_file() else b"<missing>"
            for part in (name, data):
                hasher.update(len(part).to_bytes(8, "little"))
                hasher.update(part)
    return hasher.hexdigest()


def world_config_files() -> list[Path]:
    """The world config and the data files it names (`data_files()` of its config model,
    where the world has one): an edited case file makes the world stale like its config."""
    from eval_pipeline.world import load_world_config

    config_path = paths.default_world_config()
    config = load_world_config(config_path)
    data_files = getattr(config, "data_files", None)
    return [config_path, *(data_files() if callable(data_files) else [])]


CONFIG_FAMILIES: dict[str, tuple[str, Callable[[], list[Path]]]] = {
    "world_config": (
        "The world config the main job builds (seed, scale, currencies), and the files a "
        "world made of data reads (a dataset world's cases and tools).",
        lambda: world_config_files(),
    ),
    "model_configs": (
        "Every model config (provider, wire format, limits, sim profile).",
        lambda: list(paths.models_dirs()),
    ),
    "price_book": ("The price book every cost is computed from.", lambda: [paths.prices_path()]),
    "judge_config": (
        "The judge's config and rubrics (what the scores ask the judge).",
        lambda: [paths.judge_config().parent],
    ),
    "gate_config": (
        "The ship gate's rules and margins, and the accepted baselines.",
        lambda: [paths.gate_config(), paths.baselines_dir()],
    ),
    "sweep_config": (
        "The sweep: its models, seeds and experiments.",
        lambda: [paths.sweep_config()],
    ),
}
"""Each config family: what it is, and where its files are (read when observed)."""


def config_version(family: str) -> str:
    """The current version of one config family (see CONFIG_FAMILIES)."""
    _, locations = CONFIG_FAMILIES[family]
    return files_version(locations())
