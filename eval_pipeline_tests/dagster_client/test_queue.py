"""`evalp`'s client of Dagster's run queue: one daemon per instance, a run whose worker died
is marked failed, and a sweep's partitions run at once with the provider's `max_in_flight`
holding across all of them."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import dagster as dg
import duckdb
import pytest

from eval_pipeline import paths
from eval_pipeline.dagster_client.queue import (
    DIED_MESSAGE,
    REQUEST_TAG,
    LocalDaemon,
    fail_if_worker_died,
    running_daemon,
)
from eval_pipeline.providers.run_limits import (
    PROVIDER_TAG,
    calls_in_flight_per_run,
    runs_at_once,
)
from eval_pipeline_tests.demo_helpers import build_main_job, run_evalp, small_world_env

STAND_IN = [sys.executable, "-c", "import time; time.sleep(120)"]
"""A process in the daemon's place: what is tested here is who starts one, not Dagster's."""


def test_one_daemon_serves_an_instance_and_another_starts_when_it_ends(
    isolated_state: Path,
) -> None:
    with running_daemon(STAND_IN) as first:
        assert first.process is not None and first.process.poll() is None
        second = LocalDaemon(STAND_IN)
        second.ensure()
        assert second.process is None, "a second daemon was started beside the first"
        first.process.kill()  # a daemon killed with the command that started it
        first.process.wait()
        second.ensure()
        try:
            assert second.process is not None and second.process.poll() is None
        finally:
            second.stop()


def stubborn(ready: Path) -> list[str]:
    """A stand-in that outlives the SIGTERM its parent's death sends (a daemon slow to
    stop); it touches `ready` once it ignores SIGTERM. A starter killed before the stand-in
    got that far (under load in CI) had it die of the SIGTERM, and a second daemon was
    rightly started: the test's race, not the product's."""
    code = (
        "import pathlib, signal, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
        "pathlib.Path(sys.argv[1]).touch(); time.sleep(120)"
    )
    return [sys.executable, "-c", code, str(ready)]


def _start_and_die(command: list[str], ready: Path | None = None) -> int:
    """A command that starts a daemon (and waits for `ready`, if given) and is then
    SIGKILLed; the daemon's pid."""
    starter = textwrap.dedent(
        f"""
        import os, pathlib, signal, time
        from eval_pipeline.dagster_client.queue import LocalDaemon
        daemon = LocalDaemon({command!r})
        daemon.ensure()
        print(daemon.process.pid, flush=True)
        ready = {str(ready) if ready else None!r}
        deadline = time.monotonic() + 60
        while ready and not pathlib.Path(ready).exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        os.kill(os.getpid(), signal.SIGKILL)
        """
    )
    done = subprocess.run([sys.executable, "-c", starter], capture_output=True, text=True)
    assert done.returncode == -9, done.stderr
    return int(done.stdout.strip())


def _gone(pid: int) -> bool:
    for _ in range(100):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.05)
    return False


def test_the_daemon_holds_the_lock_itself_and_dies_with_the_command_that_started_it(
    isolated_state: Path,
) -> None:
    """The lock is the daemon's own descriptor, not the starting command's: while a killed
    command's daemon lives on, nobody starts a second; once it is gone, the next does. And
    a daemon gets SIGTERM when the command that started it dies, even by SIGKILL."""
    assert _gone(_start_and_die(STAND_IN)), "the daemon outlived the command that started it"

    ready = isolated_state / "stubborn-ready"
    orphan = _start_and_die(stubborn(ready), ready)
    assert ready.exists(), "the stand-in never got to ignore SIGTERM"
    later = LocalDaemon(STAND_IN)
    try:
        later.ensure()
        assert later.process is None, "a second daemon started beside the one still serving"
    except BaseException:
        later.stop()  # a second daemon left running would fail the next test, not this one
        raise
    finally:
        os.kill(orphan, signal.SIGKILL)
    assert _gone(orphan)
    later.ensure()
    try:
        assert later.process is not None and later.process.poll() is None
    finally:
        later.stop()


KILLED_JOB = """
import os, signal
import dagster as dg

@dg.op
def dies() -> None:
    os.kill(os.getpid(), signal.SIGKILL)

@dg.job
def killed() -> None:
    dies()

with dg.DagsterInstance.get() as instance:
    killed.execute_in_process(instance=instance, run_id=os.environ["RUN_ID"])
"""


def test_a_started_run_whose_worker_process_died_is_marked_failed_once(
    isolated_state: Path,
) -> None:
    run_id = "0123abcd-0000-4000-8000-000000000001"
    done = subprocess.run(
        [sys.executable, "-c", KILLED_JOB],
        env={**os.environ, "RUN_ID": run_id},
        capture_output=True,
        text=True,
    )
    assert done.returncode == -9, done.stderr
    with dg.DagsterInstance.get() as instance:
        run = instance.get_run_by_id(run_id)
        assert run is not None and run.status == dg.DagsterRunStatus.STARTED
        assert fail_if_worker_died(instance, run)
        failed = instance.get_run_by_id(run_id)
        assert failed is not None and failed.status == dg.DagsterRunStatus.FAILURE
        messages = [
            entry.dagster_event.message
            for entry in instance.all_logs(run_id, of_type=dg.DagsterEventType.RUN_FAILURE)
            if entry.dagster_event is not None
        ]
        assert messages and messages[-1].startswith(DIED_MESSAGE.split("{", 1)[0])
        assert not fail_if_worker_died(instance, failed)  # already failed: left alone


