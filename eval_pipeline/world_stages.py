"""The world group's stages as plain functions: the world, its answer key and the frozen
fixture set (with the check that they match), as the world assets and the CLI call them.

Each stage reads its inputs from the DuckDB warehouse, computes with Dagster-free domain
code, and writes its outputs back, returning a small summary for metadata and printing.
The lanes, scoring and results have stages of their own in their packages.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import closing, contextmanager
from dataclasses import dataclass
from pathlib import Path

import duckdb
import polars as pl

from eval_pipeline.cases.case import Case
from eval_pipeline.cases.frozen import (
    FixtureSet,
    WorldProvenance,
    freeze_fixtures,
    load_fixtures,
)
from eval_pipeline.errors import FixtureIntegrityError, WarehouseError
from eval_pipeline.warehouse import (
    META_SCHEMA,
    TRUTH_SCHEMA,
    WORLD_INFO_TABLE,
    WORLD_SCHEMA,
    read_schema,
    read_table,
    read_value,
    write_tables,
)
from eval_pipeline.world import plugin_of_world
from eval_pipeline.world.base import AnswerKey, GeneratedWorld, WorldPlugin

FIXTURE_SETS_TABLE = "fixture_sets"
ANSWER_KEY_INFO_TABLE = "answer_key_info"


@dataclass(frozen=True)
class WorldSummary:
    plugin: str
    seed: int
    scale: float
    fingerprint: str
    row_counts: Mapping[str, int]


def store_world(conn: duckdb.DuckDBPyConnection, world: GeneratedWorld) -> WorldSummary:
    """Load the world's tables into the `world` schema and record its provenance."""
    counts = write_tables(conn, WORLD_SCHEMA, world.tables)
    info = pl.DataFrame(
        {
            "plugin": [world.plugin],
            "generator_version": [world.generator_version],
            "seed": [world.seed],
            "scale": [world.scale],
            "fingerprint": [world.fingerprint],
        }
    )
    write_tables(conn, META_SCHEMA, {WORLD_INFO_TABLE: info})
    return WorldSummary(world.plugin, world.seed, world.scale, world.fingerprint, counts)


def load_world(conn: duckdb.DuckDBPyConnection) -> GeneratedWorld:
    """Read the world back from the warehouse, refusing one whose tables no longer match."""
    info = read_table(conn, META_SCHEMA, WORLD_INFO_TABLE).row(0, named=True)
    plugin = plugin_of_world(info["plugin"])
    tables = read_schema(conn, WORLD_SCHEMA, keep_codes=True)
    world = plugin.world_from_tables(info["seed"], info["scale"], tables)
    if world.fingerprint != info["fingerprint"]:
        raise WarehouseError(
            f"warehouse world tables do not match their recorded fingerprint: recorded "
            f"{info['fingerprint']}, actual {world.fingerprint}; re-materialize the world"
        )
    return world


def store_answer_key(conn: duckdb.DuckDBPyConnection, answer_key: AnswerKey) -> dict[str, int]:
    counts = write_tables(conn, TRUTH_SCHEMA, answer_key.tables)
    info = pl.DataFrame({"fingerprint": [answer_key.fingerprint]})
    write_tables(conn, META_SCHEMA, {ANSWER_KEY_INFO_TABLE: info})
    return counts


def load_answer_key(conn: duckdb.DuckDBPyConnection, world: GeneratedWorld) -> AnswerKey:
    """Read the answer key for `world`, refusing truth tables that changed since written."""
    recorded = str(read_value(conn, META_SCHEMA, ANSWER_KEY_INFO_TABLE, "fingerprint"))
    plugin = plugin_of_world(world.plugin)
    answer_key = plugin.answer_key_from_tables(world, read_schema(conn, TRUTH_SCHEMA))
    if answer_key.fingerprint != recorded:
        raise WarehouseError(
            f"warehouse truth tables do not match their recorded fingerprint (recorded "
            f"{recorded}, actual {answer_key.fingerprint}) or belong to another world; "
            "re-materialize the answer key"
        )
    return answer_key


AHEAD_MAX_ROWS = 1_000_000
"""A world with fewer rows than this (all its tables) has its answer key and suite computed
on a background thread while the world stage writes it to DuckDB (see :class:`WorldHandOff`).
Not at scale: there the write's buffers would sit on top of the answer key's own peak."""


