"""The ablation matrix: the product lane with every guard on, then with each guard off in
turn, beside the model lane, per category.

It answers "which guard earns which part of the product lane's lead": a guard whose
removal drops a category is what the product adds there. The product lane's cells are the
share of cases answered right (the exact tier, read by :mod:`eval_pipeline.scoring.readers`);
the model lane's cells are the share whose first action matched the expected one. Cases
that never reached the model (‡, †) are counted apart and left out of both terms.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

from eval_pipeline.fixtures.case import CATEGORIES, Case
from eval_pipeline.fixtures.frozen import FixtureSet
from eval_pipeline.lanes.guards import GUARD_NAMES, GuardSettings
from eval_pipeline.lanes.records import CaseRun
from eval_pipeline.lanes.runner import LaneSettings, latest_runs, partition_dir, run_partition
from eval_pipeline.lanes.toolbox import LabelToolbox
from eval_pipeline.providers.config import ModelConfig
from eval_pipeline.providers.harness import CallSession
from eval_pipeline.records import FrozenRecord
from eval_pipeline.scoring.readers import grade_answer

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
    right: int
    scored: int
    unheard: int

    @property
    def rate(self) -> float | None:
        return self.right / self.scored if self.scored else None


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
            f"{self.fixture_id}: % right of the cases that reached the model (n in brackets)",
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


def case_correct(case: Case, run: CaseRun) -> bool:
    """Right in its lane: the expected first action (model lane) or answer (product lane)."""
    if run.lane == "model":
        return run.first_call is not None and bool(run.first_call.matches_expected)
    return grade_answer(case, run.final_text).correct


def matrix_from_runs(
    model: str,
    seeds: Sequence[int],
    fixture_set: FixtureSet,
    runs: dict[str, list[CaseRun]],
) -> AblationMatrix:
    """Cells from the latest run of every case, per configuration (key of `runs`)."""
    cases = {case.case_id: case for case in fixture_set.cases}
    cells: list[AblationCell] = []
    for configuration, case_runs in runs.items():
        right: dict[str, int] = defaultdict(int)
        scored: dict[str, int] = defaultdict(int)
        unheard: dict[str, int] = defaultdict(int)
        for run in case_runs:
            category = cases[run.case_id].category
            for bucket in (category, "all"):
                if run.status != "completed":
                    unheard[bucket] += 1
                    continue
                scored[bucket] += 1
                right[bucket] += case_correct(cases[run.case_id], run)
        cells += [
            AblationCell(
                configuration=configuration,
                category=category,
                right=right[category],
                scored=scored[category],
                unheard=unheard[category],
            )
            for category in [*CATEGORIES, "all"]
        ]
    return AblationMatrix(
        model=model, seeds=tuple(seeds), fixture_id=fixture_set.fixture_id, cells=tuple(cells)
    )


async def run_ablation(
    *,
    config: ModelConfig,
    seeds: Sequence[int],
    fixture_set: FixtureSet,
    agent_db: Path,
    session: CallSession,
    root: Path,
    base: GuardSettings | None = None,
) -> AblationMatrix:
    """Run every configuration for every seed (each in its own records folder under `root`)."""
    runs: dict[str, list[CaseRun]] = {}
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
                runs.setdefault(name, []).extend(latest_runs(folder, identity).values())
    return matrix_from_runs(config.name, seeds, fixture_set, runs)


SIM_KEY = "simulated-provider-accepts-any-key"


def ablation_from_warehouse(model: str, seeds: Sequence[int]) -> AblationMatrix:
    """Run the ablation over the world and fixture set the main job left in the warehouse,
    starting the simulated provider when the model is one of its profiles."""
    import asyncio
    from contextlib import nullcontext

    from eval_pipeline import paths, stages
    from eval_pipeline.fixtures.frozen import load_fixtures
    from eval_pipeline.lanes.agent_db import build_agent_world_db
    from eval_pipeline.providers.config import scan_model_configs
    from eval_pipeline.sim.process import running_sim
    from eval_pipeline.warehouse import connect

    config = scan_model_configs().require([model])[model]
    warehouse = paths.warehouse_path()
    conn = connect(warehouse, read_only=True)
    try:
        fixture_set = load_fixtures(stages.recorded_fixture_path(conn))
    finally:
        conn.close()
    agent_db = build_agent_world_db(warehouse, paths.agent_world_dir())
    simulated = config.provider == "simulated"
    root = paths.var_dir() / "ablation"
    with running_sim() if simulated else nullcontext() as sim:
        base_urls = {}
        if sim is not None:
            wire = (
                sim.anthropic_base_url
                if config.api == "anthropic_messages"
                else sim.openai_base_url
            )
            base_urls = {config.name: wire}

        async def go() -> AblationMatrix:
            async with CallSession(
                run_id=f"ablation-{model}",
                journal_path=root / "envelopes.jsonl",
                base_urls=base_urls,
                api_keys={config.name: SIM_KEY} if simulated else {},
            ) as session:
                return await run_ablation(
                    config=config,
                    seeds=seeds,
                    fixture_set=fixture_set,
                    agent_db=agent_db,
                    session=session,
                    root=root,
                )

        return asyncio.run(go())
