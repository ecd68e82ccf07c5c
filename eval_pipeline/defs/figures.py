"""What an asset's materialization says that `evalp` prints, as typed records.

Each asset module defines its record (an `AssetFigures`, beside the asset that writes it)
and writes its figures into its metadata with `metadata()`; `evalp demo`, `evalp sweep`
and `evalp experiment run` read them back from the materializations of the runs they
launched (`read`). One record per asset, so a command never looks a value up by a string
it spelled itself, and a figure an asset stopped writing is an error naming the asset and
the field, not a `None` printed as if it were a result.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, ClassVar, Literal, Self

import dagster as dg
from pydantic import ConfigDict, ValidationError

from eval_pipeline.errors import EvalPipelineError
from eval_pipeline.records import FrozenRecord


class FiguresError(EvalPipelineError):
    """A materialization lacks a figure its asset is supposed to write."""


@dataclass(frozen=True)
class Shown:
    """How the Dagster UI shows a figure (`AssetFigures.metadata` wraps it so)."""

    kind: Literal["path", "md"]


FilePath = Annotated[str, Shown("path")]
Markdown = Annotated[str, Shown("md")]


class AssetFigures(FrozenRecord):
    """The figures one asset writes; other metadata keys (for the UI) are ignored."""

    model_config = ConfigDict(frozen=True, extra="ignore", populate_by_name=True)

    asset: ClassVar[str] = ""
    """The asset key (a record written by several assets names none: see `read`)."""

    def metadata(self) -> dict[str, dg.RawMetadataValue]:
        """The figures as materialization metadata under their names: a path or markdown as
        the UI shows one, a mapping or list as JSON, anything else as it is."""
        values = self.model_dump(mode="json", by_alias=True)
        metadata: dict[str, dg.RawMetadataValue] = {}
        for name, field in type(self).model_fields.items():
            key = field.alias or name
            value = values[key]
            shown = next((m.kind for m in field.metadata if isinstance(m, Shown)), None)
            if shown == "path":
                metadata[key] = dg.MetadataValue.path(str(value))
            elif shown == "md":
                metadata[key] = dg.MetadataValue.md(str(value))
            elif isinstance(value, dict | list):
                metadata[key] = dg.MetadataValue.json(value)
            else:
                metadata[key] = value
        return metadata

    @classmethod
    def read(
        cls, materializations: Mapping[str, Mapping[str, object]], asset: str = ""
    ) -> Self | None:
        """The figures of `asset` (default: the record's own) among a run's
        materializations; None when the run did not materialize it."""
        key = asset or cls.asset
        found = materializations.get(key)
        return None if found is None else cls.of(found, key)

    @classmethod
    def of(cls, metadata: Mapping[str, object], asset: str = "") -> Self:
        """The figures in one materialization's metadata (plain values, or Dagster's
        metadata values); an error naming the asset and the figure when one is missing."""
        values = {name: getattr(value, "value", value) for name, value in metadata.items()}
        try:
            return cls.model_validate(values)
        except ValidationError as error:
            problems = "; ".join(
                f"{'.'.join(map(str, problem['loc']))}: {problem['msg']}"
                for problem in error.errors()
            )
            raise FiguresError(
                f"asset {asset or cls.asset}: its materialization's figures are not what "
                f"{cls.__name__} reads ({problems})"
            ) from error
