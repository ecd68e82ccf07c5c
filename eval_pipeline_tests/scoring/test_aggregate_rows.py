"""Every field of a category row and a lane summary, by the rules of docs/scoring.md
("Aggregation"): what each denominator counts, which statuses sit beside the score, which
seeds and cases a spread, a pass^k or a vote is taken over, and the markdown table's
cells. Each test builds its scores inside it (see bench/mutation.md)."""

from __future__ import annotations

from decimal import Decimal

import pytest

from eval_pipeline.scoring.aggregate import (
    ALL,
    bootstrap_interval,
    majority,
    summarize_lane,
    summarize_scores,
    summary_markdown,
)
from eval_pipeline_tests.scoring.test_aggregate import case_score


@pytest.mark.parametrize(
    ("scores", "passed"),
    [
        ([0.49], False),
        ([0.5], True),
        ([1.0, 1.0, 0.0, 0.0], False),  # a tie fails
        ([0.5, 0.5, 0.0], True),
        ([1.0, 0.0, 0.0], False),
        ([0.8, 0.6, 0.7, 0.0, 0.1], True),
    ],
)
def test_a_majority_vote_counts_scores_of_at_least_half_in_more_than_half_the_seeds(
    scores: list[float], passed: bool
) -> None:
    assert majority(scores) is passed


def test_the_bootstrap_interval_is_the_published_one() -> None:
    """The interval is drawn from a fixed RNG (seed 20260101, 2,000 resamples, the 2.5th and
    97.5th percentiles) so a published interval can be derived again from the same scores:
    these bounds are that contract, and changing any of the three changes them."""
    values = [round(((i * 37) % 101) / 101, 4) for i in range(25)]
    assert bootstrap_interval(values) == (
        pytest.approx(0.3702781, rel=1e-9),
        pytest.approx(0.5861501, rel=1e-9),
    )
    assert bootstrap_interval([0.7]) == (pytest.approx(0.7), pytest.approx(0.7))
    assert bootstrap_interval([]) is None


def test_a_row_of_two_seeds_and_its_denominators() -> None:
    scores = [
        case_score("a", 0, 1.0),
        case_score("a", 1, 0.5),
        case_score("b", 0, 0.0),
        case_score("b", 1, 0.25),
        # c scored only in seed 0: left out of pass^k's denominator, still in the vote
        case_score("c", 0, 1.0),
        case_score("c", 1, None, status="harness_error"),
        case_score("d", 0, None, status="judge_error"),
        case_score("d", 1, None, status="infra_error"),
        case_score("e", 1, None, status="budget_stopped"),
    ]
    summary = summarize_lane("product", "m", scores, intervals=False)
    assert [(r.low, r.high) for r in summary.rows] == [(None, None)] * 2, "no interval asked"
    row = summary.row("royalty_math")
    assert row.model_dump() == {
        "category": "royalty_math",
        "cases": 5,
        "scored": 5,
        "infra_errors": 3,
        "budget_stopped": 1,
        # case means a 0.75, b 0.125, c 1.0
        "mean": pytest.approx(100 * (0.75 + 0.125 + 1.0) / 3),
        "per_seed": {"0": pytest.approx(100 * 2 / 3), "1": pytest.approx(37.5)},
        "spread": pytest.approx(100 * 2 / 3 - 37.5),
        "stdev": pytest.approx((100 * 2 / 3 - 37.5) / 2),
        "low": None,
        "high": None,
        "pass_k": 0.5,  # a passed in both seeds, b did not; c is incomplete
        "majority_passed": 2,  # a (2 of 2) and c (1 of 1)
        "majority_decided": 3,  # d and e were never scored
    }


def test_a_row_with_intervals_bounds_the_mean_of_its_cases() -> None:
    scores = [case_score(f"c{i}", 0, float(i % 2)) for i in range(6)]
    row = summarize_lane("product", "m", scores).row(ALL)
    interval = bootstrap_interval([0.0, 1.0, 0.0, 1.0, 0.0, 1.0])
    assert interval is not None
    assert (row.low, row.high) == (100 * interval[0], 100 * interval[1])
    assert row.low < row.mean < row.high


def test_a_category_never_scored_has_no_numbers_only_counts() -> None:
    scores = [
        case_score("a", 0, None, status="infra_error"),
        case_score("a", 1, None, status="budget_stopped"),
    ]
    row = summarize_lane("product", "m", scores).row(ALL)
    assert (row.cases, row.scored, row.infra_errors, row.budget_stopped) == (1, 0, 1, 1)
    assert (row.mean, row.per_seed, row.spread, row.stdev) == (None, {}, None, None)
    assert (row.low, row.high, row.pass_k) == (None, None, None)
    assert (row.majority_passed, row.majority_decided) == (0, 0)


def test_one_seed_has_a_spread_of_zero_and_no_stdev() -> None:
    row = summarize_lane("product", "m", [case_score("a", 3, 1.0)]).row(ALL)
    assert (row.per_seed, row.spread, row.stdev, row.pass_k) == ({"3": 100.0}, 0.0, None, 1.0)


