"""The lanes on a real Dagster instance and DuckDB file: partitions, healing, the sensor,
the nightly schedule, and the asset graph pinned by a snapshot."""

from __future__ import annotations

import json
from datetime import UTC
from pathlib import Path
from typing import Any

import dagster as dg
import duckdb
import pytest

from eval_pipeline.defs.keys import (
    MODEL_LANE_RECORDS_ASSET,
    MODEL_LANE_RUNS_ASSET,
    MODELS_PARTITIONS,
)
from eval_pipeline.defs.lane_assets import (
    agent_world_asset,
    lane_runs_asset,
)
from eval_pipeline.defs.lane_automation import model_configs_sensor, nightly_schedule_for
from eval_pipeline.defs.lane_warehouse_assets import lane_warehouse_asset
from eval_pipeline.defs.world_assets import answer_key_asset, fixtures_asset, world_asset
from eval_pipeline.lanes.sweep_config import SweepConfig, load_sweep_config
from eval_pipeline.paths import CONFIGS_DIR
from eval_pipeline.project_configs import scan_model_configs
from eval_pipeline.providers.envelope import JOURNAL_NAME
from eval_pipeline.sim import process as sim_process
from eval_pipeline.sim.process import SIM_REQUEST_LOG
from eval_pipeline_tests.defs.conftest import NO_FAULTS, lane_resources

SNAPSHOT = Path(__file__).with_name("asset_graph.json")


def describe_partitions(partitions: dg.PartitionsDefinition | None) -> object:
    if partitions is None:
        return None
    if isinstance(partitions, dg.MultiPartitionsDefinition):
        return {
            dim.name: describe_partitions(dim.partitions_def) for dim in partitions.partitions_defs
        }
    if isinstance(partitions, dg.DynamicPartitionsDefinition):
        return f"dynamic:{partitions.name}"
    if isinstance(partitions, dg.StaticPartitionsDefinition):
        return partitions.get_partition_keys()
    return type(partitions).__name__


def graph_snapshot() -> dict[str, object]:
    """Keys, deps, partitions, checks, pools, code versions and automation conditions of
    every asset; the jobs,
    sensors and schedules: what a change to the graph must show in review."""
    from eval_pipeline.definitions import defs

    graph = defs.resolve_asset_graph()
    assets = {}
    for key in sorted(graph.get_all_asset_keys(), key=lambda k: k.to_user_string()):
        node = graph.get(key)
        partitions = node.partitions_def
        assets[key.to_user_string()] = {
            "deps": sorted(parent.to_user_string() for parent in node.parent_keys),
            "group": node.group_name,
            "partitions": describe_partitions(partitions),
            "pool": sorted(node.pools) if node.pools else None,
            # the label only: the source hash after "@" moves with every edit of what the
            # asset runs (test_source_versions.py checks it)
            "code_version": (node.code_version or "").split("@")[0] or None,
            "checks": sorted(check.name for check in node.check_keys),
            # what runs it after its inputs (eval_pipeline/defs/automation.py)
            "automation": node.automation_condition.get_label()
            if node.automation_condition is not None
            else None,
        }
    return {
        "assets": assets,
        "jobs": sorted(
            job.name for job in defs.resolve_all_job_defs() if not job.name.startswith("__")
        ),
        "sensors": sorted(sensor.name for sensor in defs.sensors or []),
        "schedules": sorted(schedule.name for schedule in defs.schedules or []),
    }


def test_the_asset_graph_is_pinned() -> None:
    snapshot = graph_snapshot()
    assert snapshot == json.loads(SNAPSHOT.read_text(encoding="utf-8")), (
        "the asset graph changed; if on purpose, update "
        "eval_pipeline_tests/defs/asset_graph.json:\n"
        + json.dumps(snapshot, indent=1, sort_keys=True)
    )


def test_a_partition_with_infrastructure_errors_is_healed_by_rematerializing_it(
    lane_home: Path,
) -> None:
    key = dg.MultiPartitionKey({"model": "sim-flaky-heal", "seed": "1"})
    faulty = {**NO_FAULTS, "server_error": 0.3}
    with dg.DagsterInstance.local_temp(str(lane_home / "dagster_home")) as instance:
        upstream = [world_asset, answer_key_asset, fixtures_asset, agent_world_asset]
        assert dg.materialize(
            upstream, instance=instance, resources=lane_resources(lane_home, faulty)
        ).success
        instance.add_dynamic_partitions(MODELS_PARTITIONS, ["sim-flaky-heal"])
        lane = [lane_runs_asset, lane_warehouse_asset]
        steps = [MODEL_LANE_RUNS_ASSET, MODEL_LANE_RECORDS_ASSET]
        first = dg.materialize(
            lane,
            instance=instance,
            resources=lane_resources(lane_home, faulty),
            partition_key=key,
            selection=steps,
        )
        meta = {
            e.asset_key.to_user_string(): e.materialization.metadata
            for e in first.get_asset_materialization_events()
        }
        failed = meta["model_lane_runs"]["infra_errors"].value
        assert isinstance(failed, int) and failed > 0
        second = dg.materialize(
            lane,
            instance=instance,
            resources=lane_resources(lane_home, NO_FAULTS),
            partition_key=key,
            selection=steps,
        )
        healed = {
            e.asset_key.to_user_string(): e.materialization.metadata
            for e in second.get_asset_materialization_events()
        }["model_lane_runs"]
        assert healed["cases_run"].value == failed
        assert healed["cases_healed"].value == failed
        assert healed["infra_errors"].value == 0
        run_id = str(healed["run_id"].value)
    # Counted on the server: the second run sent exactly the failed cases, nothing else.
    requests = (lane_home / "runs" / run_id / SIM_REQUEST_LOG).read_text().splitlines()
    assert len(requests) == failed
    conn = duckdb.connect(str(lane_home / "warehouse.duckdb"), read_only=True)
    try:
        attempts = conn.execute(
            "SELECT attempt, status, count(*) FROM runs.case_runs GROUP BY 1, 2 ORDER BY 1, 2"
        ).fetchall()
        outcomes = conn.execute(
            "SELECT status, count(*) FROM runs.case_outcomes GROUP BY 1"
        ).fetchall()
    finally:
        conn.close()
    # The failed attempts stay on record; the current view shows the healed ones.
    assert (2, "completed", failed) in attempts
    assert "infra_error" in {status for _, status, _ in attempts}
    assert outcomes == [("completed", 133)]


