"""A small label world in a real warehouse (world, truth, meta and runs schemas) and its
agent world database, built once per test session.

Scale 0.12 keeps statement_lines above the warehouse's ENUM threshold (56k lines), so the
copy's ENUM columns are exercised, while generating in about a second.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from eval_pipeline import world_stages
from eval_pipeline.cases.frozen import FixtureSet
from eval_pipeline.lanes.agent_db import build_agent_world_db
from eval_pipeline.lanes.sql_tool import AgentSql
from eval_pipeline.warehouse import connect
from eval_pipeline.warehouse.envelopes import ensure_envelope_table
from eval_pipeline.world import get_world_plugin

SMALL_SCALE = 0.12
SMALL_SEED = 20260101


def write_warehouse(path: Path, seed: int, scale: float) -> None:
    plugin = get_world_plugin("label")
    world = plugin.generate(seed=seed, scale=scale)
    conn = connect(path)
    try:
        world_stages.store_world(conn, world)
        world_stages.store_answer_key(conn, plugin.answer_key(world))
        ensure_envelope_table(conn)
    finally:
        conn.close()


@pytest.fixture(scope="session")
def small_warehouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A warehouse holding every schema an agent must not reach, beside `world`."""
    path = tmp_path_factory.mktemp("lanes_warehouse") / "warehouse.duckdb"
    write_warehouse(path, SMALL_SEED, SMALL_SCALE)
    return path


@pytest.fixture(scope="session")
def agent_db(small_warehouse: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_agent_world_db(small_warehouse, tmp_path_factory.mktemp("agent_world"))


@pytest.fixture(scope="session")
def agent_sql(agent_db: Path) -> Iterator[AgentSql]:
    """One tool for the session, as a lane would hold it (it is safe to share)."""
    with AgentSql(agent_db) as tool:
        yield tool


@pytest.fixture(scope="session")
def small_fixture_set(
    small_warehouse: Path, tmp_path_factory: pytest.TempPathFactory
) -> FixtureSet:
    """The label suite built on the small world and frozen, as the fixtures asset does."""
    conn = connect(small_warehouse, read_only=True)
    try:
        world = world_stages.load_world(conn)
        answer_key = world_stages.load_answer_key(conn, world)
    finally:
        conn.close()
    return world_stages.freeze_suite(world, answer_key, tmp_path_factory.mktemp("fixtures"))
