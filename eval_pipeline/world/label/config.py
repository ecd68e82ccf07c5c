"""The label world's configuration: ``configs/worlds/label.yaml`` validated by pydantic."""

from __future__ import annotations

from collections.abc import Callable
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


SCALE_STEP_PPM = 1_000
"""Resolution of the smallest working scale reported for a too-small one (0.001)."""


def smallest_working_scale(failing: float, builds: Callable[[int], bool]) -> float | None:
    """The smallest scale (on a 0.001 grid) above `failing` at which `builds(scale_ppm)`
    succeeds, found by trying: doubling up to MAX_SCALE, then bisecting. None when no
    scale up to MAX_SCALE builds (then the failure is not about scale).

    Too small a scale leaves too few statement lines to plant every anomaly in; where the
    limit lies depends on the seed, so it is found by generating, not by a formula.
    """
    low = scale_to_ppm(failing)
    high = (low // SCALE_STEP_PPM + 1) * SCALE_STEP_PPM
    limit = scale_to_ppm(MAX_SCALE)
    while not builds(high):
        if high >= limit:
            return None
        low, high = high, min(limit, high * 2)
    first, last = low // SCALE_STEP_PPM + 1, high // SCALE_STEP_PPM
    while first < last:  # the smallest grid point in (low, high] that builds
        middle = (first + last) // 2
        if builds(middle * SCALE_STEP_PPM):
            last = middle
        else:
            first = middle + 1
    return last * SCALE_STEP_PPM / 1_000_000


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
