"""Running `evalp` commands as real processes (optionally killed at a crash point) and
checking what a run left behind: Dagster runs, call journals, the sim's own request log,
fixture sets."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import dagster as dg
import duckdb

from eval_pipeline import paths
from eval_pipeline.cases.frozen import STAGING_PREFIX, fixture_set_dirs, load_fixtures
from eval_pipeline.crashpoints import CRASH_ENV
from eval_pipeline.defs.keys import MAIN_JOB
from eval_pipeline.providers.envelope import JOURNAL_NAME, read_journal
from eval_pipeline.sim.process import SIM_REQUEST_LOG
from eval_pipeline.warehouse.envelopes import pending_journals, read_envelopes

SMALL_WORLD = "plugin: label\nseed: 12\nscale: 0.05\n"
SMALL_SWEEP = "name: small\nmodels: [sim-strong, sim-small]\nseeds: [0]\n"
"""Two agents and no experiment: the committed experiments name the default world's
fixture set, which a small world does not build."""


MAIN_JOB_SCRIPT = (
    "import dagster as dg; from eval_pipeline.definitions import defs; "
    f"r = defs.resolve_job_def({MAIN_JOB!r}).execute_in_process("
    "instance=dg.DagsterInstance.get(), raise_on_error=False); "
    "raise SystemExit(0 if r.success else 1)"
)
"""`python -c` this: the main job in process on the instance in DAGSTER_HOME (world,
answer key, fixtures, calibration), without the lanes a demo would go on to."""


def build_main_job(env: dict[str, str]) -> None:
    """The main job alone, in a process of its own with `env` (fails the test if it fails)."""
    built = subprocess.run(
        [sys.executable, "-c", MAIN_JOB_SCRIPT],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert built.returncode == 0, built.stderr[-3000:]


ONE_MODEL_SWEEP = "name: small\nmodels: [sim-strong]\nseeds: [0]\n"
"""For tests of what a demo does to its state (kills, lost stores), not of comparing models:
one lane partition instead of two."""


def small_world_env(home: Path, sweep_config: str = SMALL_SWEEP) -> dict[str, str]:
    """The test's isolated state (see conftest) with a small world, for a fast demo."""
    config = home / "small-world.yaml"
    config.write_text(SMALL_WORLD)
    sweep = home / "small-sweep.yaml"
    sweep.write_text(sweep_config)
    return {**os.environ, "EVALP_WORLD_CONFIG": str(config), "EVALP_SWEEP_CONFIG": str(sweep)}


def run_evalp(
    args: list[str],
    env: dict[str, str],
    *,
    crash_at: str | None = None,
    kill_after_s: float | None = None,
    timeout_s: float = 600,
    cwd: Path | None = None,
) -> subprocess.CompletedProcess[str]:
    """`python -m eval_pipeline.cli <args>` (in `cwd`, whose package it then imports);
    killed (SIGKILL) at a crash point or after a delay when asked. A kill shows as
    returncode -9."""
    run_env = dict(env)
    if crash_at is not None:
        run_env[CRASH_ENV] = crash_at
    process = subprocess.Popen(
        [sys.executable, "-m", "eval_pipeline.cli", *args],
        env=run_env,
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        if kill_after_s is not None:
            try:
                process.wait(timeout=kill_after_s)
            except subprocess.TimeoutExpired:
                process.send_signal(signal.SIGKILL)
        out, err = process.communicate(timeout=timeout_s)
    except BaseException:
        # A test timed out or interrupted mid-command: the command must not outlive it (a
        # process left running, with its pipes, failed a later test on its ResourceWarning).
        process.kill()
        process.communicate()
        raise
    return subprocess.CompletedProcess(process.args, process.returncode, out, err)


def in_progress_runs() -> list[str]:
    """Runs of the project's instance still marked in progress."""
    statuses = [
        dg.DagsterRunStatus.NOT_STARTED,
        dg.DagsterRunStatus.STARTING,
        dg.DagsterRunStatus.STARTED,
        dg.DagsterRunStatus.CANCELING,
    ]
    with dg.DagsterInstance.get() as instance:
        return [run.run_id for run in instance.get_runs(filters=dg.RunsFilter(statuses=statuses))]


def run_statuses() -> Counter[str]:
    with dg.DagsterInstance.get() as instance:
        return Counter(run.status.value for run in instance.get_runs())


def sim_processes(marker: str) -> list[int]:
    """Live simulated-provider processes whose command line holds `marker`."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            state = (entry / "stat").read_text().split()[2]
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            continue
        if "eval_pipeline.sim" in cmdline and marker in cmdline and state != "Z":
            found.append(int(entry.name))
    return found


def wait_for_no_sim(marker: str, timeout_s: float = 10) -> list[int]:
    deadline = time.monotonic() + timeout_s
    while sim_processes(marker) and time.monotonic() < deadline:
        time.sleep(0.1)
    return sim_processes(marker)


def billed_calls_missing_from_warehouse() -> dict[str, int]:
    """Per run: billed requests (the sim's own log) not accounted for in the warehouse.

    A billed reply is accounted for by the envelope carrying its response id, or — for an
    attempt whose process was killed in flight — by an interrupted attempt of that run.
    """
    missing: dict[str, int] = {}
    with duckdb.connect(str(paths.warehouse_path()), read_only=True) as con:
        for log in sorted(paths.runs_dir().glob(f"*/{SIM_REQUEST_LOG}")):
            run_id = log.parent.name
            lines = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
            billed = {line["bill"]["request_id"] for line in lines if line.get("bill")}
            envelopes = read_envelopes(con, run_id=run_id)
            landed = {
                json.loads(e.response_json).get("response_id") for e in envelopes if e.response_json
            }
            interrupted = sum(1 for e in envelopes if e.failure_cause == "interrupted")
            sent = sum(1 for e in envelopes if e.status != "budget_stopped")
            unaccounted = len(billed - landed)
            if unaccounted > interrupted or len(lines) > sent:
                missing[run_id] = unaccounted
    return missing


def journals_not_in_warehouse() -> list[str]:
    """Journal envelopes (as the journal reads them back) that the warehouse lacks."""
    problems = []
    stored = {}
    if paths.warehouse_path().exists():
        with duckdb.connect(str(paths.warehouse_path()), read_only=True) as con:
            pending = pending_journals(paths.runs_dir(), con)
            if pending:
                problems.append(f"journals not loaded in full: {[str(p) for p in pending]}")
            if con.execute(
                "SELECT count(*) FROM duckdb_tables() WHERE schema_name = 'runs'"
            ).fetchone() != (0,):
                stored = {e.envelope_id: e for e in read_envelopes(con)}
    for journal in sorted(paths.runs_dir().glob(f"*/{JOURNAL_NAME}")):
        for envelope in read_journal(journal):
            if stored.get(envelope.envelope_id) != envelope:
                problems.append(f"{journal}: {envelope.envelope_id}")
    return problems


def fixture_problems(root: Path) -> list[str]:
    """Every set under `root` must verify and no staging folder may be left."""
    problems = [str(p) for p in root.iterdir() if p.name.startswith(STAGING_PREFIX)]
    for folder in fixture_set_dirs(root):
        load_fixtures(folder)
    return problems
