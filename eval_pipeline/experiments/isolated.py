"""Configurations run in records folders of their own, outside the sweep's partitions, and
scored in memory as the sweep scores them: the ablation's cells and an experiment's arms.

Each configuration × seed is a partition folder under `root/<configuration>/`; running
again reuses what completed under the same identity and heals ‡ (as the lanes do). The
judge is asked once per distinct reply over every configuration.
"""

from __future__ import annotations

import json
import os
from collections import defaultdict
from collections.abc import Mapping, Sequence
from contextlib import ExitStack
from pathlib import Path

from eval_pipeline.cases.case import Case
from eval_pipeline.cases.frozen import FixtureSet
from eval_pipeline.journal import read_records
from eval_pipeline.lane_records import CaseRun, TraceEvent
from eval_pipeline.lanes.partition_runs import (
    TRACES_JOURNAL,
    LaneSettings,
    latest_runs,
    open_product_tools,
    partition_dir,
    run_partition,
)
from eval_pipeline.products import ProductTools
from eval_pipeline.providers.call_slots import RunSlots
from eval_pipeline.providers.config import ModelConfig
from eval_pipeline.providers.harness import CallSession
from eval_pipeline.scoring.grading import judged_replies
from eval_pipeline.scoring.judge import Judge, ask_judge, verdict_key
from eval_pipeline.scoring.score import CaseScore, JudgeVerdict, score_case

Configuration = tuple[str, ModelConfig, LaneSettings]
"""A name (its folder), the model config and the lane settings it runs with."""


def folder_name(name: str) -> str:
    return name.replace(" ", "_").replace(",", "")


VERDICTS_FILE = "judge_verdicts.json"
"""The judge's verdicts on a root's replies, kept so that a re-score asks no one."""


def _stored_runs(
    root: Path, name: str, config: ModelConfig, settings: LaneSettings, seed: int, fixture_id: str
) -> list[tuple[CaseRun, list[TraceEvent]]]:
    """The latest run of each case in one configuration's partition, with its trace."""
    folder = partition_dir(settings.lane, config.name, seed, root / folder_name(name))
    latest = latest_runs(folder, settings.identity(config, fixture_id))
    events: dict[tuple[str, int], list[TraceEvent]] = defaultdict(list)
    for event in read_records(folder / TRACES_JOURNAL, TraceEvent):
        events[(event.case_id, event.attempt)].append(event)
    return [(run, events.get((run.case_id, run.attempt), [])) for run in latest.values()]


def read_verdicts(root: Path) -> dict[str, JudgeVerdict]:
    path = root / VERDICTS_FILE
    if not path.exists():
        return {}
    raw = json.loads(path.read_text(encoding="utf-8"))
    return {key: JudgeVerdict.model_validate(value) for key, value in raw.items()}


def _write_verdicts(root: Path, verdicts: Mapping[str, JudgeVerdict]) -> None:
    merged = {**read_verdicts(root), **verdicts}
    root.mkdir(parents=True, exist_ok=True)
    staged = root / (VERDICTS_FILE + ".partial")
    staged.write_text(
        json.dumps({k: v.model_dump(mode="json") for k, v in sorted(merged.items())}),
        encoding="utf-8",
    )
    os.replace(staged, root / VERDICTS_FILE)


