"""A deleted MLflow store does not quietly break pre-registration: an experiment whose
results exist is not registered again (that registration would postdate them), by
`evalp experiment register` or by the demo; it is refused in one line naming it, the store
and what to do."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from eval_pipeline import paths
from eval_pipeline.cli import main
from eval_pipeline.experiments.registry import find_registration
from eval_pipeline.tracking.mlflow_store import default_store, open_client

EXPERIMENT = "serving-path-sim-strong"


@pytest.mark.slow  # an experiment run, then three commands: about 2.5 min on 2 busy cores
def test_an_experiment_with_results_is_not_registered_again_in_a_new_store(
    at_project: tuple[Path, str],
) -> None:
    for command in ("register", "run"):
        result = CliRunner().invoke(main, ["experiment", command, EXPERIMENT])
        assert result.exit_code == 0, result.output
    first = find_registration(open_client(default_store()), EXPERIMENT)
    assert first is not None
    shutil.rmtree(paths.var_dir() / "mlflow")

    completed = subprocess.run(
        [sys.executable, "-m", "eval_pipeline.cli", "experiment", "register", EXPERIMENT],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert completed.returncode == 2, (completed.stdout, completed.stderr)
    assert "Traceback" not in completed.stderr
    (line,) = [line for line in completed.stderr.splitlines() if line.startswith("error: ")]
    for named in (EXPERIMENT, first.run_id, default_store().uri, "restore the store"):
        assert named in line, (named, line)

    # The demo's path, in a new process as a demo is (this one's MLflow client still
    # holds the deleted store's file open).
    demo_path = subprocess.run(
        [sys.executable, "-c", DEMO_PATH, EXPERIMENT],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert demo_path.returncode == 0, demo_path.stderr
    assert demo_path.stdout.startswith("refused: ") and first.run_id in demo_path.stdout
    listed = subprocess.run(
        [sys.executable, "-m", "eval_pipeline.cli", "experiment", "list"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert f"{EXPERIMENT}: equivalence, margin 2; not registered" in listed.stdout, listed


DEMO_PATH = """
import sys
import dagster as dg
from eval_pipeline.experiments.spec import load_spec
from eval_pipeline.dagster_client.launch import NoProgress, run_registered_experiment

with dg.DagsterInstance.get() as instance:
    outcome = run_registered_experiment(instance, load_spec(sys.argv[1]), NoProgress())
assert not outcome.runs, outcome
print(f"refused: {outcome.refused}")
"""
