"""The experiment assets' work without Dagster, on a real MLflow SQLite store: the report
refuses an arm with no result under the registration (naming the partition to materialize)
and publishes nothing; a published report's files and the metrics and verdicts its MLflow
runs hold; and an arm's figures at a glance."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from eval_pipeline import paths
from eval_pipeline.experiments.arms import RESULT_FILE, ArmResult, experiment_root
from eval_pipeline.experiments.parity import ParityReport
from eval_pipeline.experiments.publish import PublishedReport, arm_figures, publish_parity
from eval_pipeline.experiments.registry import ExperimentError, Registration, register
from eval_pipeline.experiments.spec import ExperimentSpec
from eval_pipeline.scoring.score import CaseScore
from eval_pipeline.tracking.mlflow_store import TrackingStore, open_client
from eval_pipeline.tracking.provenance import code_version
from eval_pipeline_tests.experiments.test_parity import score, spec
from eval_pipeline_tests.experiments.test_registry import configs, material, result_runs

ARM_SCORES = "experiments/unit-parity/arm_scores"
TAGS = {"dagster.run_id": "run-1", "dagster.asset_key": "experiments/unit-parity/parity_report"}


def registered(store: TrackingStore, experiment: ExperimentSpec) -> Registration:
    registration, _ = register(
        open_client(store), store, experiment, material(experiment), code_version()
    )
    return registration


def arm_result(arm: str, scores: list[CaseScore], spec_hash: str = "h") -> ArmResult:
    return ArmResult(
        experiment_id="unit-parity",
        arm=arm,
        spec_hash=spec_hash,
        registration_run_id="r",
        fixture_id="fx-unit",
        run_id=f"unit-parity-{arm}-run",
        scores=tuple(scores),
    )


def store_result(result: ArmResult) -> None:
    folder = experiment_root(result.experiment_id) / result.arm
    folder.mkdir(parents=True)
    (folder / RESULT_FILE).write_text(result.model_dump_json(), encoding="utf-8")


def publish(store: TrackingStore, experiment: ExperimentSpec) -> PublishedReport:
    return publish_parity(
        open_client(store),
        experiment,
        material(experiment),
        configs(),
        arm_scores_asset=ARM_SCORES,
        tags=TAGS,
    )


def report_files() -> list[Path]:
    return sorted((paths.var_dir() / "reports" / "experiments").glob("*"))


@pytest.mark.parametrize("stale", [False, True], ids=["missing", "under-an-older-spec"])
def test_an_arm_without_a_result_under_the_registration_is_refused_naming_its_partition(
    store: TrackingStore, stale: bool
) -> None:
    experiment = spec()
    registration = registered(store, experiment)
    store_result(arm_result("reference", [score("m-a", 1, 1.0)], registration.spec_hash))
    if stale:
        store_result(arm_result("candidate", [score("m-b", 1, 1.0)], "an-older-spec-hash"))
    with pytest.raises(ExperimentError) as refused:
        publish(store, experiment)
    assert str(refused.value) == (
        f"experiment unit-parity: arm candidate has no result under registration "
        f"{registration.run_id}: materialize its partition of {ARM_SCORES}"
    )
    assert report_files() == []
    assert result_runs(store, experiment.id) == 0


def test_a_published_report_writes_its_files_and_logs_its_metrics_and_verdicts(
    store: TrackingStore, tmp_path: Path
) -> None:
    experiment = spec()
    registration = registered(store, experiment)
    candidate = [score("m-b", i, 1.0) for i in range(39)]
    candidate.append(score("m-b", 39, None, status="infra_error"))
    store_result(
        arm_result("reference", [score("m-a", i, 1.0) for i in range(40)], registration.spec_hash)
    )
    store_result(arm_result("candidate", candidate, registration.spec_hash))

    published = publish(store, experiment)

    folder = paths.var_dir() / "reports" / "experiments"
    assert report_files() == [folder / "unit-parity.json", folder / "unit-parity.md"]
    assert published.path == folder / "unit-parity.md"
    assert published.path.read_text(encoding="utf-8") == published.markdown + "\n"
    assert published.markdown.startswith("# Experiment unit-parity: unit")
    stored = ParityReport.model_validate_json((folder / "unit-parity.json").read_text())
    assert stored == published.report
    assert published.registration == registration

    client = open_client(store)
    parent = client.get_run(published.mlflow_result_run_id)
    assert parent.data.metrics == {
        "candidate.shared_cases": 39,
        "candidate.difference": 0.0,
        "candidate.low": 0.0,
        "candidate.high": 0.0,
        "candidate.mcnemar_p": 1.0,
    }
    assert parent.data.tags["evalp.verdict.candidate"] == "inconclusive"  # ‡ cannot confirm
    assert parent.data.tags["evalp.registration_run_id"] == registration.run_id
    assert {k: parent.data.tags[k] for k in TAGS} == TAGS
    logged = client.download_artifacts(parent.info.run_id, "parity_report.md", str(tmp_path))
    assert Path(logged).read_text(encoding="utf-8") == published.markdown
    arms = {arm: client.get_run(run).data.metrics for arm, run in published.mlflow_arm_runs.items()}
    assert arms == {
        "reference": {
            "cases": 40,
            "scored": 40,
            "infra_errors": 0,
            "budget_stopped": 0,
            "mean_points": 100.0,
        },
        "candidate": {
            "cases": 40,
            "scored": 39,
            "infra_errors": 1,
            "budget_stopped": 0,
            "mean_points": 100.0,
        },
    }


def test_the_report_files_are_utf8_on_a_machine_whose_locale_is_not(
    store: TrackingStore, tmp_path: Path
) -> None:
    """Found thinning the experiment assets: the report's JSON was written in the locale's
    encoding, and it holds text no ASCII or cp1252 locale can encode (its verdict notes'
    symbols), so publishing failed there, or wrote what the sweep report (reading UTF-8)
    could not read."""
    experiment = spec()
    registration = registered(store, experiment)
    for arm, model in (("reference", "m-a"), ("candidate", "m-b")):
        scores = [score(model, i, 1.0) for i in range(40)]
        store_result(arm_result(arm, scores, registration.spec_hash))
    report = publish(store, experiment).report
    as_json = report.model_dump_json(indent=1)
    assert not as_json.isascii()
    (tmp_path / "report.json").write_text(as_json, encoding="utf-8")
    write_in_ascii_locale = (
        "import sys\n"
        "from eval_pipeline.experiments.parity import ParityReport\n"
        "from eval_pipeline.experiments.publish import write_report\n"
        "text = open(sys.argv[1], encoding='utf-8').read()\n"
        "write_report(ParityReport.model_validate_json(text), 'markdown')\n"
    )
    home = tmp_path / "ascii-home"
    env = {
        **os.environ,
        "LC_ALL": "C",
        "LANG": "C",
        "PYTHONUTF8": "0",
        "PYTHONCOERCECLOCALE": "0",
        "EVALP_HOME": str(home),
    }
    written = subprocess.run(
        [sys.executable, "-c", write_in_ascii_locale, str(tmp_path / "report.json")],
        env=env,
        capture_output=True,
        text=True,
        encoding="utf-8",
        check=False,
    )
    assert written.returncode == 0, written.stderr[-2000:]
    stored = home / "reports" / "experiments" / "unit-parity.json"
    assert ParityReport.model_validate_json(stored.read_text(encoding="utf-8")) == report


def test_a_comparison_without_shared_cases_logs_only_its_count_and_an_empty_arm_no_mean(
    store: TrackingStore,
) -> None:
    experiment = spec()
    registration = registered(store, experiment)
    unheard = [score("m-b", i, None, status="infra_error") for i in range(3)]
    store_result(arm_result("reference", [score("m-a", 0, 1.0)], registration.spec_hash))
    store_result(arm_result("candidate", unheard, registration.spec_hash))

    published = publish(store, experiment)

    client = open_client(store)
    parent = client.get_run(published.mlflow_result_run_id)
    assert parent.data.metrics == {"candidate.shared_cases": 0}
    assert parent.data.tags["evalp.verdict.candidate"] == "inconclusive"
    candidate = client.get_run(published.mlflow_arm_runs["candidate"]).data.metrics
    assert candidate == {"cases": 3, "scored": 0, "infra_errors": 3, "budget_stopped": 0}


def test_an_arms_figures_count_scored_unheard_and_stopped_cases_apart() -> None:
    scores = [
        score("m-a", 1, 1.0, seed=0),
        score("m-a", 1, 0.0, seed=1),
        score("m-a", 2, 0.0),
        score("m-a", 3, None, status="infra_error"),
        score("m-a", 4, None, status="harness_error"),
        score("m-a", 5, None, status="judge_error"),
        score("m-a", 6, None, status="budget_stopped"),
    ]
    figures = arm_figures(arm_result("reference", scores))
    assert figures.model_dump() == {
        "arm": "reference",
        "cases": 6,
        "scored": 3,
        "infra_errors": 2,  # a judge error is not an infrastructure error
        "budget_stopped": 1,
        "mean_points": 33.33,
    }
    nothing_scored = arm_figures(arm_result("candidate", scores[3:]))
    assert (nothing_scored.scored, nothing_scored.mean_points) == (0, None)
