"""Assets for the world, its answer key and the frozen fixtures, with their blocking check."""

from pathlib import Path
from typing import ClassVar

import dagster as dg
from pydantic import Field

from eval_pipeline.defs.code_versions import asset_code_version
from eval_pipeline.defs.figures import AssetFigures, FilePath
from eval_pipeline.defs.keys import (
    ANSWER_KEY_ASSET,
    FIXTURES_ASSET,
    WAREHOUSE_POOL,
    WORLD_ASSET,
    WORLD_CONFIG_SOURCE,
    WORLD_GROUP,
)
from eval_pipeline.defs.resources import ProjectSettings, WarehouseResource
from eval_pipeline.errors import FixtureIntegrityError
from eval_pipeline.world import registered_worlds

GENERATORS = "+".join(world.generator_version for world in registered_worlds().values())
"""The installed worlds' generator versions: the readable part of the world assets' code
versions (their hash covers each world's source)."""
SUITES = "+".join(
    f"{world.generator_version}/{world.suite_version}" for world in registered_worlds().values()
)


class WorldFigures(AssetFigures):
    asset: ClassVar[str] = WORLD_ASSET
    seed: int
    world_fingerprint: str
    row_counts: dict[str, int]


class AnswerKeyFigures(AssetFigures):
    asset: ClassVar[str] = ANSWER_KEY_ASSET
    world_fingerprint: str
    answer_key_fingerprint: str
    row_counts: dict[str, int]


class FixturesFigures(AssetFigures):
    asset: ClassVar[str] = FIXTURES_ASSET
    fixture_id: str
    path: FilePath
    world_fingerprint: str
    case_count: int = Field(alias="dagster/row_count")
    core_cases: int


@dg.asset(
    name=WORLD_ASSET,
    group_name=WORLD_GROUP,
    kinds={"polars", "duckdb"},
    deps=[WORLD_CONFIG_SOURCE],
    pool=WAREHOUSE_POOL,
    code_version=asset_code_version(GENERATORS, __name__),
)
def world_asset(
    context: dg.AssetExecutionContext, settings: ProjectSettings, warehouse: WarehouseResource
) -> dg.MaterializeResult[None]:
    """The synthetic world, generated from one seed and loaded into the `world` schema."""
    from eval_pipeline import world_stages
    from eval_pipeline.world import load_world_config

    config = load_world_config(Path(settings.world_config_path))
    # The answer key and suite are computed while the world is written only when this run
    # goes on to both (a run that stops short would compute them for nothing). The run's
    # job is the subset it executes, so its asset layer says what will run.
    running = context.job_def.asset_layer.selected_asset_keys
    compute_ahead = {dg.AssetKey(ANSWER_KEY_ASSET), dg.AssetKey(FIXTURES_ASSET)} <= running
    with warehouse.connection() as conn:
        summary = world_stages.world_stage(
            conn, config, warehouse.hand_off, compute_ahead=compute_ahead
        )
    context.log.info(
        f"world {summary.plugin} seed={summary.seed} fingerprint={summary.fingerprint}"
    )
    return dg.MaterializeResult(
        data_version=dg.DataVersion(summary.fingerprint),
        metadata={
            **WorldFigures(
                seed=summary.seed,
                world_fingerprint=summary.fingerprint,
                row_counts=dict(summary.row_counts),
            ).metadata(),
            "plugin": summary.plugin,
            "scale": summary.scale,
            "dagster/row_count": sum(summary.row_counts.values()),
            "warehouse": dg.MetadataValue.path(warehouse.path),
        },
    )


@dg.asset(
    name=ANSWER_KEY_ASSET,
    group_name=WORLD_GROUP,
    deps=[WORLD_ASSET],
    kinds={"polars", "duckdb"},
    pool=WAREHOUSE_POOL,
    code_version=asset_code_version(GENERATORS, __name__),
)
def answer_key_asset(warehouse: WarehouseResource) -> dg.MaterializeResult[None]:
    """Truth tables computed from the clean world data, kept in the `truth` schema."""
    from eval_pipeline import world_stages

    with warehouse.connection() as conn:
        world, answer_key, counts = world_stages.answer_key_stage(conn, warehouse.hand_off)
    return dg.MaterializeResult(
        data_version=dg.DataVersion(answer_key.fingerprint),
        metadata={
            **AnswerKeyFigures(
                world_fingerprint=world.fingerprint,
                answer_key_fingerprint=answer_key.fingerprint,
                row_counts=counts,
            ).metadata(),
            "dagster/row_count": sum(counts.values()),
        },
    )


@dg.asset(
    name=FIXTURES_ASSET,
    group_name=WORLD_GROUP,
    deps=[WORLD_ASSET, ANSWER_KEY_ASSET],
    kinds={"json"},
    pool=WAREHOUSE_POOL,
    code_version=asset_code_version(SUITES, __name__),
)
def fixtures_asset(
    settings: ProjectSettings, warehouse: WarehouseResource
) -> dg.MaterializeResult[None]:
    """The suite frozen as a content-addressed fixture set under the fixtures root."""
    from eval_pipeline import world_stages
    from eval_pipeline.cases.preview import category_preview_markdown

    with warehouse.connection() as conn:
        fixture_set = world_stages.fixtures_stage(
            conn, Path(settings.fixtures_root), warehouse.hand_off
        )
    manifest = fixture_set.manifest
    return dg.MaterializeResult(
        data_version=dg.DataVersion(manifest.fixture_id),
        metadata={
            **FixturesFigures(
                fixture_id=manifest.fixture_id,
                path=str(fixture_set.path),
                world_fingerprint=manifest.world.fingerprint,
                case_count=manifest.case_count,
                core_cases=manifest.core_count,
            ).metadata(),
            "suite_hash": manifest.suite_hash,
            "categories": dg.MetadataValue.md(category_preview_markdown(fixture_set)),
        },
    )


@dg.asset_check(asset=FIXTURES_ASSET, blocking=True)
def fixtures_match_world(warehouse: WarehouseResource) -> dg.AssetCheckResult:
    """The frozen fixtures verify by hash and were built from the world in the warehouse."""
    from eval_pipeline import world_stages

    with warehouse.connection() as conn:
        try:
            match = world_stages.check_fixtures_match_world(conn)
        except FixtureIntegrityError as error:
            # A tampered or missing set is this check's failure, shown with its cause.
            return dg.AssetCheckResult(
                passed=False,
                severity=dg.AssetCheckSeverity.ERROR,
                metadata={"error": str(error)},
            )
    return dg.AssetCheckResult(
        passed=match.matches,
        severity=dg.AssetCheckSeverity.ERROR,
        metadata={
            "fixture_id": match.fixture_id,
            "fixture_world_fingerprint": match.fixture_world_fingerprint,
            "warehouse_world_fingerprint": match.warehouse_world_fingerprint,
            "fixture_answer_key_fingerprint": match.fixture_answer_key_fingerprint,
            "warehouse_answer_key_fingerprint": match.warehouse_answer_key_fingerprint,
        },
    )
