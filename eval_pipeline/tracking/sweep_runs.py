"""A sweep in MLflow: one experiment per fixture set, a parent run per sweep, a nested run
per lane × model × seed.

Each nested run carries the params that made its numbers (model config, guards and caps,
fixture id, world seed, code version, key package versions), its metrics (per category,
overall, yield, accuracy on yield, ‡ and † counts, cost in micro-dollars, tokens) and every
case's score as a table (`case_scores.json`); the parent carries a few headline metrics per
lane and model and each pair's gap (the runs table's columns), the whole summary and the
comparisons as tables, and the summary markdown; the experiment keeps a saved runs-table
view of the score columns (`HEADLINE_VIEW`), which the printed link opens in the runs view,
not its GenAI traces view. Nothing here reads a key: configs name the variables keys live in.
"""

from __future__ import annotations

import json
import warnings
from collections import defaultdict
from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import TYPE_CHECKING

from eval_pipeline.cases.frozen import WorldProvenance
from eval_pipeline.lane_records import LaneIdentity
from eval_pipeline.records import FrozenRecord
from eval_pipeline.scoring.aggregate import LaneSummary, summarize_lane, summary_markdown
from eval_pipeline.scoring.compare import (
    ModelComparison,
    comparisons_markdown,
    lane_comparisons,
    leaders,
)
from eval_pipeline.scoring.score import CaseScore
from eval_pipeline.tracking.mlflow_store import (
    TrackingError,
    TrackingStore,
    experiment_id,
    runs_page,
    save_runs_view,
)
from eval_pipeline.tracking.provenance import CodeVersion
from eval_pipeline.tracking.runs import (
    code_params,
    finish,
    flatten,
    log_texts,
    log_values,
    micro_usd,
    start_run,
)

if TYPE_CHECKING:
    from mlflow import MlflowClient

KIND_TAG = "evalp.kind"
FIXTURE_TAG = "evalp.fixture_id"
HEADLINE_VIEW = "evalp-headline"
"""The saved runs-table view each sweep leaves on its experiment: its score columns."""
MAX_VIEW_COLUMNS = 60
"""Beyond this many columns a view is no easier to read than the table's column picker."""


def sweep_experiment_name(fixture_id: str) -> str:
    return f"evalp/sweeps/{fixture_id}"


class TrackedRun(FrozenRecord):
    run_id: str
    name: str
    lane: str
    model: str
    seed: int
    metrics: int


class SweepTracking(FrozenRecord):
    """Where a sweep was logged."""

    experiment_id: str
    experiment_name: str
    parent_run_id: str
    nested: tuple[TrackedRun, ...]
    metrics: int
    runs_page: str
    """The UI path of the experiment's runs table with the sweep's score columns."""


def summary_metrics(summary: LaneSummary, prefix: str = "") -> dict[str, float]:
    """The numbers of one lane summary as metrics: scores in points, rates as fractions,
    counts, cost in integer micro-dollars. A score with no value (nothing scored) is left
    out rather than logged as a stand-in."""
    metrics: dict[str, float] = {}
    for row in summary.rows:
        if row.mean is not None:
            metrics[f"{prefix}score.{row.category}"] = row.mean
        if row.low is not None and row.high is not None:
            metrics[f"{prefix}score_low.{row.category}"] = row.low
            metrics[f"{prefix}score_high.{row.category}"] = row.high
        metrics[f"{prefix}n.{row.category}"] = row.scored
    if summary.yield_rate is not None:
        metrics[f"{prefix}yield"] = summary.yield_rate
    if summary.accuracy_on_yield is not None:
        metrics[f"{prefix}accuracy_on_yield"] = summary.accuracy_on_yield
    everything = summary.row("all")
    metrics[f"{prefix}infra_errors"] = everything.infra_errors
    metrics[f"{prefix}budget_stopped"] = everything.budget_stopped
    metrics[f"{prefix}security_violations"] = summary.security_violations
    metrics[f"{prefix}core_passed"] = summary.core_passed
    metrics[f"{prefix}cost_micro_usd"] = micro_usd(summary.cost_usd)
    metrics[f"{prefix}tokens"] = summary.tokens
    return metrics


