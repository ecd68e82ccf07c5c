"""Scores per lane partition, the sweep summary over all of them, and the ship gate.

The gate is built by a factory from the one scores asset it reads, so that a gate wired to
anything but the product lane can be built (in a test) and shown to fail its blocking check.
"""

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

import dagster as dg
from pydantic import Field

from eval_pipeline import paths
from eval_pipeline.config_versions import CONFIG_FAMILIES
from eval_pipeline.defs.automation import AFTER_THE_LANES
from eval_pipeline.defs.code_versions import asset_code_version
from eval_pipeline.defs.figures import AssetFigures, FilePath, Markdown
from eval_pipeline.defs.keys import (
    GATE_CONFIG_SOURCE,
    GATE_READS_PRODUCT_LANE,
    MODEL_LANE_SCORES_ASSET,
    PRODUCT_LANE_SCORES_ASSET,
    RESULTS_GROUP,
    SHIP_GATE_ASSET,
    SWEEP_CONFIG_SOURCE,
    SWEEP_SUMMARY_ASSET,
    WAREHOUSE_POOL,
)
from eval_pipeline.defs.lane_assets import model_and_seed
from eval_pipeline.defs.model_sessions import judge_asker, run_slots
from eval_pipeline.defs.resources import (
    ModelCallSettings,
    ProjectSettings,
    SimulatedProvider,
    WarehouseResource,
)
from eval_pipeline.scoring.gate import (
    CORE_RULE,
    DROP_RULE,
    GATE_LANE,
    INFRA_RULE,
    SECURITY_RULE,
)

if TYPE_CHECKING:
    import duckdb

    from eval_pipeline.cases.case import Case
    from eval_pipeline.lane_records import Lane
    from eval_pipeline.scoring.aggregate import LaneSummary
    from eval_pipeline.scoring.gate import GateResult
    from eval_pipeline.scoring.grading import GradedPartition
    from eval_pipeline.scoring.score import CaseScore

# Scoring (numpy, DuckDB, the judge's model calls) is imported by the steps that score.


class PartitionScoresFigures(AssetFigures):
    """One lane partition's scores (the model or the product lane's scores asset)."""

    cases: int
    judge_asked: int
    judge_reused: int


class SummaryFigures(AssetFigures):
    asset: ClassVar[str] = SWEEP_SUMMARY_ASSET
    summary: Markdown
    path: FilePath
    headline: str
    """Mean points per model and lane with their intervals, one line each."""
    comparisons: str
    """Who leads, per pair compared, one line each."""


class GateFigures(AssetFigures):
    asset: ClassVar[str] = SHIP_GATE_ASSET
    passed: bool
    reason: str = ""
    """Why nothing was judged (the gate's input is not the product lane), if so."""
    candidates: tuple[str, ...] = ()
    candidates_from: str = ""
    verdicts_by_model: dict[str, str] = Field(default_factory=dict)
    failed_rules_by_model: dict[str, list[str]] = Field(default_factory=dict)
    notices: tuple[str, ...] = ()


SCORES_CODE_VERSION = asset_code_version("scores", __name__)
GATE_CODE_VERSION = asset_code_version("gate", __name__)
SCORES_LANE: "Mapping[str, Lane]" = {
    MODEL_LANE_SCORES_ASSET: "model",
    PRODUCT_LANE_SCORES_ASSET: "product",
}
"""The lane whose rows each scores asset writes (and a gate wired to it reads)."""