def _scored(
    pairs: Sequence[tuple[CaseRun, list[TraceEvent]]],
    cases: Mapping[str, Case],
    judge: Judge,
    verdicts: Mapping[str, JudgeVerdict],
) -> list[tuple[CaseScore, CaseRun]]:
    return [
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
    only: Sequence[Case] | None = None,
) -> dict[str, list[tuple[CaseScore, CaseRun]]]:
    """Every configuration for every seed, then every case scored (or only the cases of
    `only`, a subset of the fixture set's); by configuration name. The judge's verdicts are
    kept under `root` (`rescore_stored_configuration` reads them)."""
    cases = {case.case_id: case for case in (fixture_set.cases if only is None else only)}
    runs: dict[str, list[tuple[CaseRun, list[TraceEvent]]]] = {}
    with ExitStack() as stack:
        opened: dict[str, ProductTools] = {}  # one set of tools a product, for every arm

        def tools_for(settings: LaneSettings) -> ProductTools | None:
            if settings.lane != "product":
                return None
            key = settings.product.model_dump_json()
            if key not in opened:
                opened[key] = stack.enter_context(
                    open_product_tools(settings, fixture_set, agent_db)
                )
            return opened[key]

        for name, config, settings in configurations:
            product_tools = tools_for(settings)
            for seed in seeds:
                folder = partition_dir(settings.lane, config.name, seed, root / folder_name(name))
                await run_partition(
                    lane=settings.lane,
                    config=config,
                    seed=seed,
                    fixture_set=fixture_set,
                    session=session,
                    settings=settings,
                    product_tools=product_tools,
                    folder=folder,
                    cases=list(cases.values()),
                )
                runs.setdefault(name, []).extend(
                    (run, events)
                    for run, events in _stored_runs(
                        root, name, config, settings, seed, fixture_set.fixture_id
                    )
                    if run.case_id in cases
                )
    every_run = [run for pairs in runs.values() for run, _ in pairs]
    verdicts = await ask_judge(
        session, judge_config, judge, judged_replies(judge, cases, every_run)
    )
    _write_verdicts(root, verdicts)
    return {name: _scored(pairs, cases, judge, verdicts) for name, pairs in runs.items()}


def run_and_score_in_session(
    configurations: Sequence[Configuration],
    *,
    seeds: Sequence[int],
    fixture_set: FixtureSet,
    agent_db: Path,
    root: Path,
    judge: Judge,
    judge_config: ModelConfig,
    run_id: str,
    journal: Path,
    only: Sequence[Case] | None = None,
    slots: RunSlots | None = None,
) -> dict[str, list[tuple[CaseScore, CaseRun]]]:
    """`run_and_score` in a call session of its own (its calls in flight among the run's
    `slots` when given, as in a Dagster run beside others), journaled to `journal` (simulated
    configs answered by a simulated provider started for it), for callers outside an event
    loop. A session holds one config per model name: two configurations of one model at
    different addresses (a deployed system) run in sessions of their own."""
    import asyncio

    from eval_pipeline.errors import ConfigError
    from eval_pipeline.sim.sessions import session_for

    needed: dict[str, ModelConfig] = {}
    for _, config, _ in [*configurations, ("judge", judge_config, None)]:
        if needed.setdefault(config.name, config) != config:
            raise ConfigError(
                f"model {config.name} is configured two ways in one session: run each in its own"
            )
    with session_for(needed, run_id=run_id, journal=journal, slots=slots) as session:

        async def go() -> dict[str, list[tuple[CaseScore, CaseRun]]]:
            async with session:
                return await run_and_score(
                    configurations,
                    seeds=seeds,
                    fixture_set=fixture_set,
                    agent_db=agent_db,
                    session=session,
                    root=root,
                    judge=judge,
                    judge_config=judge_config,
                    only=only,
                )

        return asyncio.run(go())


def rescore_stored_configuration(
    configuration: Configuration,
    *,
    seeds: Sequence[int],
    fixture_set: FixtureSet,
    root: Path,
    judge: Judge,
) -> list[tuple[CaseScore, CaseRun]]:
    """One configuration re-scored from its stored runs, traces and verdicts, calling no
    one (the audit's path): a reply without a stored verdict is a judge error (‡)."""
    name, config, settings = configuration
    cases = {case.case_id: case for case in fixture_set.cases}
    pairs = [
        pair
        for seed in seeds
        for pair in _stored_runs(root, name, config, settings, seed, fixture_set.fixture_id)
    ]
    verdicts = read_verdicts(root)
    wanted = judged_replies(judge, cases, [run for run, _ in pairs])
    missing = {
        key: JudgeVerdict(passed=None, reason="no stored verdict for this reply", failed=True)
        for key in wanted
        if key not in verdicts
    }
    return _scored(pairs, cases, judge, {**verdicts, **missing})