HEADLINE_METRICS = (
    "score.all",
    "score_low.all",
    "score_high.all",
    "yield",
    "security_violations",
    "cost_micro_usd",
)
"""What the sweep's parent run keeps as metrics per lane and model (the runs table's columns
and a chart each); the whole summary is its `summary_table.json`."""


def headline_metrics(summary: LaneSummary, prefix: str = "") -> dict[str, float]:
    """The few numbers of a lane summary a reader compares across sweeps."""
    every = summary_metrics(summary, prefix)
    return {prefix + key: every[prefix + key] for key in HEADLINE_METRICS if prefix + key in every}


COMPARISON_METRICS = ("difference", "low", "high", "noise_floor")
"""What each pair logs as metrics (named `compare.<lane>.<candidate>_vs_<reference>.<what>`):
the gap, its interval and the noise floor; McNemar and the case counts are in
`comparisons.json`."""


def comparison_metrics(comparisons: Sequence[ModelComparison]) -> dict[str, float]:
    """Each comparison's gap, interval and noise floor as metrics named by lane and pair; a
    value that does not exist (one seed: no noise floor) is left out, never a stand-in."""
    metrics: dict[str, float] = {}
    for c in comparisons:
        values = {
            "difference": c.paired.difference,
            "low": c.paired.low,
            "high": c.paired.high,
            "noise_floor": c.noise_floor,
        }
        for what in COMPARISON_METRICS:
            value = values[what]
            if value is not None:
                metrics[f"compare.{c.lane}.{c.candidate}_vs_{c.reference}.{what}"] = value
    return metrics


def summary_table(summaries: Sequence[LaneSummary]) -> dict[str, list[object]]:
    """The summary as columns (a row per lane, model and category), for MLflow's table
    view."""
    rows = [(s, row) for s in summaries for row in s.rows]
    return {
        "lane": [s.lane for s, _ in rows],
        "model": [s.model for s, _ in rows],
        "category": [row.category for _, row in rows],
        "score": [row.mean for _, row in rows],
        "low": [row.low for _, row in rows],
        "high": [row.high for _, row in rows],
        "spread": [row.spread for _, row in rows],
        "pass_k": [row.pass_k for _, row in rows],
        "n": [row.scored for _, row in rows],
        "never_heard": [row.infra_errors for _, row in rows],
        "budget_stopped": [row.budget_stopped for _, row in rows],
    }


def case_table(rows: Sequence[CaseScore]) -> dict[str, list[object]]:
    """One run's case scores as columns, for MLflow's table view."""
    ordered = sorted(rows, key=lambda s: s.case_id)
    return {
        "case_id": [s.case_id for s in ordered],
        "category": [s.category for s in ordered],
        "score": [s.score for s in ordered],
        "status": [s.status for s in ordered],
        "label": [s.label for s in ordered],
        "exact": [s.exact for s in ordered],
        "trace": [s.trace for s in ordered],
        "judged": [s.judged for s in ordered],
        "failed_checks": [",".join(s.failed_checks) for s in ordered],
        "answer": [s.answer for s in ordered],
    }


def log_tables(
    client: MlflowClient, run_id: str, tables: Mapping[str, Mapping[str, list[object]]]
) -> None:
    """Tables as MLflow table artifacts (the run page shows them as tables)."""
    with warnings.catch_warnings():
        # MLflow's table logger calls a pandas API pandas 3 deprecates (MLflow 3.17): its
        # warning, not ours, would otherwise land on the user's terminal.
        warnings.filterwarnings("ignore", message="For backward compatibility, 'str' dtypes")
        for name, table in tables.items():
            client.log_table(run_id, dict(table), name)


def comparison_table(comparisons: Sequence[ModelComparison]) -> dict[str, list[object]]:
    """The comparisons as columns, for MLflow's table view."""
    return {
        "lane": [c.lane for c in comparisons],
        "candidate": [c.candidate for c in comparisons],
        "reference": [c.reference for c in comparisons],
        "reading": [c.reading for c in comparisons],
        "difference": [c.paired.difference for c in comparisons],
        "low": [c.paired.low for c in comparisons],
        "high": [c.paired.high for c in comparisons],
        "shared_cases": [c.paired.shared_cases for c in comparisons],
        "noise_floor": [c.noise_floor for c in comparisons],
        "mcnemar_p": [c.paired.mcnemar_p for c in comparisons],
    }


