"""`evalp regrade` as a client of Dagster: every stored lane partition's scores materialized
again by the regrade job (the score assets alone), through the run queue like any lane run.

Its writes are Dagster materializations under the scorers' current code version, so the UI
shows them, the results that read them become stale, and the next `evalp demo` re-runs the
results instead of printing the scores from before. What changed is the warehouse's scores
before against after, explained case by case (`scoring.grading.score_changes`).
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass

import dagster as dg

from eval_pipeline import paths
from eval_pipeline.dagster_client.launch import (
    DEMO_TAG,
    JobOutcome,
    MissionProgress,
    NoProgress,
    launched_outcome,
)
from eval_pipeline.defs.keys import MODELS_PARTITIONS, REGRADE_JOB
from eval_pipeline.defs.score_assets import SCORES_LANE, PartitionScoresFigures
from eval_pipeline.scoring.grading import ScoreChange


@dataclass(frozen=True)
class RegradeOutcome:
    """The regrade job's runs (one per model × seed), and what they changed."""

    runs: tuple[JobOutcome, ...]
    changes: tuple[ScoreChange, ...]
    dropped: tuple[str, ...]
    not_partitions: tuple[str, ...] = ()
    """Stored partitions that are no partition of the lanes now (a seed the sweep config
    no longer lists): not re-scored; their scores stay as they were."""

    @property
    def success(self) -> bool:
        return all(run.success for run in self.runs)

    @functools.cached_property
    def _scores(self) -> list[PartitionScoresFigures]:
        """The figures of every scores asset the regrade runs materialized (read once)."""
        found = (
            PartitionScoresFigures.read(run.materializations, asset)
            for run in self.runs
            for asset in SCORES_LANE
        )
        return [figures for figures in found if figures is not None]

    @property
    def scored(self) -> int:
        return sum(figures.cases for figures in self._scores)

    @property
    def judge_asked(self) -> int:
        return sum(figures.judge_asked for figures in self._scores)

    @property
    def judge_reused(self) -> int:
        return sum(figures.judge_reused for figures in self._scores)


def regrade_through_dagster(progress: MissionProgress | None = None) -> RegradeOutcome:
    """Re-score every stored partition by running the regrade job for it (the daemon starts
    the runs within the queue's limits; the judge's provider tags them). Call while holding
    the project lock; no warehouse connection is held while the runs write."""
    from eval_pipeline.dagster_client.queue import running_daemon, submit_partitions, wait_for
    from eval_pipeline.defs.lane_assets import lane_partitions
    from eval_pipeline.project_configs import scan_model_configs
    from eval_pipeline.scoring.grading import (
        cases_under,
        previous_scores,
        score_changes,
        stored_partitions,
    )
    from eval_pipeline.scoring.judge import load_judge
    from eval_pipeline.scoring.score_tables import read_scores
    from eval_pipeline.warehouse import connect

    shown = progress or NoProgress()
    os.environ["DAGSTER_HOME"] = str(paths.prepared_dagster_home())
    judge = load_judge()
    provider = scan_model_configs().require([judge.model])[judge.model].provider
    con = connect(paths.warehouse_path(), read_only=True)
    try:
        stored = stored_partitions(con)
        before = previous_scores(con)
    finally:
        con.close()
    seeds = set(lane_partitions.get_partitions_def_for_dimension("seed").get_partition_keys())
    keys = sorted({f"{p.model}|{p.seed}" for p in stored})
    with dg.DagsterInstance.get() as instance:
        known = set(instance.get_dynamic_partitions(MODELS_PARTITIONS))
        runnable = [k for k in keys if k.split("|")[0] in known and k.split("|")[1] in seeds]
        outcomes: list[JobOutcome] = []
        if runnable:
            shown.begin(len(runnable))

            def finished(record: dg.RunRecord) -> None:
                outcome = launched_outcome(instance, record)
                outcomes.append(outcome)
                state = "re-scored" if outcome.success else "FAILED"
                shown.ended(f"scores {outcome.partition}: {state}")

            with running_daemon() as daemon:
                submitted = submit_partitions(
                    REGRADE_JOB, {provider: runnable}, {DEMO_TAG: "evalp regrade"}
                )
                wait_for(instance, submitted, finished, daemon, shown.status, what="re-scores")
    succeeded = {run.partition for run in outcomes if run.success}
    rescored = {(p.lane, p.model, p.seed) for p in stored if f"{p.model}|{p.seed}" in succeeded}
    con = connect(paths.warehouse_path(), read_only=True)
    try:
        after = [s for s in read_scores(con) if (s.lane, s.model, s.seed) in rescored]
    finally:
        con.close()
    changes, dropped = score_changes(before, after, cases_under(paths.fixtures_root()), rescored)
    return RegradeOutcome(
        runs=tuple(sorted(outcomes, key=lambda run: str(run.partition))),
        changes=tuple(changes),
        dropped=tuple(dropped),
        not_partitions=tuple(k for k in keys if k not in runnable),
    )