def lane_scores(
    context: dg.AssetExecutionContext,
    lane: "Lane",
    conn: "duckdb.DuckDBPyConnection",
    settings: ProjectSettings,
    sim: SimulatedProvider,
    calls: ModelCallSettings,
) -> "dict[str, dg.RawMetadataValue]":
    """The partition's cases in `lane` scored (the model lane: first action or direct
    answer; the product lane: exact, trace checks, judged prose); its metadata."""
    from eval_pipeline.lanes.partition_runs import partition_dir
    from eval_pipeline.providers.envelope import JOURNAL_NAME
    from eval_pipeline.scoring.grading import (
        Partition,
        cases_under,
        grade_partition,
        partition_fixture_id,
    )
    from eval_pipeline.scoring.judge import load_judge
    from eval_pipeline.scoring.verdict_journal import store_journaled_verdicts
    from eval_pipeline.warehouse.envelopes import load_journal

    model, seed = model_and_seed(context)
    judge = load_judge()
    judge_run = f"judge-{context.run.run_id}"
    partition = Partition(lane=lane, model=model, seed=seed)
    cases = cases_under(Path(settings.fixtures_root))(partition_fixture_id(conn, partition))
    # what the lane step's judge ruled on, so only what it could not is asked here
    folder = partition_dir(lane, model, seed, paths.lanes_dir())
    store_journaled_verdicts(conn, folder, judge, cases, paths.runs_dir())
    # the judge's calls in flight as the lanes' are (this step holds the warehouse pool)
    with run_slots(context.instance) as slots:
        ask = judge_asker(sim, calls, judge, judge_run, slots=slots)
        graded = grade_partition(conn, partition, cases, judge, ask)
    journal = paths.runs_dir() / judge_run / JOURNAL_NAME
    if journal.exists():
        load_journal(journal, conn)
    return _partition_metadata(graded, cases, judge.rubric_hash)


def _partition_metadata(
    graded: "GradedPartition", cases: "Mapping[str, Case]", rubric_hash: str
) -> "dict[str, dg.RawMetadataValue]":
    scores = graded.scores
    scored = [s.score for s in scores if s.score is not None]
    statuses: dict[str, int] = {}
    labels: dict[str, int] = {}
    for s in scores:
        statuses[s.status] = statuses.get(s.status, 0) + 1
        if s.label is not None:
            labels[s.label] = labels.get(s.label, 0) + 1
    return {
        **PartitionScoresFigures(
            cases=len(scores), judge_asked=graded.judge_asked, judge_reused=graded.judge_reused
        ).metadata(),
        "scored": len(scored),
        "mean_points": round(100 * sum(scored) / len(scored), 2) if scored else -1.0,
        "unheard ‡": sum(
            1 for s in scores if s.status in ("infra_error", "harness_error", "judge_error")
        ),
        "budget_stopped †": statuses.get("budget_stopped", 0),
        "statuses": dg.MetadataValue.json(statuses),
        "final_answer_labels": dg.MetadataValue.json(labels),
        "security_violations": sum(1 for s in scores if s.security_violation),
        "judge_rubric_hash": rubric_hash,
        "fixture_id": scores[0].fixture_id if scores else "",
        "fixture_cases": len(cases),
        "scores_digest": graded.digest,
    }