def _identity_params(identity: LaneIdentity | None) -> dict[str, str]:
    if identity is None:
        return {}
    settings = dict(identity.settings)
    if identity.lane != "product":
        settings.pop("guards", None)
    return {**flatten("lane_settings", settings), **flatten("model_config", identity.config)}


def log_sweep(
    client: MlflowClient,
    store: TrackingStore,
    scores: Sequence[CaseScore],
    identities: Mapping[str, LaneIdentity],
    *,
    world: WorldProvenance,
    code: CodeVersion,
    name: str,
    tags: Mapping[str, str],
    artifacts: Mapping[str, str] | None = None,
    compare_against: str | None = None,
) -> SweepTracking:
    """Log one sweep's stored scores: the parent run (with the models compared pairwise,
    or each against `compare_against`), then one nested run per lane × model × seed. A
    failure part-way marks the runs it opened FAILED, never FINISHED."""
    fixture_id = _one_fixture_set(scores, identities)
    experiment_name = sweep_experiment_name(fixture_id)
    experiment = experiment_id(client, experiment_name, store)
    base_params = {
        "fixture_id": fixture_id,
        "world.plugin": world.plugin,
        "world.seed": str(world.seed),
        "world.scale": str(world.scale),
        "world.fingerprint": world.fingerprint,
        **code_params(code),
    }
    groups: dict[tuple[str, str, int], list[CaseScore]] = defaultdict(list)
    for score in scores:
        groups[(score.lane, score.model, score.seed)].append(score)
    run_tags = {KIND_TAG: "sweep", FIXTURE_TAG: fixture_id, **tags}
    comparisons = lane_comparisons(scores, compare_against)
    parent = start_run(client, experiment, name, tags=run_tags)
    opened = [parent]
    nested: list[TrackedRun] = []
    try:
        parent_metrics = _log_parent(
            client,
            parent,
            scores,
            base_params,
            code,
            artifacts or {},
            seeds=sorted({seed for _, _, seed in groups}),
            comparisons=comparisons,
        )
        for (lane, model, seed), rows in sorted(groups.items()):
            run_name = f"{model} · {lane} · seed {seed}"
            run_id = start_run(
                client,
                experiment,
                run_name,
                tags={
                    **run_tags,
                    "evalp.lane": lane,
                    "evalp.model": model,
                    "evalp.seed": str(seed),
                    "dagster.partition_key": f"{model}|{seed}",
                },
                parent_run_id=parent,
            )
            opened.append(run_id)
            count = _log_seed_run(client, run_id, rows, base_params, identities)
            finish(client, run_id)
            nested.append(
                TrackedRun(
                    run_id=run_id, name=run_name, lane=lane, model=model, seed=seed, metrics=count
                )
            )
        finish(client, parent)
        columns = headline_columns(scores, comparisons)
        save_runs_view(client, experiment, HEADLINE_VIEW, "Headline scores", columns)
    except BaseException:
        for run_id in opened:
            if run_id not in {n.run_id for n in nested}:
                finish(client, run_id, "FAILED")
        raise
    return SweepTracking(
        experiment_id=experiment,
        experiment_name=experiment_name,
        parent_run_id=parent,
        nested=tuple(nested),
        metrics=parent_metrics + sum(n.metrics for n in nested),
        runs_page=runs_page(experiment, HEADLINE_VIEW),
    )


def headline_columns(
    scores: Sequence[CaseScore], comparisons: Sequence[ModelComparison]
) -> list[str]:
    """The parent-run metrics a reader looks at first, product lane first: every model's
    overall score, then each pair's gap with its interval and noise floor; capped at
    `MAX_VIEW_COLUMNS`."""
    lanes = sorted({s.lane for s in scores}, key=lambda lane: (lane != "product", lane))
    present = {(s.lane, s.model) for s in scores}
    columns = [
        f"{lane}.{model}.score.all"
        for lane in lanes
        for model in sorted({s.model for s in scores})
        if (lane, model) in present
    ]
    gaps = comparison_metrics(comparisons)  # the product lane's pairs first, each pair whole
    order = {what: index for index, what in enumerate(COMPARISON_METRICS)}
    columns += sorted(
        gaps,
        key=lambda name: (
            not name.startswith("compare.product."),
            name.rsplit(".", 1)[0],
            order[name.rsplit(".", 1)[1]],
        ),
    )
    return columns[:MAX_VIEW_COLUMNS]


