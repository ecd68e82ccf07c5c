"""Each pre-registered experiment as two assets: its arms' scores (a partition per arm)
and its parity report. Both re-read the spec at run time and refuse to run or report
against an unregistered or altered spec, or another fixture set, whoever starts them (the
CLI, the UI, a schedule)."""

import hashlib
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import dagster as dg

from eval_pipeline.defs.automation import AFTER_THE_LANES
from eval_pipeline.defs.code_versions import asset_code_version
from eval_pipeline.defs.figures import AssetFigures, FilePath, Markdown
from eval_pipeline.defs.keys import (
    AGENT_WORLD_ASSET,
    EXPERIMENTS_GROUP,
    FIXTURES_ASSET,
    GATE_CONFIG_SOURCE,
    JUDGE_CONFIG_SOURCE,
    MODEL_CONFIGS_SOURCE,
    PRICE_BOOK_SOURCE,
)
from eval_pipeline.defs.lane_assets import latest_path
from eval_pipeline.defs.model_sessions import run_slots
from eval_pipeline.defs.resources import MlflowTracking
from eval_pipeline.experiments.spec import ExperimentSpec, load_spec, resolve, scan_specs
from eval_pipeline.records import FrozenRecord

if TYPE_CHECKING:
    from eval_pipeline.experiments.publish import ArmsRun, PublishedReport


class ParityComparisonFigures(FrozenRecord):
    candidate: str
    reference: str
    kind: str
    margin: float
    difference: float | None
    low: float | None
    high: float | None
    verdict: str
    meaning: str


class ParityFigures(AssetFigures):
    """An experiment's parity report (read with `parity_report_key`)."""

    report: Markdown
    path: FilePath
    comparisons: tuple[ParityComparisonFigures, ...]


def arm_scores_key(experiment: str) -> dg.AssetKey:
    return dg.AssetKey(["experiments", experiment, "arm_scores"])


def parity_report_key(experiment: str) -> dg.AssetKey:
    return dg.AssetKey(["experiments", experiment, "parity_report"])


def experiment_assets(spec: ExperimentSpec) -> list[dg.AssetsDefinition]:
    """The arm-scores asset (partitioned by arm) and the parity report of one spec."""
    # The spec is part of what both compute: a changed spec is changed code.
    spec_version = hashlib.sha256(spec.model_dump_json().encode()).hexdigest()[:16]
    return [_arm_scores_asset(spec, spec_version), _parity_asset(spec, spec_version)]


def _arm_scores_asset(spec: ExperimentSpec, spec_version: str) -> dg.AssetsDefinition:
    experiment = spec.id
    # `backfill_policy` is beta in Dagster 1.13: its warning would print on every command
    # that loads the definitions; the single-run policy is what the arms rely on.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dg.BetaWarning)

        @dg.asset(
            key=arm_scores_key(experiment),
            partitions_def=dg.StaticPartitionsDefinition(list(spec.arms())),
            group_name=EXPERIMENTS_GROUP,
            deps=[
                FIXTURES_ASSET,
                AGENT_WORLD_ASSET,
                MODEL_CONFIGS_SOURCE,
                PRICE_BOOK_SOURCE,
                JUDGE_CONFIG_SOURCE,
            ],
            code_version=asset_code_version(f"arms/{spec_version}", __name__),
            description=f"{spec.title}: each arm run apart from the sweep and scored.",
            # Several arms may run in one run (a partition range): the main job runs them all at
            # once, which saves Dagster's per-run cost; each arm still lands as its partition.
            backfill_policy=dg.BackfillPolicy.single_run(),
        )
        def arm_scores(
            context: dg.AssetExecutionContext, tracking: MlflowTracking
        ) -> dg.MaterializeResult:  # type: ignore[type-arg]
            from eval_pipeline.experiments.publish import run_registered_arms

            current = load_spec(experiment)
            material, configs, judge = resolve(current)
            with _refusal_as_failure(), run_slots(context.instance) as slots:
                run = run_registered_arms(
                    tracking.client(),
                    current,
                    material,
                    configs,
                    judge,
                    context.partition_keys,
                    fixtures=Path(latest_path(context, FIXTURES_ASSET)),
                    agent_db=Path(latest_path(context, AGENT_WORLD_ASSET)),
                    run_label=context.run.run_id[:8],
                    slots=slots,
                )
            return dg.MaterializeResult(metadata=_arms_metadata(run))

    return arm_scores


