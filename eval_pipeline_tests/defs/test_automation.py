"""What runs after what is Dagster's: the assets' automation conditions, evaluated by
Dagster (in process here; by the daemon in the slow test), lead from lane runs to records
and scores, and from a night's scores to the summary, gate, tracking and report once no
lane partition is still queued or running."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
import warnings
from collections.abc import Iterator
from pathlib import Path

import dagster as dg
import pytest

from eval_pipeline.defs.keys import (
    CHAIN_SENSOR,
    LANES_JOB,
    MODELS_PARTITIONS,
    NIGHTLY_SCHEDULE,
    SHIP_GATE_ASSET,
    SWEEP_REPORT_ASSET,
    SWEEP_SUMMARY_ASSET,
    SWEEP_TRACKING_ASSET,
)
from eval_pipeline.paths import PROJECT_ROOT
from eval_pipeline.project_configs import scan_model_configs
from eval_pipeline_tests.defs.webserver_checks import assert_the_webserver_shows_the_graph
from eval_pipeline_tests.demo_helpers import build_main_job, small_world_env
from eval_pipeline_tests.test_ui import free_port

RESULTS = {SWEEP_SUMMARY_ASSET, SHIP_GATE_ASSET, SWEEP_TRACKING_ASSET, SWEEP_REPORT_ASSET}


def requested(result: object, defs: dg.Definitions) -> dict[str, int]:
    counts = {
        key.to_user_string(): result.get_num_requested(key)  # type: ignore[attr-defined]
        for key in defs.resolve_asset_graph().get_all_asset_keys()
    }
    return {key: count for key, count in counts.items() if count}


@pytest.fixture
def defs_and_instance(isolated_state: Path) -> Iterator[tuple[dg.Definitions, dg.DagsterInstance]]:
    from eval_pipeline.definitions import defs

    with dg.DagsterInstance.get() as instance:
        instance.add_dynamic_partitions(MODELS_PARTITIONS, ["sim-strong", "sim-small"])
        yield defs, instance


def evaluate(
    defs: dg.Definitions, instance: dg.DagsterInstance, cursor: object = None
) -> tuple[dict[str, int], object]:
    with warnings.catch_warnings():  # Dagster's own selection inside the evaluator is beta
        warnings.simplefilter("ignore", dg.BetaWarning)
        result = dg.evaluate_automation_conditions(defs=defs, instance=instance, cursor=cursor)  # type: ignore[arg-type]
    return requested(result, defs), result.cursor


def landed(instance: dg.DagsterInstance, asset: str, model: str, seed: str = "0") -> None:
    partition = dg.MultiPartitionKey({"model": model, "seed": seed})
    instance.report_runless_asset_event(dg.AssetMaterialization(asset, partition=partition))


def test_lane_runs_lead_to_their_records_and_scores_to_the_results_once(
    defs_and_instance: tuple[dg.Definitions, dg.DagsterInstance],
) -> None:
    defs, instance = defs_and_instance
    nothing, cursor = evaluate(defs, instance)
    assert nothing == {}  # a fresh instance: nothing has landed, nothing is asked for

    landed(instance, "product_lane_runs", "sim-strong")
    after_runs, cursor = evaluate(defs, instance, cursor)
    assert after_runs == {"product_lane_records": 1}  # that partition's, that lane's only

    for lane in ("model", "product"):
        landed(instance, f"{lane}_lane_scores", "sim-strong")
    after_scores, cursor = evaluate(defs, instance, cursor)
    # One of each result, although a model of the sweep has no scores at all yet: a missing
    # partition does not hold the results back (eager's rule would, for ever).
    assert after_scores == dict.fromkeys(RESULTS, 1)
    again, _ = evaluate(defs, instance, cursor)
    assert again == {}  # handled: not asked for again until an input updates


def test_the_results_wait_while_any_lane_partition_is_still_in_progress(
    defs_and_instance: tuple[dg.Definitions, dg.DagsterInstance],
) -> None:
    defs, instance = defs_and_instance
    _, cursor = evaluate(defs, instance)
    # Another partition's lanes run, created (planned) and not finished: a night in progress.
    tags = {
        "dagster/partition": "sim-small|0",
        "dagster/partition/model": "sim-small",
        "dagster/partition/seed": "0",
    }
    run = instance.create_run_for_job(defs.resolve_job_def(LANES_JOB), tags=tags)
    for lane in ("model", "product"):
        landed(instance, f"{lane}_lane_scores", "sim-strong")
    waiting, cursor = evaluate(defs, instance, cursor)
    assert waiting == {}
    instance.report_run_failed(run)
    after, _ = evaluate(defs, instance, cursor)
    assert after == dict.fromkeys(RESULTS, 1)


NIGHT_SWEEP = (
    "name: tonight\nmodels: [sim-strong, sim-small]\nseeds: [0]\nlanes: [model, product]\n"
    'cron: "* * * * *"\ntimezone: UTC\n'
)
"""A night every minute: a tick comes within a minute of the schedule starting, however
long `evalp ui --automations` takes to start it (a cron at a set minute was missed under
load: its minute passed first). The test stops the schedule after its first tick."""
SCHEDULED_AT_TAG = ".dagster/scheduled_execution_time"
"""Dagster's tag of a scheduled run: the tick it came from."""


def first_tick(runs: list[dg.RunRecord]) -> list[dg.RunRecord]:
    """The lanes runs of the schedule's first tick among `runs`."""
    scheduled = [r for r in runs if r.dagster_run.tags.get("dagster/schedule_name")]
    if not scheduled:
        return []
    first = min(r.dagster_run.tags[SCHEDULED_AT_TAG] for r in scheduled)
    return [r for r in scheduled if r.dagster_run.tags[SCHEDULED_AT_TAG] == first]


