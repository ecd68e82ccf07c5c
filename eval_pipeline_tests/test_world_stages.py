"""Stages round-trip through the DuckDB warehouse without changing a fingerprint."""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest

from eval_pipeline import world_stages
from eval_pipeline.errors import WarehouseError, WorldError
from eval_pipeline.paths import PROJECT_ROOT
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


def _through_the_fixtures_stage(
    conn: duckdb.DuckDBPyConnection, world: GeneratedWorld, key: AnswerKey, tmp_path: Path
) -> world_stages.WorldHandOff:
    """The world and key stored and handed on, and the fixtures frozen from them."""
    hand_off = world_stages.WorldHandOff()
    world_stages.store_world(conn, world)
    hand_off.keep_world(world)
    world_stages.store_answer_key(conn, key)
    hand_off.keep_answer_key(key)
    world_stages.fixtures_stage(conn, tmp_path / "fixtures", hand_off)
    return hand_off


def test_the_fixtures_stage_lets_go_of_the_world_and_a_later_stage_reads_it_back(
    conn: duckdb.DuckDBPyConnection,
    label_world: GeneratedWorld,
    label_key: AnswerKey,
    tmp_path: Path,
) -> None:
    # The fixtures stage is the world's last consumer in a run: holding it longer keeps
    # most of a 10x run's memory through the blocking check, which reads it back anyway.
    hand_off = _through_the_fixtures_stage(conn, label_world, label_key, tmp_path)
    read = hand_off.world(conn)
    assert read is not label_world
    assert read.fingerprint == label_world.fingerprint
    assert hand_off.answer_key(conn, read) is not label_key


def test_the_fixtures_check_reads_the_answer_key_beside_the_world_and_still_names_what_broke(
    conn: duckdb.DuckDBPyConnection,
    label_world: GeneratedWorld,
    label_key: AnswerKey,
    tmp_path: Path,
) -> None:
    """The check reads the answer key on a second connection while it fingerprints the
    world: it matches as before, a tampered key is told from its world, and a key that is
    gone is named (the second connection's error, raised by the check)."""
    _through_the_fixtures_stage(conn, label_world, label_key, tmp_path)
    assert world_stages.check_fixtures_match_world(conn).matches
    conn.execute("UPDATE truth.artist_ledger SET gross_micro = gross_micro + 1")
    tampered = world_stages.check_fixtures_match_world(conn)
    assert not tampered.matches
    assert tampered.warehouse_world_fingerprint == label_world.fingerprint
    assert tampered.warehouse_answer_key_fingerprint != label_key.fingerprint
    for (name,) in conn.execute(
        "SELECT table_name FROM information_schema.tables WHERE table_schema = 'truth'"
    ).fetchall():
        conn.execute(f"DROP TABLE truth.{name}")
    with pytest.raises(WarehouseError, match="warehouse schema 'truth' is empty or missing"):
        world_stages.check_fixtures_match_world(conn)


class _Recorded:
    """What the label plugin's answer key and suite were asked for, and on which thread."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, *, key_error: Exception | None = None):
        self.calls: list[tuple[str, str]] = []
        self.results: dict[str, object] = {}
        plugin_type = type(get_world_plugin("label"))
        answer_key, build_suite = plugin_type.answer_key, plugin_type.build_suite

        def recorded_key(plugin: object, world: GeneratedWorld) -> AnswerKey:
            self.calls.append(("answer_key", threading.current_thread().name))
            if key_error is not None:
                raise key_error
            self.results["answer_key"] = answer_key(plugin, world)  # type: ignore[arg-type]
            return self.results["answer_key"]  # type: ignore[return-value]

        def recorded_suite(plugin: object, world: GeneratedWorld, key: AnswerKey) -> object:
            self.calls.append(("build_suite", threading.current_thread().name))
            self.results["build_suite"] = build_suite(plugin, world, key)  # type: ignore[arg-type]
            return self.results["build_suite"]

        monkeypatch.setattr(plugin_type, "answer_key", recorded_key)
        monkeypatch.setattr(plugin_type, "build_suite", recorded_suite)


def _config(seed: int = 21) -> object:
    from eval_pipeline.paths import default_world_config
    from eval_pipeline.world import load_world_config

    return load_world_config(default_world_config(), seed=seed, scale=0.05)


def test_a_small_world_s_answer_key_and_suite_are_computed_while_it_is_written(
    conn: duckdb.DuckDBPyConnection, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    recorded = _Recorded(monkeypatch)
    hand_off = world_stages.WorldHandOff()
    world_stages.world_stage(conn, _config(), hand_off, compute_ahead=True)
    world, answer_key, _ = world_stages.answer_key_stage(conn, hand_off)
    fixture_set = world_stages.fixtures_stage(conn, tmp_path / "fixtures", hand_off)
    # Each computed once, on the background thread, and the stages took those very results.
    assert [name for name, _ in recorded.calls] == ["answer_key", "build_suite"]
    assert all(thread.startswith("world-ahead") for _, thread in recorded.calls)
    assert answer_key is recorded.results["answer_key"]
    cases = recorded.results["build_suite"]
    assert isinstance(cases, list) and fixture_set.manifest.case_count == len(cases)
    # The same fixture set as computed in line, stage by stage.
    computed = world_stages.freeze_suite(
        world, get_world_plugin("label").answer_key(world), tmp_path / "again"
    )
    assert computed.fixture_id == fixture_set.fixture_id


@pytest.mark.parametrize("ahead", [True, False], ids=["computing-ahead", "nothing-ahead"])
def test_the_stages_write_on_one_duckdb_thread_only_while_the_key_and_suite_compute_beside(
    conn: duckdb.DuckDBPyConnection, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ahead: bool
) -> None:
    """The world's and the answer key's writes leave the other cores to the computing the
    run waits on, and only then; the connection's setting is given back after each."""

    def threads() -> int:
        row = conn.execute("SELECT current_setting('threads')").fetchone()
        assert row is not None
        return int(row[0])

    every = threads()
    assert every > 1
    suite_held = threading.Event()
    plugin_type = type(get_world_plugin("label"))
    build_suite = plugin_type.build_suite

    def held_suite(plugin: object, world: GeneratedWorld, key: AnswerKey) -> object:
        assert suite_held.wait(60)  # still computing while both stages write
        return build_suite(plugin, world, key)  # type: ignore[arg-type]

    monkeypatch.setattr(plugin_type, "build_suite", held_suite)
    written: dict[str, int] = {}
    write_tables = world_stages.write_tables

    def recorded(c: duckdb.DuckDBPyConnection, schema: str, tables: object) -> object:
        written.setdefault(schema, threads())
        return write_tables(c, schema, tables)  # type: ignore[arg-type]

    monkeypatch.setattr(world_stages, "write_tables", recorded)
    hand_off = world_stages.WorldHandOff()
    world_stages.world_stage(conn, _config(), hand_off, compute_ahead=ahead)
    assert threads() == every
    world_stages.answer_key_stage(conn, hand_off)
    assert threads() == every
    suite_held.set()
    world_stages.fixtures_stage(conn, tmp_path / "fixtures", hand_off)
    assert written["world"] == written["truth"] == (1 if ahead else every)


