"""The ablation matrix over the simulated agents: each guard earns the categories where
the agent's fault shows (sim-small), and changes little for an agent without faults
(sim-strong). Real pieces: the simulated provider, the SDKs over HTTP, the product's tools
on a world-only DuckDB file, the scoring stage and its judge."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from eval_pipeline.cases.frozen import FixtureSet
from eval_pipeline.experiments.ablation import ALL_GUARDS, MODEL_LANE, AblationMatrix, run_ablation
from eval_pipeline.project_configs import scan_model_configs
from eval_pipeline.scoring.judge import load_judge
from eval_pipeline.sim.sessions import session_for


def ablate(model: str, fixture_set: FixtureSet, agent_db: Path, root: Path) -> AblationMatrix:
    judge = load_judge()
    configs = scan_model_configs().require([model, judge.model])
    with session_for(configs, run_id=f"ablation-{model}", journal=root / "calls.jsonl") as session:

        async def go() -> AblationMatrix:
            async with session:
                return await run_ablation(
                    config=configs[model],
                    seeds=(0,),
                    fixture_set=fixture_set,
                    agent_db=agent_db,
                    session=session,
                    root=root,
                    judge=judge,
                    judge_config=configs[judge.model],
                )

        return asyncio.run(go())


def points(matrix: AblationMatrix, configuration: str, categories: list[str]) -> float:
    return sum(matrix.cell(configuration, c).points for c in categories)


def fired_in(matrix: AblationMatrix, guard: str) -> list[str]:
    """The categories where the guard fired with every guard on."""
    return [
        c.category
        for c in matrix.cells
        if c.configuration == ALL_GUARDS and c.category != "all" and c.guard_firings.get(guard)
    ]


@pytest.fixture(scope="module")
def sim_small_matrix(
    small_fixture_set: FixtureSet, agent_db: Path, tmp_path_factory: pytest.TempPathFactory
) -> AblationMatrix:
    return ablate("sim-small", small_fixture_set, agent_db, tmp_path_factory.mktemp("ablation"))


@pytest.mark.parametrize("guard", ["stall_bounce", "argument_repair", "truncation_refusal"])
def test_each_guard_earns_the_categories_where_sim_small_needs_it(
    sim_small_matrix: AblationMatrix, guard: str
) -> None:
    matrix = sim_small_matrix
    categories = fired_in(matrix, guard)
    assert categories, f"{guard} never fired for sim-small"
    off = f"product lane, {guard} off"
    for category in categories:
        assert matrix.cell(ALL_GUARDS, category).points >= matrix.cell(off, category).points
    assert points(matrix, ALL_GUARDS, categories) > points(matrix, off, categories), matrix.table()


def test_sim_small_scores_higher_through_the_product_than_alone(
    sim_small_matrix: AblationMatrix,
) -> None:
    model_lane = sim_small_matrix.cell(MODEL_LANE, "all").rate
    product_lane = sim_small_matrix.cell(ALL_GUARDS, "all").rate
    assert model_lane is not None and product_lane is not None
    assert product_lane > model_lane


@pytest.mark.slow  # 60-70 s: the whole matrix for an agent the sweep tests already show at 100
def test_sim_strong_is_high_in_both_lanes_and_the_guards_change_little(
    small_fixture_set: FixtureSet, agent_db: Path, tmp_path: Path
) -> None:
    matrix = ablate("sim-strong", small_fixture_set, agent_db, tmp_path)
    rows = {c.configuration for c in matrix.cells}
    rates = {row: matrix.cell(row, "all").rate for row in rows}
    assert all(rate is not None and rate >= 0.95 for rate in rates.values()), matrix.table()
    spread = max(r for r in rates.values() if r is not None) - min(
        r for r in rates.values() if r is not None
    )
    assert spread <= 0.02, matrix.table()
