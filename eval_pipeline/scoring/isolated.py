"""Configurations run in records folders of their own, outside the sweep's partitions, and
scored in memory as the sweep scores them: the ablation's cells and an experiment's arms.

Each configuration × seed is a partition folder under `root/<configuration>/`; running
again reuses what completed under the same identity and heals ‡ (as the lanes do). The
judge is asked once per distinct reply over every configuration.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

from eval_pipeline.fixtures.frozen import FixtureSet
from eval_pipeline.journal import read_records
from eval_pipeline.lanes.records import CaseRun, TraceEvent
from eval_pipeline.lanes.runner import (
    TRACES_JOURNAL,
    LaneSettings,
    latest_runs,
    partition_dir,
    run_partition,
)
from eval_pipeline.lanes.toolbox import LabelToolbox
from eval_pipeline.providers.config import ModelConfig
from eval_pipeline.providers.harness import CallSession
from eval_pipeline.scoring.grading import judged_replies
from eval_pipeline.scoring.judge import Judge, ask_judge, verdict_key
from eval_pipeline.scoring.score import CaseScore, score_case

Configuration = tuple[str, ModelConfig, LaneSettings]
"""A name (its folder), the model config and the lane settings it runs with."""


def folder_name(name: str) -> str:
    return name.replace(" ", "_").replace(",", "")


async def run_and_score(
    configurations: Sequence[Configuration],
    *,
    seeds: Sequence[int],
    fixture_set: FixtureSet,
    agent_db: Path,
    session: CallSession,
    root: Path,
    judge: Judge,
    judge_config: ModelConfig,
) -> dict[str, list[tuple[CaseScore, CaseRun]]]:
    """Every configuration for every seed, then every case scored; by configuration name."""
    cases = {case.case_id: case for case in fixture_set.cases}
    runs: dict[str, list[tuple[CaseRun, list[TraceEvent]]]] = {}
    with LabelToolbox(agent_db) as toolbox:
        for name, config, settings in configurations:
            for seed in seeds:
                folder = partition_dir(settings.lane, config.name, seed, root / folder_name(name))
                await run_partition(
                    lane=settings.lane,
                    config=config,
                    seed=seed,
                    fixture_set=fixture_set,
                    session=session,
                    settings=settings,
                    toolbox=toolbox if settings.lane == "product" else None,
                    folder=folder,
                )
                identity = settings.identity(config, fixture_set.fixture_id)
                latest = latest_runs(folder, identity)
                events: dict[tuple[str, int], list[TraceEvent]] = defaultdict(list)
                for event in read_records(folder / TRACES_JOURNAL, TraceEvent):
                    events[(event.case_id, event.attempt)].append(event)
                runs.setdefault(name, []).extend(
                    (run, events.get((run.case_id, run.attempt), [])) for run in latest.values()
                )
    every_run = [run for pairs in runs.values() for run, _ in pairs]
    verdicts = await ask_judge(
        session, judge_config, judge, judged_replies(judge, cases, every_run)
    )
    return {
        name: [
            (
                score_case(
                    cases[run.case_id],
                    run,
                    events,
                    verdicts.get(verdict_key(judge, cases[run.case_id], run.final_text)),
                ),
                run,
            )
            for run, events in pairs
        ]
        for name, pairs in runs.items()
    }