def test_a_run_whose_worker_is_alive_is_left_running(isolated_state: Path) -> None:
    @dg.op
    def looks() -> None:
        with dg.DagsterInstance.get() as inner:
            runs = inner.get_runs(filters=dg.RunsFilter(statuses=[dg.DagsterRunStatus.STARTED]))
            assert len(runs) == 1 and not fail_if_worker_died(inner, runs[0])

    @dg.job
    def alive() -> None:
        looks()

    with dg.DagsterInstance.get() as instance:
        assert alive.execute_in_process(instance=instance).success


def test_a_started_runs_worker_pid_is_read_from_its_event_log_once(
    isolated_state: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`wait_for` looks at every started run twice a second; the pid of its worker (its
    RUN_START event) is read once, then kept."""

    @dg.op
    def looks() -> None:
        with dg.DagsterInstance.get() as inner:
            (run,) = inner.get_runs(filters=dg.RunsFilter(statuses=[dg.DagsterRunStatus.STARTED]))
            reads: list[str] = []
            real = inner.all_logs

            def counted(run_id: str, **kwargs: object) -> object:
                reads.append(run_id)
                return real(run_id, **kwargs)  # type: ignore[arg-type]

            monkeypatch.setattr(inner, "all_logs", counted)
            pids: dict[str, int] = {}
            for _ in range(3):  # three looks of `wait_for`
                assert not fail_if_worker_died(inner, run, pids)
            assert pids == {run.run_id: os.getpid()}
            assert reads == [run.run_id]

    @dg.job
    def alive() -> None:
        looks()

    with dg.DagsterInstance.get() as instance:
        assert alive.execute_in_process(instance=instance).success


SMALL_LIMIT = 16
"""The test's models' `max_in_flight`: below what four runs of 16 cases each would send."""


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_a_sweeps_partitions_run_at_once_and_the_providers_limit_holds_across_them(
    isolated_state: Path,
) -> None:
    """`evalp sweep` over 2 models x 2 seeds: four lane runs from Dagster's queue, at once,
    each tagged with its provider; the calls in flight across all four never exceed the
    provider's `max_in_flight` (each run has 16 cases in flight at most, so four runs
    holding only their own limit would reach 64)."""
    env = small_world_env(isolated_state)
    models = isolated_state / "models"
    models.mkdir()
    for source in (paths.CONFIGS_DIR / "models").glob("*.yaml"):
        text = source.read_text()
        if source.stem in ("sim-strong", "sim-small"):
            text = text.replace("max_in_flight: 128", f"max_in_flight: {SMALL_LIMIT}")
            assert f"max_in_flight: {SMALL_LIMIT}" in text
        (models / source.name).write_text(text)
    env["EVALP_MODELS_DIR"] = str(models)
    env["EVALP_SIM_LATENCY_MS"] = "20"  # calls long enough to overlap across runs
    Path(env["EVALP_SWEEP_CONFIG"]).write_text("name: two\nmodels: [sim-strong]\nseeds: [0, 1]\n")
    build_main_job(env)

    refused = run_evalp(["sweep", "--models", "sim-strong", "--seeds", "7"], env)
    assert refused.returncode == 2 and "seed(s) 7 are not partitions" in refused.stderr
    swept = run_evalp(
        ["sweep", "--models", "sim-strong,sim-small", "--seeds", "0,1"], env, timeout_s=900
    )
    assert swept.returncode == 0, swept.stdout[-3000:] + swept.stderr[-3000:]
    assert len(re.findall(r"lanes: sim-\w+ seed \d: done in", swept.stderr)) == 4, swept.stderr
    with dg.DagsterInstance.get() as instance:
        runs = [
            record
            for record in instance.get_run_records()
            if record.dagster_run.tags.get(REQUEST_TAG)
            and record.dagster_run.tags.get("evalp/launched_by") == "evalp sweep"
        ]
    assert sorted(r.dagster_run.tags["dagster/partition"] for r in runs) == [
        "sim-small|0",
        "sim-small|1",
        "sim-strong|0",
        "sim-strong|1",
    ]
    assert {r.dagster_run.tags[PROVIDER_TAG] for r in runs} == {"simulated"}
    assert all(r.dagster_run.status == dg.DagsterRunStatus.SUCCESS for r in runs)
    windows = [(r.start_time or 0.0, r.end_time or 0.0) for r in runs]
    at_once = max(sum(1 for s, e in windows if s <= t < e) for t, _ in windows)
    assert 2 <= at_once <= runs_at_once("simulated"), windows

    run_ids = [r.dagster_run.run_id for r in runs]
    with duckdb.connect(str(paths.warehouse_path()), read_only=True) as conn:
        calls = conn.execute(
            # to the microsecond: an attempt's span lies within its hold of a slot, and a
            # slot handed on within the same millisecond would look like an overlap in ms
            "select epoch_us(started_at) / 1000.0, elapsed_ms from runs.call_envelopes "
            "where lane in ('model', 'product') "
            "and regexp_extract(run_id, '[0-9a-f-]{36}$') in (select unnest(?::varchar[]))",
            [run_ids],
        ).fetchall()
    assert len(calls) > 500
    edges = sorted([(start, 1) for start, _ in calls] + [(start + ms, -1) for start, ms in calls])
    in_flight = peak = 0
    for _, step in edges:
        in_flight += step
        peak = max(peak, in_flight)
    # more than one run's share at once (the runs' calls overlapped), never past the limit
    assert calls_in_flight_per_run("simulated", SMALL_LIMIT) < peak <= SMALL_LIMIT, peak
