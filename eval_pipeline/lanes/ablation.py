"""The ablation matrix: the product lane with every guard on, then with each guard off in
turn, beside the model lane, per category.

It answers "which guard earns which part of the product lane's lead": a guard whose
removal drops a category is what the product adds there. Every cell is the mean case
score of :mod:`eval_pipeline.scoring` (the minimum of the tiers that apply: the first
action in the model lane; exact, trace checks and, where a case asks, the judge in the
product lane), so the matrix and the sweep summary read cases the same way. Cases that
never reached the model (‡, †) are counted apart and left out of both terms.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

from eval_pipeline.fixtures.case import CATEGORIES
from eval_pipeline.fixtures.frozen import FixtureSet
from eval_pipeline.journal import read_records
from eval_pipeline.lanes.guards import GUARD_NAMES, GuardSettings
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
from eval_pipeline.records import FrozenRecord
from eval_pipeline.scoring.grading import judged_replies
from eval_pipeline.scoring.judge import Judge, ask_judge, verdict_key
from eval_pipeline.scoring.score import CaseScore, score_case

MODEL_LANE = "model lane (first action)"
ALL_GUARDS = "product lane, all guards"


def configurations(base: GuardSettings) -> list[tuple[str, LaneSettings]]:
    """The model lane, the product lane with every guard, and with each guard off."""
    rows = [
        (MODEL_LANE, LaneSettings(lane="model")),
        (ALL_GUARDS, LaneSettings(lane="product", guards=base)),
    ]
    rows += [
        (f"product lane, {guard} off", LaneSettings(lane="product", guards=base.without(guard)))
        for guard in GUARD_NAMES
    ]
    return rows


class AblationCell(FrozenRecord):
    configuration: str
    category: str
    points: float
    """Sum of the case scores (each in [0, 1]) over the scored cases."""
    scored: int
    unheard: int
    guard_firings: dict[str, int]
    """How often each guard fired on this cell's cases (product lane)."""

    @property
    def rate(self) -> float | None:
        return self.points / self.scored if self.scored else None


class AblationMatrix(FrozenRecord):
    model: str
    seeds: tuple[int, ...]
    fixture_id: str
    cells: tuple[AblationCell, ...]

    def cell(self, configuration: str, category: str) -> AblationCell:
        return next(
            c for c in self.cells if c.configuration == configuration and c.category == category
        )

    def table(self) -> str:
        """The matrix as markdown: rows are configurations, columns categories (and all)."""
        configs = list(dict.fromkeys(c.configuration for c in self.cells))
        columns = [*CATEGORIES, "all"]
        lines = [
            f"Ablation of {self.model}, seeds {', '.join(map(str, self.seeds))}, fixture set "
            f"{self.fixture_id}: mean case score in points (0-100) of the cases that reached "
            "the model (n in brackets); ‡/† left out",
            "",
            "| configuration | " + " | ".join(columns) + " |",
            "|---|" + "---:|" * len(columns),
        ]
        for configuration in configs:
            cells = [self.cell(configuration, category) for category in columns]
            lines.append(
                f"| {configuration} | "
                + " | ".join(
                    "–" if c.rate is None else f"{100 * c.rate:.0f} ({c.scored})" for c in cells
                )
                + " |"
            )
        return "\n".join(lines)


def matrix_from_scores(
    model: str,
    seeds: Sequence[int],
    fixture_id: str,
    scored: dict[str, list[tuple[CaseScore, CaseRun]]],
) -> AblationMatrix:
    """Cells from the scores of every case, per configuration (key of `scored`)."""
    cells: list[AblationCell] = []
    for configuration, pairs in scored.items():
        points: dict[str, float] = defaultdict(float)
        counted: dict[str, int] = defaultdict(int)
        unheard: dict[str, int] = defaultdict(int)
        firings: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
        for score, run in pairs:
            for bucket in (score.category, "all"):
                for guard, count in run.guard_firings.items():
                    firings[bucket][guard] += count
                if score.score is None:
                    unheard[bucket] += 1
                    continue
                counted[bucket] += 1
                points[bucket] += score.score
        cells += [
            AblationCell(
                configuration=configuration,
                category=category,
                points=points[category],
                scored=counted[category],
                unheard=unheard[category],
                guard_firings=dict(firings[category]),
            )
            for category in [*CATEGORIES, "all"]
        ]
    return AblationMatrix(
        model=model, seeds=tuple(seeds), fixture_id=fixture_id, cells=tuple(cells)
    )


async def run_ablation(
    *,
    config: ModelConfig,
    seeds: Sequence[int],
    fixture_set: FixtureSet,
    agent_db: Path,
    session: CallSession,
    root: Path,
    judge: Judge,
    judge_config: ModelConfig,
    base: GuardSettings | None = None,
) -> AblationMatrix:
    """Run every configuration for every seed (each in its own records folder under `root`),
    then score every case as the sweep does, asking the judge once per distinct reply."""
    cases = {case.case_id: case for case in fixture_set.cases}
    runs: dict[str, list[tuple[CaseRun, list[TraceEvent]]]] = {}
    with LabelToolbox(agent_db) as toolbox:
        for name, settings in configurations(base or GuardSettings()):
            slug = name.replace(" ", "_").replace(",", "")
            for seed in seeds:
                folder = partition_dir(settings.lane, config.name, seed, root / slug)
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
    scored = {
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
    return matrix_from_scores(config.name, seeds, fixture_set.fixture_id, scored)


def ablation_from_warehouse(model: str, seeds: Sequence[int]) -> AblationMatrix:
    """Run the ablation over the world and fixture set the main job left in the warehouse,
    starting the simulated provider when the model or the judge is one of its profiles."""
    import asyncio

    from eval_pipeline import paths, stages
    from eval_pipeline.fixtures.frozen import load_fixtures
    from eval_pipeline.lanes.agent_db import build_agent_world_db
    from eval_pipeline.providers.config import scan_model_configs
    from eval_pipeline.providers.sessions import session_for
    from eval_pipeline.scoring.judge import load_judge
    from eval_pipeline.warehouse import connect

    judge = load_judge()
    configs = scan_model_configs().require([model, judge.model])
    warehouse = paths.warehouse_path()
    conn = connect(warehouse, read_only=True)
    try:
        fixture_set = load_fixtures(stages.recorded_fixture_path(conn))
    finally:
        conn.close()
    agent_db = build_agent_world_db(warehouse, paths.agent_world_dir())
    root = paths.var_dir() / "ablation"
    with session_for(
        configs, run_id=f"ablation-{model}", journal=root / "envelopes.jsonl"
    ) as session:

        async def go() -> AblationMatrix:
            async with session:
                return await run_ablation(
                    config=configs[model],
                    seeds=seeds,
                    fixture_set=fixture_set,
                    agent_db=agent_db,
                    session=session,
                    root=root,
                    judge=judge,
                    judge_config=configs[judge.model],
                )

        return asyncio.run(go())
