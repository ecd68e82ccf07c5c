"""`evalp demo` as a user meets it: what a killed demo leaves is cleaned up by the next one,
two demos never run at once, and a bad config is one line naming the file and field."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from datetime import date, timedelta
from pathlib import Path

import dagster as dg
import pytest

from eval_pipeline import paths, world_stages
from eval_pipeline.crashpoints import CRASH_ENV
from eval_pipeline.dagster_client.launch import (
    DEMO_LOCK,
    Recovery,
    recover_after_crash,
    step_failure_cause,
)
from eval_pipeline.errors import ConfigError, WorldError
from eval_pipeline.locks import held_exclusively
from eval_pipeline.project_configs import scan_model_configs
from eval_pipeline.providers.calibration import PLANTED_CONFIGS
from eval_pipeline.providers.envelope import read_journal
from eval_pipeline_tests.demo_helpers import (
    billed_calls_missing_from_warehouse,
    in_progress_runs,
    journals_not_in_warehouse,
    run_evalp,
    run_statuses,
    small_world_env,
    wait_for_no_sim,
)

KILLED_CALIBRATION = """
import dagster as dg
from eval_pipeline import paths
from eval_pipeline.defs.provider_assets import provider_calibration_asset
from eval_pipeline.defs.resources import SimulatedProvider, WarehouseResource

with dg.DagsterInstance.get() as instance:
    dg.materialize(
        [provider_calibration_asset],
        instance=instance,
        resources={
            "warehouse": WarehouseResource(path=str(paths.warehouse_path())),
            "sim": SimulatedProvider(),
        },
    )
