"""The shipped deploy/dagster.yaml on a real PostgreSQL server: several lane partitions
materialized at once by runs in separate processes (as run workers on several machines
would), with nothing lost in the DuckDB warehouse and every run and event in Postgres.

What this shows: Postgres run, event and schedule storage from the environment; the
`warehouse` pool (limit 1 from `pools: default_limit`) admitting one warehouse step at a
time across processes through the slots kept in Postgres; lane runs writing only their own
journals while they overlap. Two runs that claim the pool's free slot at the same instant
can both get it (Dagster's claim selects a free slot FOR UPDATE on an autocommit
connection, so the row lock is gone before its update): then the later writer waits for
DuckDB's lock (`warehouse.connect_when_free`) and nothing fails or is lost.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import dagster as dg
import duckdb
import pytest
import sqlalchemy as sa
import yaml
from dagster_postgres import (
    PostgresEventLogStorage,
    PostgresRunStorage,
    PostgresScheduleStorage,
)

from eval_pipeline import paths
from eval_pipeline.cases.frozen import load_fixtures
from eval_pipeline.defs.keys import (
    FIXTURES_ASSET,
    PROVIDER_TAG,
    WAREHOUSE_POOL,
)
from eval_pipeline.defs.lane_assets import LANE_RUNS_STEP
from eval_pipeline.defs.lane_warehouse_assets import LANE_WAREHOUSE_STEP
from eval_pipeline.journal import read_records
from eval_pipeline.lane_records import CaseRun
from eval_pipeline.lanes.partition_runs import CASES_JOURNAL, partition_dir
from eval_pipeline.providers.envelope import JOURNAL_NAME, read_journal
from eval_pipeline_tests.deploy.conftest import DEPLOY_DIR, Deployment

RUNS = (
    ("model", "sim-strong", "0"),
    ("model", "sim-small", "1"),
    ("product", "sim-strong", "1"),
)
"""One run each, all at once: lane, model, seed."""
WAREHOUSE_STEPS = (LANE_WAREHOUSE_STEP,)
LANE_RUN_STEPS = (LANE_RUNS_STEP,)
LOCK_WORDS = ("database is locked", "could not set lock", "conflicting lock")
WAITED = "retrying eval_pipeline.warehouse.connect"
"""How `connect_when_free` logs a wait for another process's DuckDB lock."""
WORKER_TIMEOUT_S = 240


def step_windows(
    instance: dg.DagsterInstance, run_ids: list[str]
) -> dict[tuple[str, str], tuple[float, float]]:
    """(run, step) -> (start, end) from the STEP_START and STEP_SUCCESS events in storage."""
    windows: dict[tuple[str, str], list[float]] = {}
    for run_id in run_ids:
        for entry in instance.all_logs(
            run_id, of_type={dg.DagsterEventType.STEP_START, dg.DagsterEventType.STEP_SUCCESS}
        ):
            key = (run_id, str(entry.step_key))
            windows.setdefault(key, [0.0, 0.0])
            slot = 0 if entry.dagster_event_type == dg.DagsterEventType.STEP_START else 1
            windows[key][slot] = entry.timestamp
    return {key: (start, end) for key, (start, end) in windows.items()}


def overlapping(
    windows: dict[tuple[str, str], tuple[float, float]], steps: tuple[str, ...]
) -> list[tuple[tuple[str, str], tuple[str, str]]]:
    """Pairs of the given steps, from different runs, whose windows overlap in time."""
    chosen = sorted(
        ((key, window) for key, window in windows.items() if key[1] in steps),
        key=lambda item: item[1][0],
    )
    pairs = []
    for i, (key, (_, end)) in enumerate(chosen):
        for other, (other_start, _) in chosen[i + 1 :]:
            if other[0] != key[0] and other_start < end:
                pairs.append((key, other))
    return pairs


def start_workers(home: Path, barrier: Path) -> list[subprocess.Popen[str]]:
    return [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "eval_pipeline_tests.deploy.lane_worker",
                str(home),
                lane,
                model,
                seed,
                str(barrier),
                str(len(RUNS)),
            ],
            cwd=paths.PROJECT_ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for lane, model, seed in RUNS
    ]


