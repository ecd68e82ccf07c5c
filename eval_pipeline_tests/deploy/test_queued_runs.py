"""The deployment as a daemon runs it (slow: about three minutes here): runs of the lanes job
submitted with `dagster job launch` wait in the queue of deploy/dagster.yaml's
QueuedRunCoordinator until `dagster-daemon run` starts them on the Postgres instance; two
runs of one partition never run at once (the `dagster/partition` limit), a run of another
partition runs beside them, and the second run of a partition re-runs no case."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import dagster as dg
import duckdb
import pytest

from eval_pipeline import paths
from eval_pipeline.defs.keys import LANES_JOB, PROVIDER_TAG
from eval_pipeline_tests.deploy.conftest import Deployment

SUBMITTED = (("sim-strong", "0"), ("sim-strong", "0"), ("sim-small", "0"))
"""Lanes-job runs queued at once: two share a partition."""
DONE = {dg.DagsterRunStatus.SUCCESS, dg.DagsterRunStatus.FAILURE, dg.DagsterRunStatus.CANCELED}
DAEMON_TIMEOUT_S = 420


def dagster_bin(name: str) -> str:
    """A command of this environment (beside its python, not resolved through symlinks)."""
    return str(Path(sys.executable).parent / name)


def launch(model: str, seed: str) -> subprocess.Popen[str]:
    # the tags Dagster gives a run of one model × seed partition (as the UI and the sensor do)
    tags = {
        "dagster/partition": f"{model}|{seed}",
        "dagster/partition/model": model,
        "dagster/partition/seed": seed,
        PROVIDER_TAG: "simulated",
    }
    return subprocess.Popen(
        [dagster_bin("dagster"), "job", "launch", "-w", "workspace.yaml", "-j", LANES_JOB,
         "--tags", json.dumps(tags)],
        cwd=paths.PROJECT_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def stop(process: subprocess.Popen[bytes]) -> None:
    """SIGINT to the daemon's process group (it started it), then SIGKILL if still there."""
    if process.poll() is not None:
        return
    os.killpg(process.pid, signal.SIGINT)
    try:
        process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=10)


@pytest.mark.slow
def test_the_daemon_starts_queued_runs_within_the_deploy_limits(
    deployment: Deployment,
) -> None:
    with dg.DagsterInstance.get() as instance:
        submitters = [launch(model, seed) for model, seed in SUBMITTED]
        for submitter in submitters:
            out, err = submitter.communicate(timeout=240)
            assert submitter.returncode == 0, f"{out}\n{err[-3000:]}"
        records = sorted(
            instance.get_run_records(filters=dg.RunsFilter(job_name=LANES_JOB)),
            key=lambda record: record.create_timestamp,
        )
        assert len(records) == len(SUBMITTED)
        assert {record.dagster_run.status for record in records} == {dg.DagsterRunStatus.QUEUED}
        partition = {r.dagster_run.run_id: r.dagster_run.tags["dagster/partition"] for r in records}
        # the two runs of sim-strong|0, then sim-small|0
        order = sorted(partition, key=lambda run_id: partition[run_id] != "sim-strong|0")

        log = (deployment.lane_home / "daemon.log").open("w")
        daemon = subprocess.Popen(
            [dagster_bin("dagster-daemon"), "run", "-w", "workspace.yaml"],
            cwd=paths.PROJECT_ROOT, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
        try:
            deadline = time.monotonic() + DAEMON_TIMEOUT_S
            while time.monotonic() < deadline:
                runs = [instance.get_run_by_id(run_id) for run_id in order]
                if all(run is not None and run.status in DONE for run in runs):
                    break
                assert daemon.poll() is None, "the daemon exited"
                time.sleep(1)
        finally:
            stop(daemon)
            log.close()
        daemon_log = (deployment.lane_home / "daemon.log").read_text()
        windows = {}
        for run_id in order:
            record = instance.get_run_record_by_id(run_id)
            assert record is not None
            assert record.dagster_run.status == dg.DagsterRunStatus.SUCCESS, daemon_log[-3000:]
            assert record.start_time is not None and record.end_time is not None
            windows[run_id] = (record.start_time, record.end_time)
        # the daemon may dequeue either run of the partition first (both were queued within
        # the same instant): the first is the one that started first
        first, second = sorted(order[:2], key=lambda run_id: windows[run_id][0])
        other = order[2]
        assert partition[other] == "sim-small|0"
        # one partition, one run at a time; another partition beside it
        assert windows[second][0] >= windows[first][1]
        assert windows[other][0] < windows[first][1] and windows[first][0] < windows[other][1]
        reran = {
            event.asset_materialization.asset_key.to_user_string(): (
                event.asset_materialization.metadata["cases_run"].value
            )
            for event in instance.all_logs(
                second, of_type=dg.DagsterEventType.ASSET_MATERIALIZATION
            )
            if event.asset_materialization is not None
            and event.asset_materialization.asset_key.to_user_string()
            in ("model_lane_runs", "product_lane_runs")
        }
        assert reran == {"model_lane_runs": 0, "product_lane_runs": 0}

    conn = duckdb.connect(str(paths.warehouse_path()), read_only=True)
    try:
        scored = conn.execute(
            "SELECT lane, model, seed, count(*) FROM runs.case_outcomes GROUP BY ALL ORDER BY ALL"
        ).fetchall()
    finally:
        conn.close()
    assert [row[:3] for row in scored] == [
        (lane, model, 0) for lane in ("model", "product") for model in ("sim-small", "sim-strong")
    ]