def _parity_asset(spec: ExperimentSpec, spec_version: str) -> dg.AssetsDefinition:
    experiment = spec.id

    @dg.asset(
        key=parity_report_key(experiment),
        group_name=EXPERIMENTS_GROUP,
        deps=[arm_scores_key(experiment), GATE_CONFIG_SOURCE],
        automation_condition=AFTER_THE_LANES,
        code_version=asset_code_version(f"parity/{spec_version}", __name__),
        description=f"{spec.title}: the paired comparison and its verdict.",
    )
    def parity(context: dg.AssetExecutionContext, tracking: MlflowTracking) -> dg.MaterializeResult:  # type: ignore[type-arg]
        from eval_pipeline.experiments.publish import publish_parity

        current = load_spec(experiment)
        material, configs, _ = resolve(current)
        with _refusal_as_failure():
            published = publish_parity(
                tracking.client(),
                current,
                material,
                configs,
                arm_scores_asset=arm_scores_key(experiment).to_user_string(),
                tags={
                    "dagster.run_id": context.run.run_id,
                    "dagster.asset_key": context.asset_key.to_user_string(),
                },
            )
        return dg.MaterializeResult(metadata=_parity_metadata(published))

    return parity


@contextmanager
def _refusal_as_failure() -> Iterator[None]:
    """An experiment's refusal fails the step with its own message, which says what to do
    (a traceback would only bury it)."""
    from eval_pipeline.experiments.registry import ExperimentError

    try:
        yield
    except ExperimentError as error:
        raise dg.Failure(str(error)) from error


def _arms_metadata(run: "ArmsRun") -> "dict[str, dg.RawMetadataValue]":
    metadata: dict[str, dg.RawMetadataValue] = {
        "arms": dg.MetadataValue.json([figures.arm for figures in run.arms]),
        "spec_hash": run.registration.spec_hash,
        "registration_run_id": run.registration.run_id,
        "fixture_id": run.fixture_id,
    }
    for figures in run.arms:
        metadata |= {
            f"{figures.arm}: cases": figures.cases,
            f"{figures.arm}: scored": figures.scored,
            f"{figures.arm}: infra_errors": figures.infra_errors,
            f"{figures.arm}: budget_stopped": figures.budget_stopped,
        }
        if figures.mean_points is not None:
            metadata[f"{figures.arm}: mean_points"] = figures.mean_points
    return metadata


def _parity_metadata(published: "PublishedReport") -> "dict[str, dg.RawMetadataValue]":
    from eval_pipeline.experiments.parity import verdict_meaning
    from eval_pipeline.experiments.publish import verdicts

    report = published.report
    figures = ParityFigures(
        report=published.markdown,
        path=str(published.path),
        comparisons=tuple(
            ParityComparisonFigures(
                candidate=c.candidate,
                reference=c.reference,
                kind=report.kind,
                margin=report.margin,
                difference=c.difference,
                low=c.low,
                high=c.high,
                verdict=c.verdict,
                meaning=verdict_meaning(report.kind, report.design, report.margin, c.verdict),
            )
            for c in report.comparisons
        ),
    )
    return {
        **figures.metadata(),
        "verdicts": dg.MetadataValue.json(verdicts(report)),
        "spec_hash": published.registration.spec_hash,
        "registration_run_id": published.registration.run_id,
        "mlflow_result_run_id": published.mlflow_result_run_id,
        "mlflow_arm_runs": dg.MetadataValue.json(published.mlflow_arm_runs),
        **{
            f"{c.candidate}: difference": round(c.difference, 3)
            for c in report.comparisons
            if c.difference is not None
        },
    }


def all_experiment_assets() -> list[dg.AssetsDefinition]:
    """The assets of every valid spec (an invalid one is reported by `evalp experiment`)."""
    specs, _ = scan_specs()
    return [asset for spec in specs for asset in experiment_assets(spec)]