def test_the_deploy_config_keeps_secrets_out_and_limits_providers_and_the_warehouse() -> None:
    config = yaml.safe_load((DEPLOY_DIR / "dagster.yaml").read_text(encoding="utf-8"))
    database = config["storage"]["postgres"]["postgres_db"]
    assert {field: database[field] for field in ("hostname", "port", "username", "password")} == {
        "hostname": {"env": "DAGSTER_PG_HOST"},
        "port": {"env": "DAGSTER_PG_PORT"},
        "username": {"env": "DAGSTER_PG_USER"},
        "password": {"env": "DAGSTER_PG_PASSWORD"},
    }
    assert database["db_name"] == {"env": "DAGSTER_PG_DB"}
    assert config["run_coordinator"]["class"] == "QueuedRunCoordinator"
    limits = config["concurrency"]["runs"]["tag_concurrency_limits"]
    per_value = {
        limit["key"]: limit["limit"]
        for limit in limits
        if limit.get("value") == {"applyLimitPerUniqueValue": True}
    }
    # every provider limited on its own; one run per partition at a time
    assert per_value == {PROVIDER_TAG: 8, "dagster/partition": 1}
    assert {
        limit["value"]: limit["limit"]
        for limit in limits
        if limit["key"] == PROVIDER_TAG and isinstance(limit.get("value"), str)
    } == {"anthropic": 2, "openai": 2, "ollama-local": 1}
    assert config["concurrency"]["pools"]["default_limit"] == 1
    assert config["run_monitoring"]["enabled"] is True


def test_the_kubernetes_instance_differs_from_the_tested_one_only_in_its_run_launcher() -> None:
    tested = yaml.safe_load((DEPLOY_DIR / "dagster.yaml").read_text(encoding="utf-8"))
    k8s = yaml.safe_load((DEPLOY_DIR / "k8s" / "dagster.yaml").read_text(encoding="utf-8"))
    assert k8s["run_launcher"]["class"] == "K8sRunLauncher"
    assert k8s["run_launcher"]["module"] == "dagster_k8s"
    assert {key: value for key, value in k8s.items() if key != "run_launcher"} == tested


