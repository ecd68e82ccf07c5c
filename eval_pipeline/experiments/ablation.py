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

from eval_pipeline.cases.frozen import FixtureSet
from eval_pipeline.experiments.isolated import run_and_score
from eval_pipeline.lane_records import CaseRun
from eval_pipeline.lanes.guards import GUARD_NAMES, GuardSettings
from eval_pipeline.lanes.partition_runs import LaneSettings
from eval_pipeline.providers.config import ModelConfig
from eval_pipeline.providers.harness import CallSession
from eval_pipeline.records import FrozenRecord
from eval_pipeline.scoring.judge import Judge
from eval_pipeline.scoring.score import CaseScore
from eval_pipeline.world import ordered_categories

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
        columns = list(dict.fromkeys(c.category for c in self.cells))
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
    categories = ordered_categories(
        score.category for pairs in scored.values() for score, _ in pairs
    )
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
            for category in [*categories, "all"]
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
    scored = await run_and_score(
        [(name, config, settings) for name, settings in configurations(base or GuardSettings())],
        seeds=seeds,
        fixture_set=fixture_set,
        agent_db=agent_db,
        session=session,
        root=root,
        judge=judge,
        judge_config=judge_config,
    )
    return matrix_from_scores(config.name, seeds, fixture_set.fixture_id, scored)


def ablation_from_warehouse(model: str, seeds: Sequence[int]) -> AblationMatrix:
    """Run the ablation over the world and fixture set the main job left in the warehouse,
    starting the simulated provider when the model or the judge is one of its profiles."""
    import asyncio

    from eval_pipeline import paths, world_stages
    from eval_pipeline.lanes.agent_db import build_agent_world_db
    from eval_pipeline.project_configs import scan_model_configs
    from eval_pipeline.providers.call_slots import RunSlots
    from eval_pipeline.scoring.judge import load_judge
    from eval_pipeline.sim.sessions import session_for

    judge = load_judge()
    configs = scan_model_configs().require([model, judge.model])
    warehouse = paths.warehouse_path()
    fixture_set = world_stages.current_fixture_set(warehouse)
    agent_db = build_agent_world_db(warehouse, paths.agent_world_dir())
    root = paths.var_dir() / "ablation"
    with (
        RunSlots(machine=paths.call_slots_dir()) as slots,  # beside this machine's lane runs
        session_for(
            configs, run_id=f"ablation-{model}", journal=root / "envelopes.jsonl", slots=slots
        ) as session,
    ):

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
