"""Rules 1-6 under a misreading, computed from the rules' stage, equal them priced in full."""

from __future__ import annotations

from collections.abc import Mapping

import polars as pl
import pytest

from eval_pipeline.world.base import AnswerKey, GeneratedWorld
from eval_pipeline.world.label import LabelWorld
from eval_pipeline.world.label.misread import misread_stage
from eval_pipeline.world.label.reconcile import collect_evidence, registry
from eval_pipeline.world.label.rulebook import MISREADINGS, RULES, Misreading
from eval_pipeline.world.label.suite.readings import choose_pool
from eval_pipeline.world.label.truth import (
    compute_truth,
    prepare_lines,
    price_reading,
    subset_world,
)
from eval_pipeline.world.rng import Stream


def assert_every_misreading_matches(
    world: Mapping[str, pl.DataFrame], misreadings: tuple[Misreading, ...]
) -> None:
    evidence = collect_evidence(world)
    prepared = prepare_lines(world)
    rules_registry = registry(evidence, RULES).join(
        world["statement_lines"].select("line_id"), on="line_id", how="semi"
    )
    rules = price_reading(world, prepared, rules_registry, RULES)
    for m in misreadings:
        flags = registry(evidence, m.reading).join(
            world["statement_lines"].select("line_id"), on="line_id", how="semi"
        )
        full = price_reading(world, prepared, flags, m.reading)
        fast = misread_stage(world, prepared, rules, rules_registry, m.reading, flags)
        assert fast.groups.equals(full.groups), m.misreading_id
        slow_tables = compute_truth(world, None, m.reading, registry=flags, stage=full)
        fast_tables = compute_truth(world, None, m.reading, registry=flags, stage=fast)
        for name, table in fast_tables.items():
            assert table.equals(slow_tables[name]), (m.misreading_id, name)


def test_every_misreading_on_the_suites_part_of_the_default_world(
    label_world: GeneratedWorld, label_key: AnswerKey
) -> None:
    pool = choose_pool(
        Stream(label_world.seed, "t").child("pool"), label_world.tables, label_key.tables
    )
    assert_every_misreading_matches(subset_world(label_world.tables, set(pool)), MISREADINGS)


@pytest.mark.parametrize(("seed", "scale"), [(21, 0.05), (7, 0.2)])
def test_every_misreading_on_whole_small_worlds(seed: int, scale: float) -> None:
    world = LabelWorld().generate(seed, scale)
    assert_every_misreading_matches(dict(world.tables), MISREADINGS)