def _one_fixture_set(scores: Sequence[CaseScore], identities: Mapping[str, LaneIdentity]) -> str:
    """The one fixture set the scores are of; refuses several, or a settings hash with no
    lane identity to log as the run's params."""
    fixture_ids = sorted({s.fixture_id for s in scores})
    if len(fixture_ids) != 1:
        raise TrackingError(
            f"a sweep is logged per fixture set; these scores span {fixture_ids or 'none'}"
        )
    missing = sorted({s.settings_hash for s in scores} - set(identities))
    if missing:
        raise TrackingError(
            f"no lane identity recorded for settings hash(es) {', '.join(missing)}: "
            "re-materialize the lanes' records assets so runs.lane_identities is loaded"
        )
    return fixture_ids[0]


def _log_parent(
    client: MlflowClient,
    parent: str,
    scores: Sequence[CaseScore],
    base_params: Mapping[str, str],
    code: CodeVersion,
    artifacts: Mapping[str, str],
    *,
    seeds: Sequence[int],
    comparisons: Sequence[ModelComparison],
) -> int:
    """The sweep's own run: each lane and model's summary over its seeds, and who leads
    each lane by how much; returns how many metrics it logged."""
    by_lane_model: dict[tuple[str, str], list[CaseScore]] = defaultdict(list)
    for score in scores:
        by_lane_model[(score.lane, score.model)].append(score)
    summaries = [summarize_lane(lane, model, rows) for (lane, model), rows in by_lane_model.items()]
    metrics: dict[str, float] = {}
    for summary in summaries:
        metrics.update(headline_metrics(summary, f"{summary.lane}.{summary.model}."))
    metrics.update(comparison_metrics(comparisons))
    log_values(
        client,
        parent,
        params={
            **base_params,
            "lanes": json.dumps(sorted({lane for lane, _ in by_lane_model})),
            "models": json.dumps(sorted({model for _, model in by_lane_model})),
            "seeds": json.dumps(list(seeds)),
        },
        metrics=metrics,
        tags={
            f"evalp.leader.{lane}": leader or "no clear leader"
            for lane, leader in leaders(comparisons).items()
        },
    )
    log_tables(client, parent, {"summary_table.json": summary_table(summaries)})
    if comparisons:
        log_tables(client, parent, {"comparisons.json": comparison_table(comparisons)})
    log_texts(
        client,
        parent,
        {
            "sweep_summary.md": summary_markdown(summaries) + "\n",
            "comparisons.md": comparisons_markdown(comparisons) + "\n",
            "lane_summaries.json": json.dumps(
                [json.loads(s.model_dump_json()) for s in summaries], indent=1
            ),
            "packages.txt": "".join(f"{n}=={v}\n" for n, v in code.packages.items()),
            **artifacts,
        },
    )
    return len(metrics)


def _log_seed_run(
    client: MlflowClient,
    run_id: str,
    rows: Sequence[CaseScore],
    base_params: Mapping[str, str],
    identities: Mapping[str, LaneIdentity],
) -> int:
    """One lane × model × seed: its settings, summary metrics and its case scores as a
    table; returns how many metrics it logged."""
    first = rows[0]
    hashes = sorted({s.settings_hash for s in rows})
    params = {
        **base_params,
        "lane": first.lane,
        "model": first.model,
        "seed": str(first.seed),
        "settings_hash": ",".join(hashes),
        **_identity_params(identities[hashes[0]] if len(hashes) == 1 else None),
    }
    # one seed: no interval over cases is logged per run (the parent has them)
    metrics = summary_metrics(summarize_lane(first.lane, first.model, rows, intervals=False))
    cost = sum((s.cost_usd for s in rows), Decimal(0))
    logged = log_values(
        client, run_id, params=params, metrics=metrics, tags={"evalp.cost_usd": str(cost)}
    )
    # every case's score as a table, not a metric each (hundreds of metric keys hide the
    # runs table's columns and draw a chart each)
    log_tables(client, run_id, {"case_scores.json": case_table(rows)})
    return logged