"""


def test_a_run_killed_mid_calibration_is_failed_and_its_journal_loaded_on_start(
    isolated_state: Path,
) -> None:
    """SIGKILL after 20 envelopes landed leaves a run STARTED, a journal never loaded and
    a sim serving; the start-up recovery marks the run failed and loads the journal."""
    killed = subprocess.run(
        [sys.executable, "-c", KILLED_CALIBRATION],
        env={**os.environ, CRASH_ENV: "harness.landed@20"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert killed.returncode == -9, killed.stderr
    assert wait_for_no_sim(str(isolated_state)) == [], "the sim stops with its parent"
    [orphan] = in_progress_runs()
    [journal] = paths.runs_dir().glob("*/envelopes.jsonl")
    assert len(list(read_journal(journal))) >= 20
    assert journals_not_in_warehouse() != []

    with dg.DagsterInstance.get() as instance:
        recovery = recover_after_crash(instance)
        run = instance.get_run_by_id(orphan)
        assert run is not None and run.status == dg.DagsterRunStatus.FAILURE
    assert recovery.failed_runs == (orphan,)
    assert recovery.loaded_journals == (str(journal),)
    assert in_progress_runs() == []
    assert journals_not_in_warehouse() == []
    assert billed_calls_missing_from_warehouse() == {}
    with dg.DagsterInstance.get() as instance:  # a second start finds nothing left to do
        assert recover_after_crash(instance) == Recovery()


def test_a_second_demo_is_refused_while_one_runs(isolated_state: Path) -> None:
    with held_exclusively(paths.var_dir() / DEMO_LOCK, "evalp demo"):
        second = run_evalp(["demo"], small_world_env(isolated_state))
    assert second.returncode == 2
    [line] = second.stderr.splitlines()
    assert line.startswith("error: evalp demo is already running") and DEMO_LOCK in line


def _models_copy(tmp_path: Path) -> Path:
    models = tmp_path / "models"
    shutil.copytree(paths.CONFIGS_DIR / "models", models)
    return models


def _typo(path: Path) -> None:
    path.write_text(path.read_text().replace("timeout_s:", "timout_s:", 1))


def assert_one_error_line(done: subprocess.CompletedProcess[str], *named: str) -> str:
    assert done.returncode == 2, done.stderr
    lines = done.stderr.splitlines()
    assert lines and lines[0].startswith("error: "), done.stderr
    assert "Traceback" not in done.stderr and "Stack Trace" not in done.stderr
    for word in named:
        assert word in lines[0], (word, lines[0])
    return lines[0]


def test_a_typo_in_a_config_the_demo_uses_is_one_line_naming_file_and_field(
    isolated_state: Path, tmp_path: Path
) -> None:
    models = _models_copy(tmp_path)
    _typo(models / "sim-planted.yaml")
    env = {**small_world_env(isolated_state), "EVALP_MODELS_DIR": str(models)}
    done = run_evalp(["demo"], env)
    assert_one_error_line(done, "sim-planted.yaml", "timout_s")
    assert len(done.stderr.splitlines()) == 1
    assert run_statuses() == {}, "nothing ran"


def test_a_gap_in_the_price_book_is_one_line_naming_it(
    isolated_state: Path, tmp_path: Path
) -> None:
    prices = tmp_path / "prices.yaml"
    text = (paths.CONFIGS_DIR / "prices.yaml").read_text()
    yesterday = date.today() - timedelta(days=1)
    prices.write_text(
        text.replace(
            "  planted: {kind: simulated, variants: true, tiers: *sim_schedule}",
            "  planted:\n    kind: simulated\n    variants: true\n    tiers:\n"
            "      - {id: old, start: 2025-01-01, end: "
            f"{yesterday.isoformat()}, usd_per_mtok: {{input: '2', output: '10'}}}}",
        )
    )
    env = {**small_world_env(isolated_state), "EVALP_PRICES": str(prices)}
    done = run_evalp(["demo"], env)
    assert_one_error_line(done, "planted", str(prices), "no price tier")


def test_a_typo_in_a_config_nothing_uses_is_reported_and_skipped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    models = _models_copy(tmp_path)
    _typo(models / "claude-sonnet-4-5.yaml")
    monkeypatch.setenv("EVALP_MODELS_DIR", str(models))
    [note] = world_stages.check_main_job_inputs(paths.default_world_config())
    assert "claude-sonnet-4-5.yaml" in note and "timout_s" in note and "\n" not in note
    scan = scan_model_configs()
    assert sorted(scan.require(PLANTED_CONFIGS)) == sorted(PLANTED_CONFIGS)
    assert scan.skipped() == [note]
    _typo(models / "sim-planted.yaml")  # now one the job needs
    with pytest.raises(ConfigError, match="sim-planted"):
        world_stages.check_main_job_inputs(paths.default_world_config())


def _fails_with(error: Exception) -> dg.JobDefinition:
    @dg.op(name="generate")
    def generate() -> None:
        raise error

    @dg.job(name="failing")
    def failing() -> None:
        generate()

    return failing


def test_a_step_failure_is_reduced_to_the_error_our_code_raised() -> None:
    try:
        raise WorldError("no physical sale to attach a genuine return to")
    except WorldError as inner:
        outer = ConfigError("scale 0.001 is too small for seed 11; the smallest is 0.009")
        outer.__cause__ = inner
    for error, expected, ours in [
        (outer, "scale 0.001 is too small for seed 11; the smallest is 0.009", True),
        (ValueError("not ours"), "not ours", False),
    ]:
        result = _fails_with(error).execute_in_process(raise_on_error=False)
        [event] = result.get_step_failure_events()
        assert event.step_failure_data.error is not None
        failure = step_failure_cause("generate", event.step_failure_data.error)
        assert (failure.step, failure.message, failure.ours) == ("generate", expected, ours)


@pytest.mark.slow
def test_a_failing_step_shows_its_cause_first_and_alone(isolated_state: Path) -> None:
    """A failure only the run meets (this world is too small for its suite) is one line
    naming its cause, not the step's stack dump."""
    config = isolated_state / "too-small.yaml"
    config.write_text("plugin: label\nseed: 12\nscale: 0.001\n")  # its smallest: 0.003
    env = {**os.environ, "EVALP_WORLD_CONFIG": str(config)}
    done = run_evalp(["demo"], env)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and "Stack Trace" not in done.stderr
    # The progress lines of the steps that ran (`[1/15] main job: ...`, `mission: 1 steps
    # in 68 s`) come first; then the cause, alone, and where the run's full log is.
    lines = done.stderr.splitlines()
    said = [line for line in lines if not re.match(r"\[\d+/\d+\] |mission: ", line)]
    assert lines[: len(lines) - len(said)] == lines[: lines.index(said[0])], lines
    assert len(said) == 2 and "FAILED" in said[1], lines
    line = said[0]
    assert line.startswith("error: fixtures: scale 0.001 is too small for the suite"), lines
    assert "smallest scale that works" in line
    assert done.stdout == ""