class _Ahead:
    """The answer key and suite of one world, computed on a background thread while the
    stage that kept the world writes it: the write is DuckDB's own (threaded, GIL released)
    and the two overlap. A failure is raised by the stage that asks for the result, the one
    that would have computed it."""

    def __init__(self, world: GeneratedWorld) -> None:
        self.world = world
        plugin = plugin_of_world(world.plugin)
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="world-ahead")
        self.answer_key: Future[AnswerKey] = self._executor.submit(plugin.answer_key, world)
        self.cases: Future[list[Case]] = self._executor.submit(
            lambda: plugin.build_suite(world, self.answer_key.result())
        )
        self._executor.shutdown(wait=False)

    def cases_for(self, answer_key: AnswerKey) -> Future[list[Case]] | None:
        """The suite computed ahead, if it was built on this very answer key."""
        key = self.answer_key
        if key.done() and key.exception() is None and key.result() is answer_key:
            return self.cases
        return None

    def cancel(self) -> None:
        """Drop what has not started (what runs finishes, unused: polars cannot be stopped)."""
        self.cases.cancel()
        self.answer_key.cancel()


class WorldHandOff:
    """The world and answer key one stage of a run stored, handed to the next stage of the
    same run: read back from DuckDB (and re-fingerprinted) only when the warehouse now
    records another fingerprint than the one handed over. The fixtures' blocking check
    still reads and re-fingerprints both, so a change behind the run's back is caught.

    Kept with ``compute_ahead``, a small world's answer key and suite are computed on a
    background thread from then on, so the world's DuckDB write and the answer key's
    overlap the computing; the stages take the results only for the very world (and
    answer key) they were computed on."""

    def __init__(self) -> None:
        self._world: GeneratedWorld | None = None
        self._answer_key: AnswerKey | None = None
        self._ahead: _Ahead | None = None

    def keep_world(self, world: GeneratedWorld, *, compute_ahead: bool = False) -> None:
        self._drop_ahead()
        self._world = world
        self._answer_key = None
        if compute_ahead and sum(t.height for t in world.tables.values()) < AHEAD_MAX_ROWS:
            self._ahead = _Ahead(world)

    def keep_answer_key(self, answer_key: AnswerKey) -> None:
        self._answer_key = answer_key

    def world(self, conn: duckdb.DuckDBPyConnection) -> GeneratedWorld:
        recorded = read_value(conn, META_SCHEMA, WORLD_INFO_TABLE, "fingerprint")
        if self._world is None or self._world.fingerprint != recorded:
            self.keep_world(load_world(conn))
        assert self._world is not None
        return self._world

    def release(self) -> None:
        """Let go of the world and answer key (a later stage reads them back if it needs
        them): the fixtures stage is their last consumer in a run, and at scale they are
        most of the memory the run's next steps would otherwise start from."""
        self._drop_ahead()
        self._world = None
        self._answer_key = None

    def _drop_ahead(self) -> None:
        if self._ahead is not None:
            self._ahead.cancel()
            self._ahead = None

    def answer_key(self, conn: duckdb.DuckDBPyConnection, world: GeneratedWorld) -> AnswerKey:
        recorded = read_value(conn, META_SCHEMA, ANSWER_KEY_INFO_TABLE, "fingerprint")
        if self._answer_key is None or self._answer_key.fingerprint != recorded:
            self._answer_key = load_answer_key(conn, world)
        return self._answer_key

    def computing_ahead(self, world: GeneratedWorld) -> bool:
        """Whether this very world's answer key or suite is being computed ahead (and not
        yet done)."""
        ahead = self._ahead_for(world)
        return ahead is not None and not ahead.cases.done()

    def _ahead_for(self, world: GeneratedWorld) -> _Ahead | None:
        """What is being computed ahead, if it is for this very world."""
        ahead = self._ahead
        return ahead if ahead is not None and ahead.world is world else None

    def computed_answer_key(self, world: GeneratedWorld) -> AnswerKey:
        """The answer key of ``world``: the one computed ahead for it, or computed now."""
        ahead = self._ahead_for(world)
        if ahead is not None:
            return ahead.answer_key.result()
        return plugin_of_world(world.plugin).answer_key(world)

    def built_suite(self, world: GeneratedWorld, answer_key: AnswerKey) -> list[Case]:
        """The suite of ``world`` and ``answer_key``: computed ahead on these very two, or
        built now."""
        ahead = self._ahead_for(world)
        cases = ahead.cases_for(answer_key) if ahead is not None else None
        if cases is not None:
            return cases.result()
        return plugin_of_world(world.plugin).build_suite(world, answer_key)


