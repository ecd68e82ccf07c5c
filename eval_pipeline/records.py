"""Base classes for records that cross a stage boundary."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class FrozenRecord(BaseModel):
    """A record that crosses a stage: immutable, and unknown fields are an error."""

    model_config = ConfigDict(frozen=True, extra="forbid")
