"""What an experiment's assets do, apart from Dagster: run the arms a run asks for, once the
spec is found registered and unchanged, and publish the parity report (its files and its
MLflow runs) from arm results run under that registration only. Whoever calls these (the
assets) resolves the inputs and shows what comes back; a refusal is an `ExperimentError`
whose message says what to do.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from eval_pipeline.cases.frozen import load_fixtures
from eval_pipeline.experiments.arms import ArmResult, read_arm_result, run_arm
from eval_pipeline.experiments.parity import (
    ParityReport,
    experiment_reports_dir,
    parity_report,
    report_markdown,
)
from eval_pipeline.experiments.registry import (
    ExperimentError,
    Registration,
    log_result,
    require_registration,
)
from eval_pipeline.experiments.spec import ExperimentSpec, Registered
from eval_pipeline.providers.config import ModelConfig
from eval_pipeline.records import FrozenRecord
from eval_pipeline.scoring.gate import load_gate_config
from eval_pipeline.scoring.judge import Judge
from eval_pipeline.scoring.score import CaseScore
from eval_pipeline.tracking.provenance import code_version

if TYPE_CHECKING:
    from mlflow import MlflowClient

    from eval_pipeline.providers.call_slots import RunSlots


class ArmFigures(FrozenRecord):
    """One arm's case scores at a glance, as a run of the arm shows them."""

    arm: str
    cases: int
    scored: int
    """Case × seed pairs with a score."""
    infra_errors: int
    """Infrastructure or harness errors (a judge error is not counted here, unlike the
    report's ‡)."""
    budget_stopped: int
    mean_points: float | None
    """The mean score over the scored pairs, in points to 2 places; None: none scored."""


class ArmsRun(FrozenRecord):
    """The arms one run ran, and the registration they ran under."""

    registration: Registration
    fixture_id: str
    arms: tuple[ArmFigures, ...]


class PublishedReport(FrozenRecord):
    """A parity report once written and logged: what a reader of the run is pointed to."""

    registration: Registration
    report: ParityReport
    markdown: str
    path: Path
    """The markdown file; the report's JSON is beside it."""
    mlflow_result_run_id: str
    mlflow_arm_runs: dict[str, str]
    """Each arm's nested MLflow run, by arm name."""


def arm_figures(result: ArmResult) -> ArmFigures:
    points = [s.score for s in result.scores if s.score is not None]
    return ArmFigures(
        arm=result.arm,
        cases=len({s.case_id for s in result.scores}),
        scored=len(points),
        infra_errors=sum(1 for s in result.scores if s.status in ("infra_error", "harness_error")),
        budget_stopped=sum(1 for s in result.scores if s.status == "budget_stopped"),
        mean_points=round(100 * sum(points) / len(points), 2) if points else None,
    )


def run_registered_arms(
    client: MlflowClient,
    spec: ExperimentSpec,
    material: Registered,
    configs: dict[str, ModelConfig],
    judge: Judge,
    arms: Sequence[str],
    *,
    fixtures: Path,
    agent_db: Path,
    run_label: str,
    slots: RunSlots | None = None,
) -> ArmsRun:
    """Run each arm named, only against an unchanged registration on the fixture set at
    hand, so that every arm result is stamped with the registration it answers to.
    `run_label` tells this run's arm runs apart from other runs of the same arms; `slots`
    are the Dagster run's calls in flight."""
    fixture_set = load_fixtures(fixtures)
    registration = require_registration(client, spec, material, fixture_set.fixture_id)
    results = [
        run_arm(
            spec,
            arm,
            spec_hash=registration.spec_hash,
            registration_run_id=registration.run_id,
            fixture_set=fixture_set,
            agent_db=agent_db,
            configs=configs,
            judge=judge,
            run_id=f"{spec.id}-{arm}-{run_label}",
            slots=slots,
        )
        for arm in arms
    ]
    return ArmsRun(
        registration=registration,
        fixture_id=fixture_set.fixture_id,
        arms=tuple(arm_figures(result) for result in results),
    )