@pytest.mark.slow  # a Postgres server and parallel lane runs: about 30 s
def test_parallel_lane_runs_on_postgres_storage_lose_no_row_and_never_fail_on_a_lock(
    deployment: Deployment,
) -> None:
    lane_home = deployment.lane_home
    with dg.DagsterInstance.get() as instance:
        assert isinstance(instance.run_storage, PostgresRunStorage)
        assert isinstance(instance.event_log_storage, PostgresEventLogStorage)
        assert isinstance(instance.schedule_storage, PostgresScheduleStorage)
        barrier = lane_home / "barrier"
        barrier.mkdir()
        workers = start_workers(lane_home, barrier)
        outputs = [worker.communicate(timeout=WORKER_TIMEOUT_S) for worker in workers]
        waited: set[str] = set()
        for run, worker, (out, err) in zip(RUNS, workers, outputs, strict=True):
            assert worker.returncode == 0, f"{run} failed:\n{out}\n{err[-3000:]}"
            locked = [
                line
                for line in (out + err).lower().splitlines()
                if any(word in line for word in LOCK_WORDS)
            ]
            # A lock shows only as a writer waiting its turn, never as a failure.
            for line in locked:
                assert WAITED in line, f"{run}: {line}\n{err}"
            if locked:
                waited.add(json.loads(out.strip().splitlines()[-1])["run_id"])
        reports = [json.loads(out.strip().splitlines()[-1]) for out, _ in outputs]
        run_ids = [report["run_id"] for report in reports]
        assert all(report["success"] for report in reports)

        # The runs and their events are in Postgres, read back through the instance.
        for run_id, (_, model, seed) in zip(run_ids, RUNS, strict=True):
            run = instance.get_run_by_id(run_id)
            assert run is not None and run.status == dg.DagsterRunStatus.SUCCESS
            assert run.tags[PROVIDER_TAG] == "simulated"
            assert run.tags["dagster/partition"] == f"{model}|{seed}"
        logged = [entry for run_id in run_ids for entry in instance.all_logs(run_id)]
        for entry in logged:
            assert not any(word in (entry.message or "").lower() for word in LOCK_WORDS)
        for lane in ("model", "product"):
            materialized = instance.get_materialized_partitions(dg.AssetKey(f"{lane}_lane_records"))
            assert materialized == {f"{m}|{s}" for run_lane, m, s in RUNS if run_lane == lane}
        engine = deployment.server.engine()
        try:
            with engine.connect() as conn:
                stored = conn.execute(
                    sa.text("SELECT run_id, status FROM runs WHERE run_id = ANY(:ids)"),
                    {"ids": run_ids},
                ).all()
                events = conn.execute(
                    sa.text("SELECT count(*) FROM event_logs WHERE run_id = ANY(:ids)"),
                    {"ids": run_ids},
                ).scalar_one()
        finally:
            engine.dispose()
        assert sorted(stored) == sorted((run_id, "SUCCESS") for run_id in run_ids)
        assert events == len(logged) > 0
        home = deployment.dagster_home
        assert not (home / "history").exists() and not (home / "storage" / "index.db").exists()

        # Parallel for real: lane runs of different runs overlapped in time; warehouse steps
        # overlapped only where two runs claimed the pool's slot at once, and then one of
        # them waited for the other's writer (pool `warehouse`, limit 1, held in Postgres).
        windows = step_windows(instance, run_ids)
        assert len(windows) == len(RUNS) * 2
        assert overlapping(windows, LANE_RUN_STEPS), windows
        for first, second in overlapping(windows, WAREHOUSE_STEPS):
            assert {first[0], second[0]} & waited, (first, second, windows)
        assert instance.event_log_storage.get_concurrency_info(WAREHOUSE_POOL).slot_count == 1
        assert instance.event_log_storage.get_concurrency_info(WAREHOUSE_POOL).claimed_slots == []

        fixture_event = instance.get_latest_materialization_event(dg.AssetKey(FIXTURES_ASSET))
        assert fixture_event is not None and fixture_event.asset_materialization is not None
        fixture_path = str(fixture_event.asset_materialization.metadata["path"].value)
    cases = load_fixtures(Path(fixture_path)).manifest.case_count

    # No lost row: every case of every partition and lane, and every call envelope each
    # run journaled, is in the warehouse.
    conn = duckdb.connect(str(paths.warehouse_path()), read_only=True)
    try:
        outcomes = conn.execute(
            "SELECT lane, model, seed, count(*), count(DISTINCT case_id) "
            "FROM runs.case_outcomes GROUP BY ALL ORDER BY ALL"
        ).fetchall()
        for (lane, model, seed), run_id in zip(RUNS, run_ids, strict=True):
            folder = partition_dir(lane, model, int(seed), paths.lanes_dir())
            journaled = list(read_records(folder / CASES_JOURNAL, CaseRun))
            stored_cases = conn.execute(
                "SELECT count(*) FROM runs.case_runs WHERE lane = ? AND model = ? AND seed = ?",
                [lane, model, int(seed)],
            ).fetchone()
            assert stored_cases == (len(journaled),)
            lane_run = f"{lane}-lane-{run_id}"
            journal = paths.runs_dir() / lane_run / JOURNAL_NAME
            envelopes = {envelope.envelope_id for envelope in read_journal(journal)}
            stored_envelopes = conn.execute(
                "SELECT envelope_id FROM runs.call_envelopes WHERE run_id = ?", [lane_run]
            ).fetchall()
            assert envelopes and {row[0] for row in stored_envelopes} == envelopes, lane_run
    finally:
        conn.close()
    assert outcomes == sorted((lane, model, int(seed), cases, cases) for lane, model, seed in RUNS)