@pytest.mark.parametrize("why", ["run stops at the world", "world too large"])
def test_nothing_is_computed_ahead_for_a_run_that_stops_at_the_world_or_a_large_world(
    conn: duckdb.DuckDBPyConnection, monkeypatch: pytest.MonkeyPatch, why: str
) -> None:
    recorded = _Recorded(monkeypatch)
    if why == "world too large":
        monkeypatch.setattr(world_stages, "AHEAD_MAX_ROWS", 100)
    hand_off = world_stages.WorldHandOff()
    world_stages.world_stage(conn, _config(), hand_off, compute_ahead=why == "world too large")
    assert recorded.calls == []
    world_stages.answer_key_stage(conn, hand_off)
    assert recorded.calls == [("answer_key", threading.current_thread().name)]


def test_an_answer_key_that_fails_ahead_fails_the_answer_key_stage_and_keeps_the_world(
    conn: duckdb.DuckDBPyConnection, monkeypatch: pytest.MonkeyPatch
) -> None:
    _Recorded(monkeypatch, key_error=WorldError("the answer key broke"))
    hand_off = world_stages.WorldHandOff()
    summary = world_stages.world_stage(conn, _config(), hand_off, compute_ahead=True)
    with pytest.raises(WorldError, match="the answer key broke"):
        world_stages.answer_key_stage(conn, hand_off)
    assert world_stages.load_world(conn).fingerprint == summary.fingerprint


def test_what_was_computed_ahead_is_not_taken_for_another_world_in_the_warehouse(
    conn: duckdb.DuckDBPyConnection, small: tuple[GeneratedWorld, AnswerKey]
) -> None:
    other, other_key = small
    hand_off = world_stages.WorldHandOff()
    world_stages.world_stage(conn, _config(seed=5), hand_off, compute_ahead=True)
    world_stages.store_world(conn, other)  # Replaced behind the run's back.
    world, answer_key, _ = world_stages.answer_key_stage(conn, hand_off)
    assert world.fingerprint == other.fingerprint
    assert answer_key.fingerprint == other_key.fingerprint


def test_a_world_that_fails_to_be_stored_is_not_handed_on(
    conn: duckdb.DuckDBPyConnection, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken_store(connection: duckdb.DuckDBPyConnection, world: GeneratedWorld) -> None:
        raise WarehouseError("disk full")

    recorded = _Recorded(monkeypatch)
    hand_off = world_stages.WorldHandOff()
    with monkeypatch.context() as patch:
        patch.setattr(world_stages, "store_world", broken_store)
        with pytest.raises(WarehouseError, match="disk full"):
            world_stages.world_stage(conn, _config(), hand_off, compute_ahead=True)
    for thread in threading.enumerate():
        if thread.name.startswith("world-ahead"):
            thread.join()
    # The suite of a world that was not stored is not built (the answer key may have started).
    assert "build_suite" not in [name for name, _ in recorded.calls]
    # Nothing stored, nothing handed on: the next stage finds no world, and says so.
    with pytest.raises(WarehouseError, match=r"meta\.world_info"):
        world_stages.answer_key_stage(conn, hand_off)


_WHOLE_PATH_IMPORTS = """
import importlib.util, sys, tempfile
from pathlib import Path

# The world bench's path is the main job's: the four stages, each on its own connection.
spec = importlib.util.spec_from_file_location("bench_world_gen", sys.argv[1])
bench = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench)
bench.run_pipeline(0.05, Path(tempfile.mkdtemp()) / "w.duckdb")
print(sorted({name.split(".")[0] for name in sys.modules} & {"pyarrow", "sqlglot", "pandas"}))
"""


def test_the_main_job_s_path_to_its_checked_fixtures_imports_no_library_it_does_not_use() -> None:
    """Found timing the world bench: reading the world back for the blocking check imported
    pyarrow (DuckDB's `.pl()` goes through a pyarrow table) and freezing the suite imported
    sqlglot (to check the cases' trace-check names): 0.13 s and 0.1 s on the path the main
    job waits on, for no table and no query."""
    done = subprocess.run(
        [sys.executable, "-c", _WHOLE_PATH_IMPORTS, str(PROJECT_ROOT / "bench" / "world_gen.py")],
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout.strip().splitlines()[-1] == "[]"
