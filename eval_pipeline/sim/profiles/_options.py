"""Validating a profile's options section with a frozen pydantic record."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import ValidationError

from eval_pipeline.records import FrozenRecord
from eval_pipeline.sim.errors import ProfileError

if TYPE_CHECKING:
    from eval_pipeline.sim.profiles import ProfileSetup

R = TypeVar("R", bound=FrozenRecord)


def parse_options(
    record: type[R], where: str, options: Mapping[str, Any], base: R | None = None
) -> R:
    """``options`` validated as ``record`` (over ``base``'s values when given)."""
    merged = {**(base.model_dump() if base is not None else {}), **options}
    try:
        return record.model_validate(merged)
    except ValidationError as exc:
        raise ProfileError(f"invalid profile options for {where}: {exc}") from exc


def no_options(where: str, options: Mapping[str, Any]) -> None:
    if options:
        raise ProfileError(f"profile {where} takes no options, got {sorted(options)}")


class Optionless:
    """A profile with no options and no variants: both refused when given."""

    def __init__(self, setup: ProfileSetup) -> None:
        no_options(setup.name, setup.options)
        no_options(setup.name + " variants", setup.variant_options)

    def accepts_variant(self, variant: str | None) -> bool:
        return variant is None
