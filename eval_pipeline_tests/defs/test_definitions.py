"""The Dagster definitions load, and the world assets materialize on a real instance."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import dagster as dg
import duckdb
import pytest

from eval_pipeline import world_stages
from eval_pipeline.defs.keys import ANSWER_KEY_ASSET, FIXTURES_ASSET, MAIN_JOB, WORLD_ASSET
from eval_pipeline.defs.provider_assets import provider_calibration_asset
from eval_pipeline.defs.resources import ProjectSettings, SimulatedProvider, WarehouseResource
from eval_pipeline.defs.world_assets import (
    answer_key_asset,
    fixtures_asset,
    fixtures_match_world,
    world_asset,
)
from eval_pipeline.world import get_world_plugin


def test_definitions_load() -> None:
    from eval_pipeline.definitions import defs

    dg.Definitions.validate_loadable(defs)
    job = defs.resolve_job_def(MAIN_JOB)
    assert job.name == MAIN_JOB
    keys = {key.to_user_string() for key in defs.resolve_asset_graph().get_all_asset_keys()}
    assert {WORLD_ASSET, ANSWER_KEY_ASSET, FIXTURES_ASSET} <= keys


@pytest.fixture
def small_world_config(tmp_path: Path) -> Path:
    config = tmp_path / "small.yaml"
    config.write_text("plugin: label\nseed: 12\nscale: 0.05\n")
    return config


def _resources(home: Path, world_config: Path) -> dict[str, object]:
    return {
        "warehouse": WarehouseResource(path=str(home / "warehouse.duckdb")),
        "settings": ProjectSettings(
            world_config_path=str(world_config), fixtures_root=str(home / "fixtures")
        ),
    }


def test_world_answer_key_fixtures_materialize_and_check_passes(
    isolated_state: Path, small_world_config: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assets = [world_asset, answer_key_asset, fixtures_asset, fixtures_match_world]
    read_backs: list[str] = []
    load_world = world_stages.load_world
    monkeypatch.setattr(
        world_stages, "load_world", lambda conn: read_backs.append("world") or load_world(conn)
    )
    ahead = _record_compute_ahead(monkeypatch)
    computed_on = _record_threads(monkeypatch)
    with dg.DagsterInstance.local_temp(str(isolated_state / "dagster_home")) as instance:
        result = dg.materialize(
            assets, instance=instance, resources=_resources(isolated_state, small_world_config)
        )
        assert result.success
        materialized = {
            event.asset_key.to_user_string() for event in result.get_asset_materialization_events()
        }
        assert materialized == {WORLD_ASSET, ANSWER_KEY_ASSET, FIXTURES_ASSET}
        # The run hands the world from stage to stage: the answer key and the fixtures never
        # read it back (the check reads it on its own, by design).
        assert read_backs == []
        # ... and computes the answer key and suite while the world is written, and the
        # answer key and fixtures assets take what was computed there.
        assert ahead == [True]
        assert computed_on == {"answer_key": ["world-ahead"], "build_suite": ["world-ahead"]}
        [check] = result.get_asset_check_evaluations()
        assert check.passed
        fixture_id = str(check.metadata["fixture_id"].value)
        assert (isolated_state / "fixtures" / fixture_id / "manifest.json").is_file()
        recorded = instance.fetch_materializations(dg.AssetKey(FIXTURES_ASSET), limit=1)
        assert recorded.records[0].asset_materialization is not None

    conn = duckdb.connect(str(isolated_state / "warehouse.duckdb"), read_only=True)
    schemas = {
        row[0] for row in conn.execute("SELECT schema_name FROM duckdb_schemas()").fetchall()
    }
    conn.close()
    assert {"world", "truth", "meta"} <= schemas


def _record_compute_ahead(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Whether each world stage was asked to compute the answer key and suite ahead."""
    asked: list[bool] = []
    world_stage = world_stages.world_stage

    def recording(*args: object, compute_ahead: bool = True) -> object:
        asked.append(compute_ahead)
        return world_stage(*args, compute_ahead=compute_ahead)  # type: ignore[arg-type]

    monkeypatch.setattr(world_stages, "world_stage", recording)
    return asked


def _record_threads(monkeypatch: pytest.MonkeyPatch) -> dict[str, list[str]]:
    """Which threads computed the label world's answer key and suite (thread name prefixes)."""
    threads: dict[str, list[str]] = {"answer_key": [], "build_suite": []}
    plugin_type = type(get_world_plugin("label"))
    for name in threads:
        method = getattr(plugin_type, name)

        def recording(*args: object, _method: Any = method, _name: str = name) -> object:
            threads[_name].append(threading.current_thread().name.split("_")[0])
            return _method(*args)

        monkeypatch.setattr(plugin_type, name, recording)
    return threads


@pytest.mark.parametrize(
    "selection", [[WORLD_ASSET], [WORLD_ASSET, ANSWER_KEY_ASSET]], ids=["world", "no fixtures"]
)
def test_a_run_that_stops_short_of_the_fixtures_computes_nothing_ahead(
    isolated_state: Path,
    small_world_config: Path,
    monkeypatch: pytest.MonkeyPatch,
    selection: list[str],
) -> None:
    ahead = _record_compute_ahead(monkeypatch)
    with dg.DagsterInstance.local_temp(str(isolated_state / "dagster_home")) as instance:
        result = dg.materialize(
            [world_asset, answer_key_asset, fixtures_asset],
            instance=instance,
            resources=_resources(isolated_state, small_world_config),
            selection=selection,
        )
    assert result.success
    assert ahead == [False]


