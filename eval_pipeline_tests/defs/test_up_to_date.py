"""A second `evalp demo` with nothing changed runs nothing and says what it skipped; a
changed input re-runs what it affects and nothing else (counted in materializations)."""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path

import dagster as dg
import pytest

from eval_pipeline_tests.demo_helpers import run_evalp, small_world_env

ONE_SEED = "name: small\nmodels: [sim-strong]\nseeds: [0]\n"
TWO_SEEDS = "name: small\nmodels: [sim-strong]\nseeds: [0, 1]\n"


def _materializations_since(instance: dg.DagsterInstance, known: set[str]) -> Counter[str]:
    """Assets materialized by the runs not in `known` (partitioned ones with their key)."""
    counted: Counter[str] = Counter()
    for run in instance.get_runs():
        if run.run_id in known:
            continue
        for event in instance.all_logs(
            run.run_id, of_type=dg.DagsterEventType.ASSET_MATERIALIZATION
        ):
            materialization = event.asset_materialization
            assert materialization is not None
            name = materialization.asset_key.to_user_string()
            counted[
                f"{name}[{materialization.partition}]" if materialization.partition else name
            ] += 1
    return counted


def _run_ids() -> set[str]:
    with dg.DagsterInstance.get() as instance:
        return {run.run_id for run in instance.get_runs()}


def _since(known: set[str]) -> Counter[str]:
    with dg.DagsterInstance.get() as instance:
        return _materializations_since(instance, known)


@pytest.mark.slow  # three small-world demos: about a minute
def test_a_second_demo_with_nothing_changed_runs_nothing_and_a_new_seed_runs_only_its_lanes(
    isolated_state: Path,
) -> None:
    env = small_world_env(isolated_state)
    sweep = Path(env["EVALP_SWEEP_CONFIG"])
    sweep.write_text(ONE_SEED)
    os.environ["DAGSTER_HOME"] = env["DAGSTER_HOME"]

    first = run_evalp(["demo"], env)
    assert first.returncode == 0, first.stderr
    after_first = _run_ids()
    assert _since(set())["world"] == 1

    second = run_evalp(["demo"], env)
    assert second.returncode == 0, second.stderr
    assert _since(after_first) == Counter()
    assert "up to date, not run again (3): main job, lanes sim-strong|0, results" in second.stdout
    # The skipped steps still report their latest results: the headline and the gate.
    gate = first.stdout.split("Ship gate: ")[1].split("\n\n")[0]
    assert gate.startswith("PASSES (1 of 1 candidates pass; every model with product-lane")
    assert "\n  sim-strong: PASSES" in gate
    assert f"Ship gate: {gate}" in second.stdout
    assert first.stdout.split("Headline:")[1].split("Ship gate")[0] in second.stdout
    after_second = _run_ids()

    sweep.write_text(TWO_SEEDS)
    third = run_evalp(["demo"], env)
    assert third.returncode == 0, third.stderr
    materialized = _since(after_second)
    lanes = {"model_lane_runs", "product_lane_runs", "model_lane_records"}
    lanes |= {"product_lane_records", "model_lane_scores", "product_lane_scores"}
    assert materialized == Counter(
        {f"{asset}[sim-strong|1]": 1 for asset in lanes}
        | {"sweep_summary": 1, "ship_gate": 1, "sweep_tracking": 1, "sweep_report": 1}
    )
    assert "up to date, not run again (2): main job, lanes sim-strong|0" in third.stdout