@contextmanager
def _writing_beside(conn: duckdb.DuckDBPyConnection, computing: bool) -> Iterator[None]:
    """While ``computing`` goes on beside this stage's DuckDB write (the answer key and suite
    computed ahead), the write takes one thread: the computing is what the run waits on, and
    DuckDB on every core took it from it (1x on 2 cores: the path 0.06 s shorter over 10
    interleaved pairs, the write itself 0.1 s longer)."""
    if not computing:
        yield
        return
    row = conn.execute("SELECT current_setting('threads')").fetchone()
    assert row is not None
    conn.execute("SET threads = 1")
    try:
        yield
    finally:
        conn.execute(f"SET threads = {int(row[0])}")


def world_stage(
    conn: duckdb.DuckDBPyConnection,
    config: object,
    hand_off: WorldHandOff,
    *,
    compute_ahead: bool = False,
) -> WorldSummary:
    """The world asset: generate from the config and load into the `world` schema.
    ``compute_ahead``: the run goes on to the answer key and the fixtures, so they are
    computed while the world is written (see :class:`WorldHandOff`)."""
    from eval_pipeline.world import build_world

    world = build_world(config)
    hand_off.keep_world(world, compute_ahead=compute_ahead)
    try:
        with _writing_beside(conn, hand_off.computing_ahead(world)):
            return store_world(conn, world)
    except BaseException:
        hand_off.release()  # Not stored: no later stage may take it (or what was computed).
        raise


def answer_key_stage(
    conn: duckdb.DuckDBPyConnection, hand_off: WorldHandOff
) -> tuple[GeneratedWorld, AnswerKey, dict[str, int]]:
    """The answer-key asset: the truth tables of the stored world, into `truth`."""
    world = hand_off.world(conn)
    answer_key = hand_off.computed_answer_key(world)
    with _writing_beside(conn, hand_off.computing_ahead(world)):
        counts = store_answer_key(conn, answer_key)
    hand_off.keep_answer_key(answer_key)
    return world, answer_key, counts


def fixtures_stage(
    conn: duckdb.DuckDBPyConnection, root: Path, hand_off: WorldHandOff
) -> FixtureSet:
    """The fixtures asset: the suite of the stored world and answer key, frozen under
    `root` and recorded as the current world's set. The last stage of a run to use the
    world in memory: the hand-off lets go of it (the blocking check reads it back)."""
    world = hand_off.world(conn)
    answer_key = hand_off.answer_key(conn, world)
    fixture_set = freeze_cases(hand_off.built_suite(world, answer_key), world, answer_key, root)
    record_fixture_set(conn, fixture_set)
    hand_off.release()
    return fixture_set


def world_provenance(world: GeneratedWorld, answer_key: AnswerKey) -> WorldProvenance:
    return WorldProvenance(
        plugin=world.plugin,
        generator_version=world.generator_version,
        seed=world.seed,
        scale=world.scale,
        fingerprint=world.fingerprint,
        answer_key_fingerprint=answer_key.fingerprint,
    )


def freeze_suite(
    world: GeneratedWorld, answer_key: AnswerKey, root: Path, plugin: WorldPlugin | None = None
) -> FixtureSet:
    """Build the plugin's suite on this world and freeze it under `root` (`plugin`: the
    world's plugin with the settings it was built with; default: the configured world's)."""
    plugin = plugin or plugin_of_world(world.plugin)
    cases = plugin.build_suite(world, answer_key)
    return freeze_cases(cases, world, answer_key, root, plugin)


def freeze_cases(
    cases: list[Case],
    world: GeneratedWorld,
    answer_key: AnswerKey,
    root: Path,
    plugin: WorldPlugin | None = None,
) -> FixtureSet:
    """Freeze a suite built on this world and answer key under `root` (a case naming a trace
    check that no installed world or the pipeline has is refused before anything is
    written)."""
    from eval_pipeline.scoring.trace_checks import ensure_known

    ensure_known(name for case in cases for name in case.trace_checks)
    plugin = plugin or plugin_of_world(world.plugin)
    return freeze_fixtures(
        cases, world_provenance(world, answer_key), plugin.suite_version, root, plugin.tool_specs()
    )


def record_fixture_set(conn: duckdb.DuckDBPyConnection, fixture_set: FixtureSet) -> None:
    """Remember which fixture set the current world produced, for the blocking check."""
    row = pl.DataFrame(
        {
            "fixture_id": [fixture_set.fixture_id],
            "path": [str(fixture_set.path)],
            "world_fingerprint": [fixture_set.manifest.world.fingerprint],
            "suite_hash": [fixture_set.manifest.suite_hash],
        }
    )
    write_tables(conn, META_SCHEMA, {FIXTURE_SETS_TABLE: row})


