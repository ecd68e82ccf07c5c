"""Each pre-registered experiment as two assets: its arms' scores (a partition per arm)
and its parity report. Both re-read the spec at run time and refuse to run or report
against an unregistered or altered spec, or another fixture set, whoever starts them (the
CLI, the UI, a schedule)."""

import hashlib
import warnings
from pathlib import Path

import dagster as dg

from eval_pipeline import paths
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
from eval_pipeline.defs.tracking_assets import MlflowTracking
from eval_pipeline.experiments.spec import ExperimentSpec, load_spec, resolve, scan_specs


def arm_scores_key(experiment: str) -> dg.AssetKey:
    return dg.AssetKey(["experiments", experiment, "arm_scores"])


def parity_report_key(experiment: str) -> dg.AssetKey:
    return dg.AssetKey(["experiments", experiment, "parity_report"])


def experiment_assets(spec: ExperimentSpec) -> list[dg.AssetsDefinition]:
    """The arm-scores asset (partitioned by arm) and the parity report of one spec."""
    experiment = spec.id
    spec_version = hashlib.sha256(spec.model_dump_json().encode()).hexdigest()[:16]

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
            # The spec is part of what the arms compute: a changed spec is changed code.
            code_version=f"arms-1/{spec_version}",
            description=f"{spec.title}: each arm run apart from the sweep and scored.",
            # Several arms may run in one run (a partition range): the main job runs them all at
            # once, which saves Dagster's per-run cost; each arm still lands as its partition.
            backfill_policy=dg.BackfillPolicy.single_run(),
        )
        def arm_scores(
            context: dg.AssetExecutionContext, tracking: MlflowTracking
        ) -> dg.MaterializeResult:  # type: ignore[type-arg]
            from eval_pipeline.experiments.arms import run_arm
            from eval_pipeline.experiments.registry import ExperimentError, require_registration
            from eval_pipeline.fixtures.frozen import load_fixtures

            current = load_spec(experiment)
            material, configs, judge = resolve(current)
            fixture_set = load_fixtures(Path(latest_path(context, FIXTURES_ASSET)))
            try:
                registration = require_registration(
                    tracking.client(), current, material, fixture_set.fixture_id
                )
            except ExperimentError as error:
                raise dg.Failure(str(error)) from error
            metadata: dict[str, dg.RawMetadataValue] = {
                "arms": dg.MetadataValue.json(list(context.partition_keys)),
                "spec_hash": registration.spec_hash,
                "registration_run_id": registration.run_id,
                "fixture_id": fixture_set.fixture_id,
            }
            for arm in context.partition_keys:
                result = run_arm(
                    current,
                    arm,
                    spec_hash=registration.spec_hash,
                    registration_run_id=registration.run_id,
                    fixture_set=fixture_set,
                    agent_db=Path(latest_path(context, AGENT_WORLD_ASSET)),
                    configs=configs,
                    judge=judge,
                    run_id=f"{experiment}-{arm}-{context.run.run_id[:8]}",
                )
                scored = [s for s in result.scores if s.score is not None]
                metadata |= {
                    f"{arm}: cases": len({s.case_id for s in result.scores}),
                    f"{arm}: scored": len(scored),
                    f"{arm}: infra_errors": sum(
                        1 for s in result.scores if s.status in ("infra_error", "harness_error")
                    ),
                    f"{arm}: budget_stopped": sum(
                        1 for s in result.scores if s.status == "budget_stopped"
                    ),
                }
                if scored:
                    metadata[f"{arm}: mean_points"] = round(
                        100 * sum(s.score or 0 for s in scored) / len(scored), 2
                    )
            return dg.MaterializeResult(metadata=metadata)

    @dg.asset(
        key=parity_report_key(experiment),
        group_name=EXPERIMENTS_GROUP,
        deps=[arm_scores_key(experiment), GATE_CONFIG_SOURCE],
        code_version=f"parity-1/{spec_version}",
        description=f"{spec.title}: the paired comparison and its verdict.",
    )
    def parity(context: dg.AssetExecutionContext, tracking: MlflowTracking) -> dg.MaterializeResult:  # type: ignore[type-arg]
        from eval_pipeline.experiments.arms import read_arm_result
        from eval_pipeline.experiments.parity import parity_report, report_markdown
        from eval_pipeline.experiments.registry import (
            ExperimentError,
            log_result,
            require_registration,
        )
        from eval_pipeline.scoring.gate import load_gate_config
        from eval_pipeline.tracking.provenance import code_version

        current = load_spec(experiment)
        material, configs, _ = resolve(current)
        client = tracking.client()
        try:
            registration = require_registration(client, current, material, current.fixture_id)
        except ExperimentError as error:
            raise dg.Failure(str(error)) from error
        scores = {}
        for arm in current.arms():
            result = read_arm_result(experiment, arm)
            if result is None or result.spec_hash != registration.spec_hash:
                raise dg.Failure(
                    f"experiment {experiment}: arm {arm} has no result under registration "
                    f"{registration.run_id}: materialize its partition of "
                    f"{arm_scores_key(experiment).to_user_string()}"
                )
            scores[arm] = list(result.scores)
        providers = {name: configs[name].provider for name in current.models()}
        report = parity_report(
            current, registration.spec_hash, scores, load_gate_config(), providers
        )
        markdown = report_markdown(current, report)
        folder = paths.var_dir() / "reports" / "experiments"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{experiment}.md").write_text(markdown + "\n", encoding="utf-8")
        (folder / f"{experiment}.json").write_text(report.model_dump_json(indent=1))
        verdicts = {c.candidate: c.verdict for c in report.comparisons}
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
        arm_metrics = {
            arm.arm: {
                "cases": arm.cases,
                "scored": arm.scored,
                "infra_errors": arm.infra_errors,
                "budget_stopped": arm.budget_stopped,
                **({"mean_points": arm.mean_points} if arm.mean_points is not None else {}),
            }
            for arm in report.arms
        }
        parent, arm_runs = log_result(
            client,
            current,
            material,
            current.fixture_id,
            arm_metrics=arm_metrics,
            summary_metrics=summary,
            verdicts=verdicts,
            artifacts={
                "parity_report.md": markdown,
                "parity_report.json": report.model_dump_json(indent=1),
            },
            code=code_version(),
            tags={
                "dagster.run_id": context.run.run_id,
                "dagster.asset_key": context.asset_key.to_user_string(),
            },
        )
        return dg.MaterializeResult(
            metadata={
                "verdicts": dg.MetadataValue.json(verdicts),
                "comparisons": dg.MetadataValue.json(
                    [
                        {
                            "candidate": c.candidate,
                            "reference": c.reference,
                            "kind": report.kind,
                            "margin": report.margin,
                            "difference": c.difference,
                            "low": c.low,
                            "high": c.high,
                            "verdict": c.verdict,
                        }
                        for c in report.comparisons
                    ]
                ),
                "report": dg.MetadataValue.md(markdown),
                "path": dg.MetadataValue.path(str(folder / f"{experiment}.md")),
                "spec_hash": registration.spec_hash,
                "registration_run_id": registration.run_id,
                "mlflow_result_run_id": parent,
                "mlflow_arm_runs": dg.MetadataValue.json(arm_runs),
                **{
                    f"{c.candidate}: difference": round(c.difference, 3)
                    for c in report.comparisons
                    if c.difference is not None
                },
            }
        )

    return [arm_scores, parity]


def all_experiment_assets() -> list[dg.AssetsDefinition]:
    """The assets of every valid spec (an invalid one is reported by `evalp experiment`)."""
    specs, _ = scan_specs()
    return [asset for spec in specs for asset in experiment_assets(spec)]
