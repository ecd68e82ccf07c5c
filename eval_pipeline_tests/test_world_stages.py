"""Stages round-trip through the DuckDB warehouse without changing a fingerprint."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest

from eval_pipeline import world_stages
from eval_pipeline.errors import WarehouseError
from eval_pipeline.warehouse import connect
from eval_pipeline.world import get_world_plugin
from eval_pipeline.world.base import AnswerKey, GeneratedWorld


@pytest.fixture(scope="module")
def small() -> tuple[GeneratedWorld, AnswerKey]:
    plugin = get_world_plugin("label")
    world = plugin.generate(seed=21, scale=0.03)
    return world, plugin.answer_key(world)


@pytest.fixture
def conn(tmp_path: Path) -> Iterator[duckdb.DuckDBPyConnection]:
    connection = connect(tmp_path / "warehouse.duckdb")
    yield connection
    connection.close()


def test_world_and_answer_key_survive_the_warehouse(
    conn: duckdb.DuckDBPyConnection, small: tuple[GeneratedWorld, AnswerKey]
) -> None:
    world, answer_key = small
    world_stages.store_world(conn, world)
    world_stages.store_answer_key(conn, answer_key)
    loaded_world = world_stages.load_world(conn)
    assert loaded_world.fingerprint == world.fingerprint
    loaded_key = world_stages.load_answer_key(conn, loaded_world)
    assert loaded_key.fingerprint == answer_key.fingerprint


def test_changed_truth_table_is_refused(
    conn: duckdb.DuckDBPyConnection, small: tuple[GeneratedWorld, AnswerKey]
) -> None:
    world, answer_key = small
    world_stages.store_world(conn, world)
    world_stages.store_answer_key(conn, answer_key)
    conn.execute(
        "UPDATE truth.artist_ledger SET net_payable_cents = net_payable_cents + 1 "
        "WHERE artist_id = 'ART-0001' AND period = '2025-01'"
    )
    with pytest.raises(WarehouseError, match="truth tables do not match"):
        world_stages.load_answer_key(conn, world)


def test_changed_world_table_is_refused(
    conn: duckdb.DuckDBPyConnection, small: tuple[GeneratedWorld, AnswerKey]
) -> None:
    world, _ = small
    world_stages.store_world(conn, world)
    conn.execute("UPDATE world.artists SET name = 'Someone Else' WHERE artist_id = 'ART-0001'")
    with pytest.raises(WarehouseError, match="world tables do not match"):
        world_stages.load_world(conn)


def test_loading_from_an_empty_warehouse_names_what_is_missing(
    conn: duckdb.DuckDBPyConnection,
) -> None:
    with pytest.raises(WarehouseError, match=r"meta\.world_info"):
        world_stages.load_world(conn)


def test_the_hand_off_gives_the_next_stage_the_stored_world_without_reading_it_back(
    conn: duckdb.DuckDBPyConnection,
    small: tuple[GeneratedWorld, AnswerKey],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    world, answer_key = small
    hand_off = world_stages.WorldHandOff()
    world_stages.store_world(conn, world)
    hand_off.keep_world(world)
    world_stages.store_answer_key(conn, answer_key)
    hand_off.keep_answer_key(answer_key)
    read_backs: list[str] = []
    monkeypatch.setattr(world_stages, "load_world", lambda c: read_backs.append("world"))
    monkeypatch.setattr(world_stages, "load_answer_key", lambda c, w: read_backs.append("key"))
    assert hand_off.world(conn) is world
    assert hand_off.answer_key(conn, world) is answer_key
    assert read_backs == []


def test_the_hand_off_reads_back_when_the_warehouse_holds_another_world(
    conn: duckdb.DuckDBPyConnection, small: tuple[GeneratedWorld, AnswerKey]
) -> None:
    world, answer_key = small
    plugin = get_world_plugin("label")
    other = plugin.generate(seed=22, scale=0.03)
    hand_off = world_stages.WorldHandOff()
    hand_off.keep_world(world)
    hand_off.keep_answer_key(answer_key)
    world_stages.store_world(conn, other)
    world_stages.store_answer_key(conn, plugin.answer_key(other))
    read = hand_off.world(conn)
    assert read is not world and read.fingerprint == other.fingerprint
    assert hand_off.answer_key(conn, read).fingerprint != answer_key.fingerprint


def test_the_hand_off_still_refuses_a_tampered_world_it_must_read_back(
    conn: duckdb.DuckDBPyConnection, small: tuple[GeneratedWorld, AnswerKey]
) -> None:
    world, _ = small
    world_stages.store_world(conn, world)
    conn.execute("UPDATE world.artists SET name = 'Someone Else' WHERE artist_id = 'ART-0001'")
    with pytest.raises(WarehouseError, match="world tables do not match"):
        world_stages.WorldHandOff().world(conn)


def test_the_fixtures_stage_lets_go_of_the_world_and_a_later_stage_reads_it_back(
    conn: duckdb.DuckDBPyConnection,
    label_world: GeneratedWorld,
    label_key: AnswerKey,
    tmp_path: Path,
) -> None:
    # The fixtures stage is the world's last consumer in a run: holding it longer keeps
    # most of a 10x run's memory through the blocking check, which reads it back anyway.
    hand_off = world_stages.WorldHandOff()
    world_stages.store_world(conn, label_world)
    hand_off.keep_world(label_world)
    world_stages.store_answer_key(conn, label_key)
    hand_off.keep_answer_key(label_key)
    world_stages.fixtures_stage(conn, tmp_path / "fixtures", hand_off)
    read = hand_off.world(conn)
    assert read is not label_world
    assert read.fingerprint == label_world.fingerprint
    assert hand_off.answer_key(conn, read) is not label_key
