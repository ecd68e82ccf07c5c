"""The quick loop from the terminal (issue 28, item 7): `evalp demo --limit N` builds the
world and freezes the fixture set as the demo does, then runs the sweep's models on N cases
only; `evalp sweep --models sim-small --cases 5 --seeds 0` runs in seconds; `evalp
experiment run X --limit 4` runs a registered spec's arms on four cases. Each prints that the
run is a subset, and none leaves a lane partition, a score in the warehouse, an MLflow
run or a report behind: a subset is never published as the suite."""

from __future__ import annotations

import re
from pathlib import Path

import duckdb
import pytest

from eval_pipeline import paths
from eval_pipeline_tests.demo_helpers import run_evalp, small_world_env


def _scores_stored(warehouse: Path) -> int:
    conn = duckdb.connect(str(warehouse), read_only=True)
    try:
        found = conn.execute(
            "select count(*) from information_schema.tables where table_name = 'case_scores'"
        ).fetchone()
        if not found or not found[0]:
            return 0
        row = conn.execute("select count(*) from case_scores").fetchone()
        return int(row[0]) if row else 0
    finally:
        conn.close()


@pytest.mark.slow
def test_a_subset_demo_and_sweep_print_a_subset_and_publish_nothing(isolated_state: Path) -> None:
    env = small_world_env(isolated_state)
    demo = run_evalp(["demo", "--limit", "3"], env, timeout_s=600)
    assert demo.returncode == 0, demo.stderr
    assert re.search(r"^SUBSET run \S+: 3 of the \d+ cases of fixture set fx-", demo.stdout, re.M)
    assert "Not the suite's result" in demo.stdout

    sweep = run_evalp(["sweep", "--models", "sim-small", "--cases", "5", "--seeds", "0"], env)
    assert sweep.returncode == 0, sweep.stderr
    assert "(a SUBSET: 5 of its" in sweep.stdout
    assert re.search(r"^SUBSET run \S+: 5 of the", sweep.stdout, re.M)
    assert "| product | sim-small | all |" in sweep.stdout

    typo = run_evalp(["sweep", "--models", "sim-small", "--categories", "royalty_maths"], env)
    assert typo.returncode == 2
    assert (
        typo.stderr.strip()
        .splitlines()[-1]
        .startswith(
            "error: --categories: no case is in royalty_maths; the fixture set's categories are"
        )
    )

    # the committed spec names the default world's fixture set: the same spec on this one
    fixture_id = re.findall(r"cases of fixture set (fx-[0-9a-f]+)", sweep.stdout)[0]
    spec = (paths.CONFIGS_DIR / "experiments" / "guard-ablation-sim-hesitant.yaml").read_text()
    specs = isolated_state / "experiments-specs"
    specs.mkdir()
    (specs / "guard-ablation-sim-hesitant.yaml").write_text(
        re.sub(r"fixture_id: fx-[0-9a-f]+", f"fixture_id: {fixture_id}", spec)
    )
    env["EVALP_EXPERIMENTS_DIR"] = str(specs)
    unregistered = run_evalp(
        ["experiment", "run", "guard-ablation-sim-hesitant", "--limit", "4"], env
    )
    assert unregistered.returncode != 0 and "is not registered" in unregistered.stderr
    registered = run_evalp(["experiment", "register", "guard-ablation-sim-hesitant"], env)
    assert registered.returncode == 0, registered.stderr
    arms = run_evalp(["experiment", "run", "guard-ablation-sim-hesitant", "--limit", "4"], env)
    assert arms.returncode == 0, arms.stderr
    assert re.search(r"^SUBSET run \S+: 4 of the", arms.stdout, re.M)
    assert (
        "| stall_bounce_off |" in arms.stdout and "verdicts below are of these cases" in arms.stdout
    )
    assert not (paths.var_dir() / "reports" / "experiments").exists()
    assert not (paths.var_dir() / "experiments").exists()  # where the arms of record live

    assert not paths.lanes_dir().exists() or not any(paths.lanes_dir().rglob("*.jsonl"))
    assert _scores_stored(paths.warehouse_path()) == 0
    assert not (paths.var_dir() / "reports" / "sweep").exists()
    results = sorted((paths.var_dir() / "subsets").glob("*/subset_result.json"))
    assert len(results) == 2
    assert (
        len(
            list(
                (paths.var_dir() / "subsets").glob("*/guard-ablation-sim-hesitant/parity_report.md")
            )
        )
        == 1
    )
