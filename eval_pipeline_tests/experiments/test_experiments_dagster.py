"""The shipped experiments, registered and run through the `evalp` command on a real
Dagster instance and a real MLflow SQLite store (on the test's small world): the
registration precedes every result, the serving-path parity of one deterministic model
behind two wire formats is confirmed equivalent, and sim-small's stall bounce is not inert."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from eval_pipeline import paths
from eval_pipeline.cli import main
from eval_pipeline.experiments.parity import ParityReport
from eval_pipeline.experiments.registry import (
    HASH_TAG,
    KIND_TAG,
    REGISTRATION_TAG,
    find_registration,
)
from eval_pipeline.tracking.store import default_store, open_client
from eval_pipeline_tests.experiments.conftest import SHIPPED


def evalp(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.output


def report_of(experiment: str) -> ParityReport:
    path = paths.var_dir() / "reports" / "experiments" / f"{experiment}.json"
    return ParityReport.model_validate_json(path.read_text())


def test_the_shipped_experiments_register_run_and_give_verdicts(
    at_project: tuple[Path, str],
) -> None:
    for experiment in SHIPPED:
        code, out = evalp("experiment", "register", experiment)
        assert code == 0, out
        assert "registered" in out
    for experiment in SHIPPED:
        code, out = evalp("experiment", "run", experiment)
        assert code == 0, out
        assert "| category | n shared |" in out

    serving = report_of("serving-path-sim-strong")
    (comparison,) = serving.comparisons
    assert comparison.verdict == "confirmed", comparison.reasons
    assert comparison.low is not None and comparison.high is not None
    assert -2 < comparison.low <= comparison.high < 2
    assert comparison.shared_cases > 100

    ablation = report_of("guard-ablation-sim-small")
    verdicts = {c.candidate: c for c in ablation.comparisons}
    assert set(verdicts) == {
        "stall_bounce_off",
        "argument_repair_off",
        "truncation_refusal_off",
        "iteration_cap_off",
    }
    stall = verdicts["stall_bounce_off"]
    assert stall.verdict != "confirmed", stall.reasons
    assert stall.difference is not None and stall.difference < -3

    lanes = report_of("lanes-sim-small")
    (lead,) = lanes.comparisons
    assert lead.difference is not None and lead.difference > 0
    assert {arm.lane for arm in lanes.arms} == {"model", "product"}
    gates = {arm.arm: arm.gate_passed for arm in lanes.arms}
    assert gates["reference"] is None  # the model lane has no ship gate

    client = open_client(default_store())
    for experiment in SHIPPED:
        registration = find_registration(client, experiment)
        assert registration is not None
        results = client.search_runs(
            [registration.mlflow_experiment_id],
            filter_string=f"tags.`{KIND_TAG}` = 'result'",
        )
        assert results, experiment
        for run in results:
            assert run.info.start_time > registration.registered_at_ms
            assert run.data.tags[REGISTRATION_TAG] == registration.run_id
            assert run.data.tags[HASH_TAG] == registration.spec_hash
        (parent,) = [r for r in results if "mlflow.parentRunId" not in r.data.tags]
        children = [
            r for r in results if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id
        ]
        assert len(children) == len(results) - 1 >= 2
        artifacts = {a.path for a in client.list_artifacts(parent.info.run_id)}
        assert {"parity_report.md", "parity_report.json"} <= artifacts
    stored = json.loads(
        (paths.var_dir() / "reports" / "experiments" / "serving-path-sim-strong.json").read_text()
    )
    print(
        {
            name: [(c.candidate, c.verdict, c.difference) for c in report_of(name).comparisons]
            for name in SHIPPED
        }
    )
    assert stored["spec_hash"] == find_registration(client, "serving-path-sim-strong").spec_hash  # type: ignore[union-attr]