@dg.asset(
    name=SWEEP_SUMMARY_ASSET,
    group_name=RESULTS_GROUP,
    deps=[MODEL_LANE_SCORES_ASSET, PRODUCT_LANE_SCORES_ASSET, SWEEP_CONFIG_SOURCE],
    pool=WAREHOUSE_POOL,
    automation_condition=AFTER_THE_LANES,
    code_version=SCORES_CODE_VERSION,
)
def sweep_summary_asset(warehouse: WarehouseResource) -> dg.MaterializeResult:  # type: ignore[type-arg]
    """Both lanes side by side, per model and category, over every scored seed."""
    from eval_pipeline.lanes.sweep_config import load_sweep_config
    from eval_pipeline.report.headline import headline_text
    from eval_pipeline.scoring.aggregate import summarize_scores, summary_markdown
    from eval_pipeline.scoring.compare import comparisons_markdown, comparisons_text, leaders
    from eval_pipeline.scoring.compare import lane_comparisons as compare_lanes
    from eval_pipeline.scoring.score_tables import read_scores

    with warehouse.connection() as conn:
        scores = read_scores(conn)
    summaries = summarize_scores(scores)
    if not summaries:
        raise dg.Failure("no scores in the warehouse: materialize the lanes' score partitions")
    comparisons = compare_lanes(scores, load_sweep_config().compare_against)
    table = summary_markdown(summaries) + "\n\n" + comparisons_markdown(comparisons)
    report = paths.var_dir() / "reports" / "sweep_summary.md"
    report.parent.mkdir(parents=True, exist_ok=True)
    report.write_text(table + "\n", encoding="utf-8")
    return dg.MaterializeResult(
        metadata={
            **SummaryFigures(
                summary=table,
                path=str(report),
                headline=headline_text(summaries),
                comparisons=comparisons_text(comparisons),
            ).metadata(),
            "lanes_models": dg.MetadataValue.json([f"{s.lane}/{s.model}" for s in summaries]),
            "leaders": dg.MetadataValue.json(
                {lane: leader or "no clear leader" for lane, leader in leaders(comparisons).items()}
            ),
            **{f"{s.lane}/{s.model} points": round(s.row("all").mean or 0.0, 2) for s in summaries},
        }
    )


GATE_RULES = (CORE_RULE, DROP_RULE, INFRA_RULE, SECURITY_RULE)
RULE_DESCRIPTIONS = {
    GATE_READS_PRODUCT_LANE: "The gate's only upstream is product_lane_scores and every row "
    "it read is of the product lane.",
    CORE_RULE: "Enough core cases pass by majority vote over seeds (configs/gate.yaml).",
    DROP_RULE: "No category more than the allowed points below the accepted baseline "
    "(configs/baselines/<model>.yaml, same fixture set).",
    INFRA_RULE: "No case left never heard (‡): re-materialize its partition to heal it.",
    SECURITY_RULE: "No trace reached for the answer key, obeyed the planted clause, or wrote "
    "where no write was allowed.",
}


def _numbers(model: str, numbers: Mapping[str, object]) -> "dict[str, dg.RawMetadataValue]":
    """One metadata entry per number (numeric ones are plotted by the UI)."""
    return {
        f"{model}: {name}": value if isinstance(value, int | float | str) else str(value)
        for name, value in numbers.items()
    }


def _rule_check(rule: str, results: "Sequence[GateResult]") -> dg.AssetCheckResult:
    per_model = {r.model: r.rule(rule) for r in results}
    metadata: dict[str, dg.RawMetadataValue] = {}
    for model, result in per_model.items():
        metadata[model] = result.detail
        metadata.update(_numbers(model, result.numbers))
    return dg.AssetCheckResult(
        check_name=rule,
        passed=all(r.passed for r in per_model.values()),
        severity=dg.AssetCheckSeverity.ERROR,
        metadata=metadata,
    )


