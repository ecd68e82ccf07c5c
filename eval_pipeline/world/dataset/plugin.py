"""The dataset world: the user's own cases, frozen and fingerprinted like any world.

The world is the case file. Its `world` tables hold what an agent may see (each case's id,
category and prompt, and the file's name and SHA-256), its `truth` table what it must not
(expected answers, kinds, tolerances, expected first calls); the suite is the join of the
two, so the fixture set is a function of the stored tables, and a changed byte of the file
changes the world's fingerprint and so the fixture id. Seed and scale do not change it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from functools import cached_property
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import polars as pl

from eval_pipeline.errors import WorldError
from eval_pipeline.world.base import AnswerKey, GeneratedWorld
from eval_pipeline.world.dataset.cases import read_case_file
from eval_pipeline.world.dataset.config import (
    DEFAULT_SYSTEM_PROMPT,
    GENERATOR_VERSION,
    SUITE_VERSION,
    DatasetWorldConfig,
)
from eval_pipeline.world.dataset.tools import (
    DatasetTool,
    DatasetToolbox,
    load_tools,
    tools_source_version,
)
from eval_pipeline.world.fingerprint import fingerprint_tables

if TYPE_CHECKING:
    from eval_pipeline.cases.case import Case
    from eval_pipeline.lanes.toolbox import Toolbox

CASES_TABLE = "dataset_cases"
SOURCE_TABLE = "dataset_source"
WORLD_TABLES = (CASES_TABLE, SOURCE_TABLE)
ANSWERS_TABLE = "expected_answers"
TRUTH_TABLES = (ANSWERS_TABLE,)


class DatasetWorld:
    """A world read from a case file (see module docstring); `config` None is a world with
    no file, which can read stored tables back but not generate."""

    name = "dataset"
    generator_version = GENERATOR_VERSION
    suite_version = SUITE_VERSION

    def __init__(self, config: DatasetWorldConfig | None = None) -> None:
        self.config = config
        self.system_prompt = config.system_prompt if config else DEFAULT_SYSTEM_PROMPT

    def _configured(self) -> DatasetWorldConfig:
        if self.config is None:
            raise WorldError("the dataset world needs its config (which case file?)")
        return self.config

    @cached_property
    def tools(self) -> tuple[DatasetTool, ...]:
        if self.config is None:
            return ()
        config = self.config
        return load_tools(config.tools, config.import_roots, f"world config {config.name!r}")

    def generate(self, seed: int, scale: float) -> GeneratedWorld:
        config = self._configured()
        data, cases = read_case_file(config.cases_path)
        world_tables = {
            CASES_TABLE: pl.DataFrame(
                {
                    "case_id": [c.case_id for c in cases],
                    "category": [c.category for c in cases],
                    "core": [c.core for c in cases],
                    "prompt": [c.prompt for c in cases],
                    "row": [int(c.params["row"]) for c in cases],
                    "source": [c.resolver for c in cases],
                    "trace_checks": [json.dumps(list(c.trace_checks)) for c in cases],
                },
                schema={
                    "case_id": pl.String,
                    "category": pl.String,
                    "core": pl.Boolean,
                    "prompt": pl.String,
                    "row": pl.Int64,
                    "source": pl.String,
                    "trace_checks": pl.String,
                },
            ),
            SOURCE_TABLE: pl.DataFrame(
                {
                    "dataset": [config.name],
                    "file": [config.cases_path.name],
                    "sha256": [hashlib.sha256(data).hexdigest()],
                    "cases": [len(cases)],
                    # The tools' source: the product lane's results depend on it, so an
                    # edited tool is a new world (and fixture set), never a stale result.
                    "tools_sha256": [tools_source_version(self.tools)],
                },
                schema={
                    "dataset": pl.String,
                    "file": pl.String,
                    "sha256": pl.String,
                    "cases": pl.Int64,
                    "tools_sha256": pl.String,
                },
            ),
        }
        return self.world_from_tables(seed, scale, world_tables)

    def world_from_tables(
        self, seed: int, scale: float, tables: Mapping[str, pl.DataFrame]
    ) -> GeneratedWorld:
        chosen = _text_tables(tables, WORLD_TABLES, "dataset world")
        return GeneratedWorld(
            plugin=self.name,
            generator_version=self.generator_version,
            seed=seed,
            scale=scale,
            tables=MappingProxyType(chosen),
            fingerprint=fingerprint_tables(chosen, salt=f"world/{self.name}/{GENERATOR_VERSION}"),
        )

    def answer_key(self, world: GeneratedWorld) -> AnswerKey:
        """The expected answers, read again from the case file whose hash the world holds
        (an edited file since the world was made is an error naming it)."""
        config = self._configured()
        data, cases = read_case_file(config.cases_path)
        recorded = world.tables[SOURCE_TABLE].get_column("sha256")[0]
        if hashlib.sha256(data).hexdigest() != recorded:
            raise WorldError(
                f"case file {config.cases_path} changed since its world was made "
                f"(sha256 {recorded[:12]}…): materialize the world again"
            )
        return self.answer_key_from_tables(world, {ANSWERS_TABLE: _answers_frame(cases)})

    def answer_key_from_tables(
        self, world: GeneratedWorld, tables: Mapping[str, pl.DataFrame]
    ) -> AnswerKey:
        chosen = _text_tables(tables, TRUTH_TABLES, "dataset answer key")
        fingerprint = fingerprint_tables(
            chosen, salt=f"truth/{self.name}/{GENERATOR_VERSION}/{world.fingerprint}"
        )
        return AnswerKey(tables=MappingProxyType(chosen), fingerprint=fingerprint)

    def tool_specs(self) -> list[dict[str, Any]]:
        return [tool.spec.model_dump(mode="json") for tool in self.tools]

    def open_toolbox(self, agent_db: Path) -> Toolbox:
        return DatasetToolbox(self.tools)

    def build_suite(self, world: GeneratedWorld, answer_key: AnswerKey) -> list[Case]:
        """Every case, rebuilt from the stored world and answer key (file order)."""
        from eval_pipeline.cases.case import Case, ExpectedToolCall

        answers = {row["case_id"]: row for row in answer_key.tables[ANSWERS_TABLE].to_dicts()}
        cases: list[Case] = []
        for row in world.tables[CASES_TABLE].sort("row").to_dicts():
            answer = answers.get(row["case_id"])
            if answer is None:
                raise WorldError(f"case {row['case_id']} has no expected answer")
            first = answer["expected_first_call"]
            checks = tuple(json.loads(row["trace_checks"]))
            cases.append(
                Case(
                    case_id=row["case_id"],
                    category=row["category"],
                    prompt=row["prompt"],
                    answer_kind=answer["kind"],
                    expected=answer["expected"],
                    tolerance=answer["tolerance"],
                    tiers=("exact", "trace") if checks else ("exact",),
                    trace_checks=checks,
                    expected_first_call=ExpectedToolCall.model_validate_json(first)
                    if first
                    else None,
                    core=row["core"],
                    template="dataset",
                    resolver=row["source"],
                    params={"row": str(row["row"])},
                )
            )
        return cases


def _text_tables(
    tables: Mapping[str, pl.DataFrame], names: tuple[str, ...], what: str
) -> dict[str, pl.DataFrame]:
    """The named tables, their text as text (the warehouse may hand it back as ENUM codes)."""
    missing = [name for name in names if name not in tables]
    if missing:
        raise WorldError(f"{what} tables missing: {', '.join(missing)}")
    return {
        name: tables[name].with_columns(pl.selectors.categorical().cast(pl.String))
        for name in names
    }


def _answers_frame(cases: list[Case]) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "case_id": [c.case_id for c in cases],
            "kind": [c.answer_kind for c in cases],
            "expected": [c.expected for c in cases],
            "tolerance": [c.tolerance for c in cases],
            "expected_first_call": [
                c.expected_first_call.model_dump_json() if c.expected_first_call else None
                for c in cases
            ],
        },
        schema={
            "case_id": pl.String,
            "kind": pl.String,
            "expected": pl.String,
            "tolerance": pl.String,
            "expected_first_call": pl.String,
        },
    )
