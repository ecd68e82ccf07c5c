"""The sweep: which models and seeds the lanes run, and when (`configs/sweeps/*.yaml`)."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, field_validator, model_validator

from eval_pipeline.config import load_yaml_config
from eval_pipeline.lane_records import Lane
from eval_pipeline.paths import sweep_config
from eval_pipeline.products import ProductSpec
from eval_pipeline.records import FrozenRecord


class SweepConfig(FrozenRecord):
    """Models x seeds x lanes, and the cron expression of the nightly schedule."""

    name: str
    models: tuple[str, ...] = Field(min_length=1)
    seeds: tuple[int, ...] = Field(min_length=1)
    lanes: tuple[Lane, ...] = ("model", "product")
    cron: str = "0 2 * * *"
    timezone: str = "UTC"
    experiments: tuple[str, ...] = ()
    """Pre-registered experiments (ids in configs/experiments) the main job runs after the
    lanes and before the report; the schedule runs only the lanes."""
    product: ProductSpec = Field(default_factory=ProductSpec)
    """What the product lane runs (`plugin: agent-loop`, the default; `mcp` over an MCP
    server's tools; `http` for a deployed endpoint), with its `options`."""
    compare_against: str | None = None
    """A model of the sweep every other is compared with in the headline; unset, every
    pair is compared (each model against the leader beyond a handful of models)."""

    @field_validator("models", "seeds", "experiments")
    @classmethod
    def _unique(cls, value: tuple[object, ...]) -> tuple[object, ...]:
        repeated = sorted({str(v) for v in value if value.count(v) > 1})
        if repeated:
            raise ValueError(f"listed twice: {', '.join(repeated)}")
        return value

    @model_validator(mode="after")
    def _reference_is_swept(self) -> SweepConfig:
        if self.compare_against is not None and self.compare_against not in self.models:
            raise ValueError(
                f"compare_against: {self.compare_against!r} is not one of the sweep's models "
                f"({', '.join(self.models)})"
            )
        return self

    @field_validator("seeds")
    @classmethod
    def _non_negative(cls, value: tuple[int, ...]) -> tuple[int, ...]:
        if any(seed < 0 for seed in value):
            raise ValueError("seeds must be >= 0")
        return value


def load_sweep_config(path: Path | None = None) -> SweepConfig:
    """The sweep config (default `paths.sweep_config()`); errors name the file and field."""
    return load_yaml_config(SweepConfig, path or sweep_config())
