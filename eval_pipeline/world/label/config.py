"""The label world's configuration: ``configs/worlds/label.yaml`` validated by pydantic."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator

from eval_pipeline.config import load_yaml_config, validate_config
from eval_pipeline.paths import CONFIGS_DIR
from eval_pipeline.records import FrozenRecord

SUPPORTED_CURRENCIES: tuple[str, ...] = ("USD", "EUR", "GBP", "JPY")
DEFAULT_CONFIG_PATH = CONFIGS_DIR / "worlds" / "label.yaml"
MAX_SCALE = 100.0


class LabelWorldConfig(FrozenRecord):
    """How to generate a label world.

    ``scale`` multiplies the number of statement lines only; the catalog, contracts and
    money owed are the same at every scale. ``currencies`` are the statement currencies
    in use: a distributor that bills in a currency outside the list is left out. USD is
    required (the label's books and the payouts are in USD).
    """

    plugin: Literal["label"] = "label"
    seed: int = Field(ge=0, le=2**63 - 1)
    scale: float = Field(default=1.0, gt=0, le=MAX_SCALE)
    currencies: tuple[str, ...] = SUPPORTED_CURRENCIES

    @field_validator("currencies")
    @classmethod
    def _known_currencies(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        unknown = [c for c in value if c not in SUPPORTED_CURRENCIES]
        if unknown:
            raise ValueError(
                f"unsupported currency {', '.join(repr(c) for c in unknown)}; "
                f"supported: {', '.join(SUPPORTED_CURRENCIES)}"
            )
        if len(set(value)) != len(value):
            raise ValueError("a currency is listed twice")
        if "USD" not in value:
            raise ValueError("USD is required: the label's books and payouts are in USD")
        # Canonical order, so the same set always gives the same world.
        return tuple(c for c in SUPPORTED_CURRENCIES if c in value)

    @property
    def scale_ppm(self) -> int:
        """The scale as an integer in parts per million (all generation math is integer)."""
        return scale_to_ppm(self.scale)


def scale_to_ppm(scale: float) -> int:
    """``scale`` in parts per million, rounded half-even; at least 1."""
    return max(1, round(scale * 1_000_000))


def label_config(
    seed: int, scale: float = 1.0, currencies: tuple[str, ...] | None = None
) -> LabelWorldConfig:
    """Validate arguments as a config; errors raise ConfigError naming the field."""
    data: dict[str, object] = {"seed": seed, "scale": scale}
    if currencies is not None:
        data["currencies"] = list(currencies)
    return validate_config(LabelWorldConfig, data, "label world arguments")


def load_label_config(path: Path = DEFAULT_CONFIG_PATH) -> LabelWorldConfig:
    """Load and validate a label world YAML file (default: ``configs/worlds/label.yaml``)."""
    return load_yaml_config(LabelWorldConfig, path)