def recorded_fixture_path(conn: duckdb.DuckDBPyConnection) -> Path:
    """The fixture set the main job froze for the world in the warehouse."""
    recorded = read_table(conn, META_SCHEMA, FIXTURE_SETS_TABLE)
    if recorded.height != 1:
        raise FixtureIntegrityError("no fixture set recorded for the current world")
    return Path(recorded["path"][0])


def current_fixture_set(warehouse: Path) -> FixtureSet:
    """The fixture set the main job froze, read through a read-only connection (for the
    CLI's commands that run on it: an experiment, a sweep, the ablation)."""
    from eval_pipeline.warehouse import connect

    if not warehouse.exists():
        raise FixtureIntegrityError(
            f"no warehouse at {warehouse}: run `evalp demo` first (it builds the world and "
            "freezes the fixture set every run uses)"
        )
    conn = connect(warehouse, read_only=True)
    try:
        return load_fixtures(recorded_fixture_path(conn))
    finally:
        conn.close()


@dataclass(frozen=True)
class FixtureWorldMatch:
    fixture_id: str
    fixture_world_fingerprint: str
    warehouse_world_fingerprint: str
    fixture_answer_key_fingerprint: str
    warehouse_answer_key_fingerprint: str

    @property
    def matches(self) -> bool:
        return (
            self.fixture_world_fingerprint == self.warehouse_world_fingerprint
            and self.fixture_answer_key_fingerprint == self.warehouse_answer_key_fingerprint
        )


def check_fixtures_match_world(conn: duckdb.DuckDBPyConnection) -> FixtureWorldMatch:
    """Verify the recorded fixture set's hashes and compare its world and answer key with
    the warehouse's.

    The warehouse fingerprints are recomputed from the tables, not read from the record, so
    a world or answer key changed behind the pipeline's back is caught too.
    """
    fixture_set = load_fixtures(recorded_fixture_path(conn))
    info = read_table(conn, META_SCHEMA, WORLD_INFO_TABLE).row(0, named=True)
    plugin = plugin_of_world(info["plugin"])
    # The answer key is read and its columns hashed on a second connection while the world
    # is read and fingerprinted here: only the key's fingerprint waits for the world's (its
    # salt). Errors are raised in the order the reads come in here.
    with closing(conn.cursor()) as key_conn, ThreadPoolExecutor(max_workers=1) as reader:
        key_tables = reader.submit(_read_digested, key_conn, TRUTH_SCHEMA)
        world = plugin.world_from_tables(
            info["seed"], info["scale"], read_schema(conn, WORLD_SCHEMA, keep_codes=True)
        )
        answer_key = plugin.answer_key_from_tables(world, key_tables.result())
    return FixtureWorldMatch(
        fixture_id=fixture_set.fixture_id,
        fixture_world_fingerprint=fixture_set.manifest.world.fingerprint,
        warehouse_world_fingerprint=world.fingerprint,
        fixture_answer_key_fingerprint=fixture_set.manifest.world.answer_key_fingerprint,
        warehouse_answer_key_fingerprint=answer_key.fingerprint,
    )


def _read_digested(conn: duckdb.DuckDBPyConnection, schema: str) -> dict[str, pl.DataFrame]:
    from eval_pipeline.world.fingerprint import digest_ahead  # with the plugin, as the stages do

    tables = read_schema(conn, schema)
    digest_ahead(tables)
    return tables


def check_main_job_inputs(world_config: Path) -> list[str]:
    """Read and check every config the main job reads, before anything runs: the world
    config, the price book, the model configs the calibration uses and their prices on
    today's date. A problem raises its own error (file and field named), so it is shown
    first and alone instead of inside a run's step failure. Returns one note per invalid
    model config the job does not use (reported, then skipped)."""
    from eval_pipeline.project_configs import load_price_book, scan_model_configs
    from eval_pipeline.providers.calibration import PLANTED_CONFIGS
    from eval_pipeline.providers.harness import utc_today
    from eval_pipeline.world import load_world_config

    load_world_config(world_config)
    book = load_price_book()
    scan = scan_model_configs()
    today = utc_today()
    for config in scan.require(PLANTED_CONFIGS).values():
        book.tier(config.priced_as, today)
    return scan.skipped()