@pytest.mark.slow  # two small-world demos and an audit: about a minute
def test_a_mission_killed_in_its_lanes_restarts_losing_and_repeating_nothing_and_audits_clean(
    isolated_state: Path,
) -> None:
    """SIGKILL with calls landed in a lane partition (the 48 calibration calls come first),
    then one restart: every landed call is in the warehouse exactly once, no case that
    completed before the kill runs again, and the report the restart writes audits clean."""
    import duckdb

    from eval_pipeline.journal import read_records
    from eval_pipeline.lane_records import CaseRun
    from eval_pipeline.lanes.partition_runs import CASES_JOURNAL

    env = small_world_env(isolated_state)
    sweep = isolated_state / "one-model.yaml"
    sweep.write_text("name: killed\nmodels: [sim-strong]\nseeds: [0]\n")  # the gate candidate
    env["EVALP_SWEEP_CONFIG"] = str(sweep)
    # The lane partition runs in a worker process the daemon started: the kill lands there
    # (a worker killed, or out of memory), and the demo reports that run failed.
    killed = run_evalp(["demo"], env, crash_at="harness.landed@90")
    assert killed.returncode == 1, killed.stdout[-2000:] + killed.stderr[-2000:]
    assert "lanes sim-strong|0: run: its worker process ended before the run did" in (
        killed.stderr
    ), killed.stderr[-2000:]
    journals = sorted(paths.lanes_dir().glob(f"*/*/*/{CASES_JOURNAL}"))
    assert journals, "the kill came after a lane partition had started"
    before = {
        (path, run.case_id): run.attempt
        for path in journals
        for run in read_records(path, CaseRun)
        if run.status == "completed"
    }
    assert before, "some cases had completed before the kill"

    restarted = run_evalp(["demo"], env)
    assert restarted.returncode == 0, restarted.stderr[-3000:]
    assert "recovered from an interrupted demo" in restarted.stdout
    assert journals_not_in_warehouse() == []
    assert billed_calls_missing_from_warehouse() == {}
    for (path, case_id), attempt in before.items():
        attempts = [r.attempt for r in read_records(path, CaseRun) if r.case_id == case_id]
        assert attempts == [attempt], f"{path}: {case_id} ran again after completing"
    with duckdb.connect(str(paths.warehouse_path()), read_only=True) as con:
        twice = con.execute(
            "select run_id, call_id, count(*) from runs.call_envelopes where final "
            "group by run_id, call_id having count(*) > 1"
        ).fetchall()
        responses = con.execute(
            "select json_extract_string(response_json, '$.response_id') as id, count(*) "
            "from runs.call_envelopes where final and response_json is not null and "
            "json_extract_string(response_json, '$.response_id') is not null "
            "group by id having count(*) > 1"
        ).fetchall()
    assert twice == [], "a landed call has two final envelopes"
    assert responses == [], "one provider response is recorded as two calls"

    report = paths.var_dir() / "reports" / "sweep" / "report.md"
    audited = run_evalp(["audit", "--quiet", str(report)], env)
    assert audited.returncode == 0, audited.stdout[-3000:]
    assert "all re-derived exactly" in audited.stdout