def test_check_fails_and_blocks_when_world_changed_behind_the_fixtures(
    isolated_state: Path, small_world_config: Path
) -> None:
    resources = _resources(isolated_state, small_world_config)
    with dg.DagsterInstance.local_temp(str(isolated_state / "dagster_home")) as instance:
        assert dg.materialize(
            [world_asset, answer_key_asset, fixtures_asset], instance=instance, resources=resources
        ).success
        conn = duckdb.connect(str(isolated_state / "warehouse.duckdb"))
        changed = conn.execute(
            "UPDATE world.statement_lines SET units = units + 1 "
            "WHERE line_id = (SELECT min(line_id) FROM world.statement_lines)"
        ).fetchone()
        assert changed == (1,)
        conn.close()
        result = dg.materialize(
            [fixtures_match_world],
            instance=instance,
            resources=resources,
            selection=dg.AssetSelection.checks(fixtures_match_world),
            raise_on_error=False,
        )
        [check] = result.get_asset_check_evaluations()
        assert not check.passed
        assert check.severity == dg.AssetCheckSeverity.ERROR
        assert (
            check.metadata["fixture_world_fingerprint"]
            != check.metadata["warehouse_world_fingerprint"]
        )


def test_provider_calibration_materializes_and_its_check_passes(isolated_state: Path) -> None:
    with dg.DagsterInstance.local_temp(str(isolated_state / "dagster_home")) as instance:
        result = dg.materialize(
            [provider_calibration_asset],
            instance=instance,
            resources={
                "warehouse": WarehouseResource(path=str(isolated_state / "warehouse.duckdb")),
                "sim": SimulatedProvider(),
            },
        )
    assert result.success
    [check] = result.get_asset_check_evaluations()
    assert check.check_name == "planted_labels_recovered" and check.passed
    [event] = result.get_asset_materialization_events()
    metadata = event.materialization.metadata
    assert metadata["calls"].value == 48
    assert "simulated provider" in str(metadata["provider"].value)
    conn = duckdb.connect(str(isolated_state / "warehouse.duckdb"), read_only=True)
    labels = dict(
        conn.execute("SELECT label, count(*) FROM runs.call_outcomes GROUP BY 1").fetchall()
    )
    conn.close()
    assert labels == {
        label: 8 for label in ("drop", "empty", "truncated", "schema", "wrong", "right")
    }


def test_provider_calibration_check_fails_when_a_label_is_misread(
    isolated_state: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import eval_pipeline.providers.calibration as calibration

    # A classifier that files timeouts and 5xx as the model's empty replies.
    monkeypatch.setattr(
        calibration, "planted_label", lambda n: "empty" if n < 4 else calibration.LABELS[n // 4]
    )
    with dg.DagsterInstance.local_temp(str(isolated_state / "dagster_home")) as instance:
        result = dg.materialize(
            [provider_calibration_asset],
            instance=instance,
            resources={
                "warehouse": WarehouseResource(path=str(isolated_state / "warehouse.duckdb")),
                "sim": SimulatedProvider(),
            },
            raise_on_error=False,
        )
    [check] = result.get_asset_check_evaluations()
    assert not check.passed
    assert "PLANTED-0: expected empty, got drop" in str(check.metadata["mismatches"].value)


def test_check_fails_when_the_answer_key_changed_behind_the_fixtures(
    isolated_state: Path, small_world_config: Path
) -> None:
    resources = _resources(isolated_state, small_world_config)
    assets = [world_asset, answer_key_asset, fixtures_asset, fixtures_match_world]
    with dg.DagsterInstance.local_temp(str(isolated_state / "dagster_home")) as instance:
        assert dg.materialize(assets, instance=instance, resources=resources).success
        conn = duckdb.connect(str(isolated_state / "warehouse.duckdb"))
        conn.execute(
            "UPDATE truth.artist_ledger SET net_payable_cents = net_payable_cents + 1 "
            "WHERE artist_id = (SELECT min(artist_id) FROM truth.artist_ledger)"
        )
        conn.close()
        result = dg.materialize(
            assets,
            instance=instance,
            resources=resources,
            selection=dg.AssetSelection.checks(fixtures_match_world),
            raise_on_error=False,
        )
        [check] = result.get_asset_check_evaluations()
        assert not check.passed
        assert (
            check.metadata["fixture_answer_key_fingerprint"]
            != check.metadata["warehouse_answer_key_fingerprint"]
        )
        assert (
            check.metadata["fixture_world_fingerprint"]
            == check.metadata["warehouse_world_fingerprint"]
        )


HEAVY_AT_IMPORT = ("polars", "numpy", "duckdb", "openai", "anthropic", "mlflow", "matplotlib")
"""What the assets import when they run, not when the definitions load (every Dagster
process, the webserver's code location and each `evalp` command load them)."""


def test_loading_the_definitions_imports_no_data_or_sdk_library() -> None:
    import subprocess
    import sys

    probe = (
        "import sys, eval_pipeline.definitions as d; d.defs.resolve_asset_graph(); "
        f"print(sorted(m for m in {HEAVY_AT_IMPORT!r} if m in sys.modules))"
    )
    done = subprocess.run(
        [sys.executable, "-W", "ignore", "-c", probe], capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == "[]"