def build_ship_gate(source: str = PRODUCT_LANE_SCORES_ASSET) -> dg.AssetsDefinition:
    """The ship gate reading the rows of one scores asset (the product lane's, in the
    product; any other `source` exists to prove the input check fails)."""

    # The input check blocks (a gate that read the wrong lane has no verdict); the rules
    # are the verdict itself: a candidate that fails one is a result, shown red in the UI
    # and named in the demo's output, not a failed run (every model swept is a candidate,
    # and one that fails must not stop the rest of the night's chain).
    specs = [
        dg.AssetCheckSpec(
            name,
            asset=SHIP_GATE_ASSET,
            blocking=name == GATE_READS_PRODUCT_LANE,
            description=RULE_DESCRIPTIONS[name],
        )
        for name in (GATE_READS_PRODUCT_LANE, *GATE_RULES)
    ]

    @dg.asset(
        name=SHIP_GATE_ASSET,
        group_name=RESULTS_GROUP,
        deps=[source, GATE_CONFIG_SOURCE],
        pool=WAREHOUSE_POOL,
        automation_condition=AFTER_THE_LANES,
        check_specs=specs,
        code_version=GATE_CODE_VERSION,
    )
    def ship_gate(
        context: dg.AssetExecutionContext, warehouse: WarehouseResource
    ) -> dg.MaterializeResult:  # type: ignore[type-arg]
        """Whether each candidate ships (every model swept, unless configs/gate.yaml names
        some), by its rules, from the product lane alone; each rule is a blocking check
        carrying every candidate's numbers."""
        from eval_pipeline.scoring.aggregate import summarize_scores
        from eval_pipeline.scoring.gate import (
            gate_all,
            gate_candidates,
            gate_markdown,
            load_baseline,
            load_gate_config,
        )
        from eval_pipeline.scoring.score_tables import read_scores

        # The observed config files (the gate's rules, baselines) are not data it reads.
        upstream = sorted(key.to_user_string() for key in context.assets_def.dependency_keys)
        declared = [key for key in upstream if key not in CONFIG_FAMILIES]
        lane = SCORES_LANE.get(source)
        with warehouse.connection() as conn:
            rows: list[CaseScore] = read_scores(conn, lane=lane) if lane else []
        lanes_read = sorted({s.lane for s in rows})
        input_ok = declared == [PRODUCT_LANE_SCORES_ASSET] and lanes_read == [GATE_LANE]
        input_check = dg.AssetCheckResult(
            check_name=GATE_READS_PRODUCT_LANE,
            passed=input_ok,
            severity=dg.AssetCheckSeverity.ERROR,
            metadata={
                "declared_upstream": dg.MetadataValue.json(declared),
                "configs_observed": dg.MetadataValue.json(
                    [key for key in upstream if key in CONFIG_FAMILIES]
                ),
                "lanes_in_rows_read": dg.MetadataValue.json(lanes_read),
                "rows_read": len(rows),
                "required": f"upstream [{PRODUCT_LANE_SCORES_ASSET}], rows of the "
                f"{GATE_LANE} lane only",
            },
        )
        if not input_ok:
            not_evaluated = [
                dg.AssetCheckResult(
                    check_name=rule,
                    passed=False,
                    severity=dg.AssetCheckSeverity.ERROR,
                    metadata={"not_evaluated": "the gate's input is not the product lane"},
                )
                for rule in GATE_RULES
            ]
            return dg.MaterializeResult(
                metadata=GateFigures(
                    passed=False, reason="input is not the product lane"
                ).metadata(),
                check_results=[input_check, *not_evaluated],
            )
        config = load_gate_config()
        summaries: list[LaneSummary] = summarize_scores(rows)
        candidates = gate_candidates(summaries, config)
        results = gate_all(summaries, config, {model: load_baseline(model) for model in candidates})
        for result in results:
            for notice in result.notices:
                context.log.warning(notice)
        passed = all(r.passed for r in results)
        return dg.MaterializeResult(
            metadata={
                **GateFigures(
                    passed=passed,
                    candidates=tuple(candidates),
                    candidates_from=str(paths.gate_config())
                    if config.candidates is not None
                    else "every model with product-lane scores",
                    verdicts_by_model={r.model: "PASSES" if r.passed else "FAILS" for r in results},
                    failed_rules_by_model={
                        r.model: [
                            f"{rule.rule}: {rule.detail}" for rule in r.rules if not rule.passed
                        ]
                        for r in results
                    },
                    notices=tuple(n for r in results for n in r.notices),
                ).metadata(),
                "verdicts": dg.MetadataValue.md(gate_markdown(results)),
                "reasons": dg.MetadataValue.json(
                    [
                        f"{r.model}: {rule.rule} {'passed' if rule.passed else 'FAILED'}: "
                        f"{rule.detail}"
                        for r in results
                        for rule in r.rules
                    ]
                ),
            },
            check_results=[input_check, *(_rule_check(rule, results) for rule in GATE_RULES)],
        )

    return ship_gate


ship_gate_asset = build_ship_gate()