def test_a_lane_summary_counts_every_row_once() -> None:
    scores = [
        case_score("k1", 0, 1.0, core=True, category="reconciliation"),
        case_score("k1", 1, 0.0, core=True, category="reconciliation"),
        case_score("k2", 0, 1.0, core=True, security=True),
        case_score("k2", 1, 1.0, core=True),
        case_score("k3", 0, None, core=True, status="infra_error", label="drop"),
        case_score("x", 1, 0.0, label="truncated"),
        case_score("y", 0, None, status="judge_error"),
        case_score("z", 0, None, status="harness_error"),
    ]
    scores[1] = scores[1].model_copy(update={"fixture_id": "fx-other", "cost_usd": Decimal("1")})
    summary = summarize_lane("product", "m", scores)
    assert summary.model_dump(exclude={"rows"}) == {
        "lane": "product",
        "model": "m",
        "seeds": (0, 1),
        "fixture_id": "fx-other,fx-test",
        "core_passed": 1,  # k2; k1 ties
        "core_decided": 2,
        "core_total": 3,
        "labels": {"right": 3, "wrong": 1, "drop": 1, "truncated": 1},
        "yield_rate": pytest.approx(4 / 6),
        "accuracy_on_yield": 0.75,
        "security_violations": 1,
        "unhealed_infra_errors": 3,
        "cost_usd": Decimal("1.07"),
        "tokens": 80,
    }
    # categories in the fixed order, then all
    assert [r.category for r in summary.rows] == ["royalty_math", "reconciliation", ALL]


def test_a_lane_without_labels_has_no_yield_and_without_grades_no_accuracy() -> None:
    unlabelled = [case_score("a", 0, None, status="budget_stopped")]
    summary = summarize_lane("product", "m", unlabelled)
    assert (summary.labels, summary.yield_rate, summary.accuracy_on_yield) == ({}, None, None)
    dropped = summarize_lane("product", "m", [case_score("a", 0, None, label="drop")])
    assert (dropped.yield_rate, dropped.accuracy_on_yield) == (0.0, None)
    wrong = summarize_lane("product", "m", [case_score("a", 0, 0.0), case_score("b", 0, 0.0)])
    assert (wrong.yield_rate, wrong.accuracy_on_yield) == (1.0, 0.0)


def test_summaries_come_lane_by_lane_then_model_by_model() -> None:
    scores = [
        case_score("a", 0, 1.0, lane="product", model="b"),
        case_score("a", 0, 1.0, lane="aa", model="a"),
        case_score("a", 0, 1.0, lane="product", model="a"),
        case_score("a", 0, 1.0, lane="model", model="b"),
        case_score("a", 0, 0.0, lane="model", model="a"),
    ]
    summaries = summarize_scores(scores)
    assert [(s.lane, s.model) for s in summaries] == [
        ("model", "a"),
        ("model", "b"),
        ("product", "a"),
        ("product", "b"),
        ("aa", "a"),  # a lane of no known kind comes last
    ]
    assert summaries[0].row(ALL).mean == 0.0 and summaries[1].row(ALL).mean == 100.0


def test_the_markdown_table_row_by_row() -> None:
    scores = [
        case_score("a", 0, 1.0),
        case_score("a", 1, 0.5),
        case_score("b", 0, 0.0),
        case_score("b", 1, None, status="infra_error"),
        case_score("c", 0, None, status="budget_stopped", category="reconciliation"),
    ]
    table = summary_markdown(summarize_scores(scores)).splitlines()
    summary = summarize_lane("product", "m", scores)
    low, high = summary.row("royalty_math").low, summary.row("royalty_math").high
    assert low is not None and high is not None
    assert table[2:] == [
        "| lane | model | category | score | interval | spread | pass^k | n | ‡ | † |",
        "|---|---|---|---:|---|---:|---:|---:|---:|---:|",
        f"| product | m | royalty_math | 37.5 | [{low:.1f}, {high:.1f}] | 0.0 | 100% | 3 | 1 | 0 |",
        "| product | m | reconciliation | – | – | – | – | 0 | 0 | 1 |",
        f"| product | m | all | 37.5 | [{low:.1f}, {high:.1f}] | 0.0 | 100% | 3 | 1 | 1 |",
    ]
    assert table[0] == (
        "Scores in points (0-100): mean over cases of their mean over seeds, [95% bootstrap "
        "interval over cases], ±spread of the per-seed means, pass^k; n = case × seed pairs "
        "scored; ‡ never heard (infrastructure, harness or judge error), † budget-stopped: "
        "both left out of n, never scored as zero."
    )
    assert table[1] == ""
    half = [case_score("a", 0, 1.0), case_score("b", 0, 0.0)]
    row = summarize_lane("product", "m", half).row(ALL)
    assert row.low is not None and row.high is not None
    assert summary_markdown(summarize_scores(half)).splitlines()[-1] == (
        f"| product | m | all | 50.0 | [{row.low:.1f}, {row.high:.1f}] | 0.0 | 50% | 2 | 0 | 0 |"
    )