def _runs(instance: dg.DagsterInstance, since: float) -> list[dg.RunRecord]:
    return [
        record
        for record in instance.get_run_records()
        if record.create_timestamp.timestamp() >= since
    ]


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_a_nightly_tick_with_automations_on_ends_in_scores_gate_tracking_and_report(
    isolated_state: Path,
) -> None:
    """`evalp ui --automations` on a real instance and daemon: one tick of the schedule,
    then nothing but Dagster, ends with every swept model scored, a gate verdict for each,
    a new MLflow sweep run and a new report; then its webserver shows all of it."""
    env = small_world_env(isolated_state)
    Path(env["EVALP_SWEEP_CONFIG"]).write_text(NIGHT_SWEEP)
    build_main_job(env)
    with dg.DagsterInstance.get() as instance:
        # Every model's partitions exist already, so the model-config sensor starts nothing:
        # whatever runs after this comes from the schedule's tick and the chain behind it.
        instance.add_dynamic_partitions(MODELS_PARTITIONS, sorted(scan_model_configs().configs))
        began = time.time()
        port = free_port()
        ui = subprocess.Popen(
            [
                str(Path(sys.executable).with_name("evalp")),
                "ui",
                "--automations",
                "--port",
                str(port),
                "--mlflow-port",
                str(free_port()),
            ],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
        )
        try:
            results_run = _wait_for_results(instance, began, ui, env)
            assert_the_webserver_shows_the_graph(f"http://127.0.0.1:{port}", seeds="0")
        finally:
            ui.send_signal(signal.SIGTERM)
            out, err = ui.communicate(timeout=120)
        runs = _runs(instance, began)
        results_id = results_run.dagster_run.run_id
        others = [r.dagster_run for r in runs if r.dagster_run.run_id != results_id]
        assert {run.job_name for run in others} == {LANES_JOB}, [
            (run.job_name, sorted(k.to_user_string() for k in run.asset_selection or ()), run.tags)
            for run in others
            if run.job_name != LANES_JOB
        ]
        assert {
            r.dagster_run.tags.get("dagster/schedule_name")
            for r in runs
            if r.dagster_run.job_name == LANES_JOB
        } == {NIGHTLY_SCHEDULE}, out + err[-2000:]
        lanes = first_tick(runs)
        assert sorted(r.dagster_run.tags["dagster/partition"] for r in lanes) == [
            "sim-small|0",
            "sim-strong|0",
        ]
        assert all(r.dagster_run.status == dg.DagsterRunStatus.SUCCESS for r in lanes)
        assert results_run.dagster_run.tags.get("dagster/sensor_name") == CHAIN_SENSOR
        assert results_run.create_timestamp.timestamp() >= max(r.end_time or 0 for r in lanes), (
            "the results ran after the night's lane runs"
        )

        def latest(asset: str) -> dict[str, object]:
            event = instance.get_latest_materialization_event(dg.AssetKey(asset))
            assert event is not None and event.asset_materialization is not None
            assert event.run_id == results_run.dagster_run.run_id
            return {k: v.value for k, v in event.asset_materialization.metadata.items()}

        gate = latest(SHIP_GATE_ASSET)
        verdicts = gate["verdicts_by_model"]
        assert isinstance(verdicts, dict) and set(verdicts) == {"sim-strong", "sim-small"}
        tracked = latest(SWEEP_TRACKING_ASSET)
        report = latest(SWEEP_REPORT_ASSET)
        assert report["mlflow_run_id"] == tracked["mlflow_parent_run_id"] != ""
        assert Path(str(report["path"])).is_file()
        latest(SWEEP_SUMMARY_ASSET)
    from eval_pipeline.tracking.mlflow_store import default_store, has_run, open_client

    assert has_run(open_client(default_store()), str(tracked["mlflow_parent_run_id"]))
    assert "servers stopped" in out, out + err[-2000:]
    json.dumps(verdicts)  # the verdicts are plain data a reader can print


def _wait_for_results(
    instance: dg.DagsterInstance, began: float, ui: subprocess.Popen[str], env: dict[str, str]
) -> dg.RunRecord:
    """The run that materialized the results after `began`, once it ended (fails the test
    on a failed run, on `evalp ui` ending, or after 10 minutes). The schedule is stopped
    once its first tick's runs exist (Dagster's own command, as a user would)."""
    deadline = time.monotonic() + 600
    stopped = False
    while time.monotonic() < deadline:
        assert ui.poll() is None, "evalp ui ended early"
        runs = _runs(instance, began)
        if not stopped and first_tick(runs):
            stop = [str(Path(sys.executable).with_name("dagster")), "schedule", "stop"]
            subprocess.run(
                [*stop, NIGHTLY_SCHEDULE, "-w", str(PROJECT_ROOT / "workspace.yaml")],
                env=env,
                cwd=PROJECT_ROOT,
                capture_output=True,
                check=True,
                timeout=120,
            )
            stopped = True
        failed = [r for r in runs if r.dagster_run.status == dg.DagsterRunStatus.FAILURE]
        assert not failed, [(r.dagster_run.job_name, r.dagster_run.run_id) for r in failed]
        for record in runs:
            selection = record.dagster_run.asset_selection or frozenset()
            if dg.AssetKey(SWEEP_REPORT_ASSET) in selection and record.dagster_run.is_finished:
                return record
        time.sleep(2)
    raise AssertionError(
        f"no results run ended within 10 minutes; runs: "
        f"{[(r.dagster_run.job_name, r.dagster_run.status.value) for r in _runs(instance, began)]}"
    )