def registered_scores(
    spec: ExperimentSpec, registration: Registration, arm_scores_asset: str
) -> dict[str, list[CaseScore]]:
    """Every arm's case scores, from results run under this registration's spec only: an
    older result answers another question. `arm_scores_asset` names where a missing arm
    is run, for the refusal to say so."""
    scores: dict[str, list[CaseScore]] = {}
    for arm in spec.arms():
        result = read_arm_result(spec.id, arm)
        if result is None or result.spec_hash != registration.spec_hash:
            raise ExperimentError(
                f"experiment {spec.id}: arm {arm} has no result under registration "
                f"{registration.run_id}: materialize its partition of {arm_scores_asset}"
            )
        scores[arm] = list(result.scores)
    return scores


def verdicts(report: ParityReport) -> dict[str, str]:
    return {c.candidate: c.verdict for c in report.comparisons}


def summary_metrics(report: ParityReport) -> dict[str, float]:
    """Each comparison's numbers as `<candidate>.<name>`; one the comparison could not
    compute (no shared case) is left out, since a metric has to be a number."""
    summary: dict[str, float] = {}
    for c in report.comparisons:
        summary[f"{c.candidate}.shared_cases"] = c.shared_cases
        for name, value in (
            ("difference", c.difference),
            ("low", c.low),
            ("high", c.high),
            ("mcnemar_p", c.mcnemar_p),
        ):
            if value is not None:
                summary[f"{c.candidate}.{name}"] = value
    return summary


def arm_metrics(report: ParityReport) -> dict[str, dict[str, float]]:
    """Each arm's counts and mean for its nested run; no mean when nothing was scored."""
    return {
        arm.arm: {
            "cases": arm.cases,
            "scored": arm.scored,
            "infra_errors": arm.infra_errors,
            "budget_stopped": arm.budget_stopped,
            **({"mean_points": arm.mean_points} if arm.mean_points is not None else {}),
        }
        for arm in report.arms
    }


def write_report(report: ParityReport, markdown: str) -> Path:
    """The report's markdown and JSON under `<var>/reports/experiments/`, where the sweep
    report reads every experiment's from; the markdown file's path."""
    folder = experiment_reports_dir()
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{report.experiment_id}.md"
    path.write_text(markdown + "\n", encoding="utf-8")
    (folder / f"{report.experiment_id}.json").write_text(
        report.model_dump_json(indent=1), encoding="utf-8"
    )
    return path


def publish_parity(
    client: MlflowClient,
    spec: ExperimentSpec,
    material: Registered,
    configs: Mapping[str, ModelConfig],
    *,
    arm_scores_asset: str,
    tags: Mapping[str, str],
) -> PublishedReport:
    """The parity report of the spec's arms, written and logged to MLflow, only against an
    unchanged registration and from arm results run under it: a verdict never stands on a
    spec edited after its registration. `tags` go on the MLflow runs (who logged them)."""
    registration = require_registration(client, spec, material, spec.fixture_id)
    scores = registered_scores(spec, registration, arm_scores_asset)
    providers = {name: configs[name].provider for name in spec.models()}
    report = parity_report(spec, registration.spec_hash, scores, load_gate_config(), providers)
    markdown = report_markdown(spec, report)
    path = write_report(report, markdown)
    parent, arm_runs = log_result(
        client,
        spec,
        material,
        spec.fixture_id,
        arm_metrics=arm_metrics(report),
        summary_metrics=summary_metrics(report),
        verdicts=verdicts(report),
        artifacts={
            "parity_report.md": markdown,
            "parity_report.json": report.model_dump_json(indent=1),
        },
        code=code_version(),
        tags=tags,
    )
    return PublishedReport(
        registration=registration,
        report=report,
        markdown=markdown,
        path=path,
        mlflow_result_run_id=parent,
        mlflow_arm_runs=arm_runs,
    )
