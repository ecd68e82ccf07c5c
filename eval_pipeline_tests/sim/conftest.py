"""Setup for the simulated provider's tests."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from eval_pipeline import world_stages
from eval_pipeline.cases.case import Case
from eval_pipeline.lanes.agent_db import build_agent_world_db
from eval_pipeline.warehouse import connect
from eval_pipeline.world.label.plugin import LabelWorld
from eval_pipeline.world.label.toolbox import LabelToolbox
from eval_pipeline_tests.lanes.conftest import SMALL_SEED
from eval_pipeline_tests.sim.helpers import close_clients


@pytest.fixture(scope="module", autouse=True)
def raw_client_closed_after_module() -> Iterator[None]:
    """Each module's sim stops at module end: close the shared raw client with it."""
    yield
    close_clients()


AGENTS_SCALE = 0.05
"""Smaller than the lanes tests' world (their seed): the suite builds 2 s faster and every
question shape is still asked (133 cases)."""


@dataclass(frozen=True)
class SmallLabelWorld:
    """A small world (the lanes tests' seed), its suite, and its agent database."""

    agent_db: Path
    cases: tuple[Case, ...]


@pytest.fixture(scope="session")
def small_label_world(tmp_path_factory: pytest.TempPathFactory) -> SmallLabelWorld:
    """A small label world in a real warehouse, the agent's world-only copy of it, and the
    suite built on the same world (``LabelWorld().build_suite``)."""
    plugin = LabelWorld()
    world = plugin.generate(seed=SMALL_SEED, scale=AGENTS_SCALE)
    key = plugin.answer_key(world)
    warehouse = tmp_path_factory.mktemp("agents_warehouse") / "warehouse.duckdb"
    conn = connect(warehouse)
    try:
        world_stages.store_world(conn, world)
        world_stages.store_answer_key(conn, key)
    finally:
        conn.close()
    agent_db = build_agent_world_db(warehouse, tmp_path_factory.mktemp("agents_world"))
    return SmallLabelWorld(agent_db=agent_db, cases=tuple(plugin.build_suite(world, key)))


@pytest.fixture(scope="session")
def label_toolbox(small_label_world: SmallLabelWorld) -> Iterator[LabelToolbox]:
    """The product lane's tools over the small world (its calculator caches per artist)."""
    with LabelToolbox(small_label_world.agent_db) as toolbox:
        yield toolbox