def test_a_partitions_lanes_and_judge_share_one_simulated_provider_process(
    lane_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each lane's session (and the judge's) is a tenant of one server the run starts, not
    a server each (three processes a run before): each still has its own request log."""
    started: list[dict[str, object]] = []
    real = sim_process.running_sim

    def counted(**kwargs: Any) -> Any:
        started.append(kwargs)
        return real(**kwargs)

    key = dg.MultiPartitionKey({"model": "sim-strong", "seed": "0"})
    with dg.DagsterInstance.local_temp(str(lane_home / "dagster_home")) as instance:
        upstream = [world_asset, answer_key_asset, fixtures_asset, agent_world_asset]
        assert dg.materialize(upstream, instance=instance, resources=lane_resources(lane_home))
        instance.add_dynamic_partitions(MODELS_PARTITIONS, ["sim-strong"])
        monkeypatch.setattr(sim_process, "running_sim", counted)
        result = dg.materialize(
            [lane_runs_asset], instance=instance, resources=lane_resources(lane_home),
            partition_key=key,
        )  # fmt: skip
        assert result.success
        meta = {
            e.asset_key.to_user_string(): e.materialization.metadata
            for e in result.get_asset_materialization_events()
        }
    assert len(started) == 1, started
    for lane in ("model_lane_runs", "product_lane_runs"):
        run_id = str(meta[lane]["run_id"].value)
        calls = len((lane_home / "runs" / run_id / SIM_REQUEST_LOG).read_text().splitlines())
        journal = lane_home / "runs" / run_id / JOURNAL_NAME
        sent = {json.loads(line)["envelope_id"] for line in journal.read_text().splitlines()}
        assert calls > 0 and calls == len(sent), (lane, calls)  # each lane's own requests
    judged = meta["product_lane_runs"]["judge_asked"].value
    assert isinstance(judged, int) and judged > 0  # the judge's session was a tenant too
    (judge_log,) = (lane_home / "runs").glob("judge-*/" + SIM_REQUEST_LOG)
    assert judge_log.read_text().splitlines()


def test_a_new_model_config_adds_its_partitions_through_the_sensor(lane_home: Path) -> None:
    with dg.DagsterInstance.local_temp(str(lane_home / "dagster_home")) as instance:
        context = dg.build_sensor_context(instance_ref=instance.get_ref())
        result = model_configs_sensor(context)
        assert isinstance(result, dg.SensorResult)
        [request] = result.dynamic_partitions_requests or []
        # the test's own configs, added to the shipped ones (EVALP_MODELS_DIR adds)
        shipped = scan_model_configs(CONFIGS_DIR / "models").configs
        assert sorted(request.partition_keys) == sorted({*shipped, "sim-flaky-heal"})
        # runs only for the sweep's models (the committed sweep's), not every config
        sweep = load_sweep_config()
        requested = sorted(str(r.partition_key) for r in result.run_requests or [])
        assert requested == sorted(f"{m}|{s}" for m in sweep.models for s in sweep.seeds)
        assert set(sweep.models) < set(request.partition_keys)
        instance.add_dynamic_partitions(MODELS_PARTITIONS, list(request.partition_keys))
        again = model_configs_sensor(dg.build_sensor_context(instance_ref=instance.get_ref()))
        assert isinstance(again, dg.SkipReason)


def test_the_nightly_schedule_requests_every_partition_once_a_night(lane_home: Path) -> None:
    sweep = SweepConfig(
        name="nightly", models=("sim-tool-responder-openai", "not-registered"), seeds=(0, 1)
    )
    schedule = nightly_schedule_for(sweep)
    with dg.DagsterInstance.local_temp(str(lane_home / "dagster_home")) as instance:
        instance.add_dynamic_partitions(MODELS_PARTITIONS, ["sim-tool-responder-openai"])
        from datetime import datetime

        when = datetime(2026, 12, 1, 2, 0, tzinfo=UTC)
        from eval_pipeline.definitions import defs

        context = dg.build_schedule_context(
            instance=instance,
            scheduled_execution_time=when,
            repository_def=defs.get_repository_def(),
        )
        requests = schedule.evaluate_tick(context).run_requests or []
        assert sorted(str(r.partition_key) for r in requests) == [
            "sim-tool-responder-openai|0",
            "sim-tool-responder-openai|1",
        ]
        assert {r.run_key for r in requests} == {
            "nightly-2026-12-01:sim-tool-responder-openai|0",
            "nightly-2026-12-01:sim-tool-responder-openai|1",
        }
        assert all(r.tags["evalp/provider"] == "simulated" for r in requests)
