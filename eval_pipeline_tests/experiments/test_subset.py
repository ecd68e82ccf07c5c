"""A quick run on a subset (issue 28): which cases a selection takes, that a typo is an
error rather than a smaller run, and that a subset run is scored, recorded as a subset and
reaches nothing the suite publishes."""

from __future__ import annotations

from pathlib import Path

import pytest

from eval_pipeline import paths
from eval_pipeline.cases.frozen import FixtureSet
from eval_pipeline.errors import ConfigError
from eval_pipeline.experiments.subset import (
    RESULT_FILE,
    CaseSelection,
    SubsetResult,
    parse_case_option,
    run_subset,
    subset_root,
)
from eval_pipeline.lanes.guards import GuardSettings
from eval_pipeline.project_configs import scan_model_configs
from eval_pipeline.scoring.judge import load_judge


def test_a_limit_takes_each_category_in_turn_in_the_fixture_sets_order(
    small_fixture_set: FixtureSet,
) -> None:
    cases = small_fixture_set.cases
    categories = list(dict.fromkeys(case.category for case in cases))
    chosen = CaseSelection(limit=len(categories)).choose(cases)
    assert sorted(c.category for c in chosen) == sorted(categories)  # one of each
    order = [c.case_id for c in cases]
    assert [c.case_id for c in chosen] == sorted((c.case_id for c in chosen), key=order.index)
    twice = CaseSelection(limit=len(categories) + 1).choose(cases)
    assert len(twice) == len(categories) + 1
    assert CaseSelection(limit=10_000).choose(cases) == list(cases)


def test_categories_and_patterns_narrow_and_combine(small_fixture_set: FixtureSet) -> None:
    cases = small_fixture_set.cases
    category = cases[0].category
    only = CaseSelection(categories=(category,)).choose(cases)
    assert only and {c.category for c in only} == {category}
    one = CaseSelection(cases=(cases[1].case_id,)).choose(cases)
    assert [c.case_id for c in one] == [cases[1].case_id]
    pattern = CaseSelection(cases=(f"{category}-*",), limit=2).choose(cases)
    assert len(pattern) == min(2, len(only)) and {c.category for c in pattern} == {category}


def test_a_selection_that_matches_nothing_is_an_error_naming_it(
    small_fixture_set: FixtureSet,
) -> None:
    cases = small_fixture_set.cases
    with pytest.raises(ConfigError, match=r"--categories: no case is in royalty_maths; .*"):
        CaseSelection(categories=("royalty_maths",)).choose(cases)
    with pytest.raises(ConfigError, match=r"--cases: nope-\* matches no case \(case ids look"):
        CaseSelection(cases=(cases[0].case_id, "nope-*")).choose(cases)
    assert parse_case_option("5") == ((), 5)
    assert parse_case_option("a-001, b-*") == (("a-001", "b-*"), None)
    with pytest.raises(ConfigError, match="at least 1"):
        parse_case_option("0")


def test_a_subset_run_scores_both_lanes_and_publishes_nothing(
    isolated_state: Path, small_fixture_set: FixtureSet, agent_db: Path
) -> None:
    judge = load_judge()
    selection = CaseSelection(limit=4)
    result = run_subset(
        models=["sim-small"],
        seeds=[0, 1],
        selection=selection,
        fixture_set=small_fixture_set,
        agent_db=agent_db,
        configs=scan_model_configs().require(["sim-small", judge.model]),
        judge=judge,
        guards=GuardSettings(),
    )
    assert len(result.case_ids) == 4
    assert {(s.lane, s.seed) for s in result.scores} == {
        (lane, seed) for lane in ("model", "product") for seed in (0, 1)
    }
    assert len(result.scores) == 4 * 2 * 2
    assert {s.case_id for s in result.scores} == set(result.case_ids)
    stored = SubsetResult.model_validate_json(
        (subset_root(result.run_id) / RESULT_FILE).read_text(encoding="utf-8")
    )
    assert stored == result
    text = result.text()
    assert text.startswith(f"SUBSET run {result.run_id}: 4 of the {len(small_fixture_set.cases)}")
    assert "Not the suite's result" in text and "simulated provider" in text
    # Nothing of the suite's was written: no partition, warehouse, MLflow store or report.
    assert not paths.lanes_dir().exists()
    assert not paths.warehouse_path().exists()
    assert not (paths.var_dir() / "mlflow").exists()
    assert not (paths.var_dir() / "reports").exists()
    again = run_subset(
        models=["sim-small"],
        seeds=[0],
        selection=selection,
        fixture_set=small_fixture_set,
        agent_db=agent_db,
        configs=scan_model_configs().require(["sim-small", judge.model]),
        judge=judge,
        guards=GuardSettings(),
    )
    assert again.run_id != result.run_id  # every quick run calls again
