"""The world plugin interface: a domain the pipeline can generate, fingerprint and load.

A world is generated from one seed and a scale, deterministically to the byte. Its tables
are split in two schemas: `world` (what agents may read later) and `truth` (the answer
key and anomaly registry, which agents must never read).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    import polars as pl


if TYPE_CHECKING:
    from pathlib import Path

    from eval_pipeline.cases.case import Case
    from eval_pipeline.lanes.toolbox import Toolbox


@dataclass(frozen=True)
class GeneratedWorld:
    """Tables of one generated world; frozen so a stage cannot mutate what it was handed."""

    plugin: str
    generator_version: str
    seed: int
    scale: float
    tables: Mapping[str, pl.DataFrame]
    fingerprint: str


@dataclass(frozen=True)
class AnswerKey:
    """Truth tables computed from the clean world data before any model exists."""

    tables: Mapping[str, pl.DataFrame]
    fingerprint: str


@runtime_checkable
class WorldPlugin(Protocol):
    """A domain behind the pipeline. The label world is the built-in one."""

    name: str
    generator_version: str
    suite_version: str
    system_prompt: str
    """What both lanes send before each case's prompt: who the agent is, in this world."""

    def generate(self, seed: int, scale: float) -> GeneratedWorld:
        """Build every `world` table from the seed; same inputs give the same bytes."""
        ...

    def world_from_tables(
        self, seed: int, scale: float, tables: Mapping[str, pl.DataFrame]
    ) -> GeneratedWorld:
        """A world read back from storage, its fingerprint recomputed from the tables. Text
        may arrive as text or as Categorical codes (the warehouse's ENUM columns): the
        plugin decides how its world holds it."""
        ...

    def answer_key(self, world: GeneratedWorld) -> AnswerKey:
        """Compute the `truth` tables from the world's clean data."""
        ...

    def answer_key_from_tables(
        self, world: GeneratedWorld, tables: Mapping[str, pl.DataFrame]
    ) -> AnswerKey:
        """An answer key read back from storage, its fingerprint recomputed."""
        ...

    def tool_specs(self) -> list[dict[str, Any]]:
        """The tools both lanes offer a model (name, description, JSON input schema); frozen
        with the fixtures, since the cases' expected tool calls are written against them."""
        ...

    def open_toolbox(self, agent_db: Path) -> Toolbox:
        """The world's tools for one lane run, over the world-only agent database (the
        implementations of `tool_specs`; writes go to the toolbox's dry-run sink)."""
        ...

    def build_suite(self, world: GeneratedWorld, answer_key: AnswerKey) -> list[Case]:
        """The evaluation cases; every expected value comes from a resolver run on the world."""
        ...
