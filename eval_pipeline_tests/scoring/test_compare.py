"""Who leads and by how much: paired differences, McNemar, the seed noise floor, and which
pairs the headline compares."""

from __future__ import annotations

import subprocess
import sys

import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from scipy.stats import binomtest

from eval_pipeline.scoring.compare import (
    ALL_PAIRS_UP_TO,
    category_gaps,
    compare_models,
    comparisons_text,
    lane_comparisons,
    leaders,
    mcnemar_p,
    paired_difference,
    seed_noise_floor,
)
from eval_pipeline.scoring.score import CaseScore
from eval_pipeline_tests.scoring.cases import case_score


def score(
    model: str,
    case: int,
    value: float | None,
    *,
    seed: int = 0,
    lane: str = "product",
    category: str = "royalty_math",
) -> CaseScore:
    return case_score(model, case, value, seed=seed, lane=lane, category=category)  # type: ignore[arg-type]


def model_scores(
    model: str, values: list[float | None], seed: int = 0, **kw: str
) -> list[CaseScore]:
    return [score(model, i, v, seed=seed, **kw) for i, v in enumerate(values)]  # type: ignore[arg-type]


def test_the_difference_is_paired_over_shared_cases_with_mcnemar_on_the_discordant_ones() -> None:
    reference = model_scores("ref", [1, 1, 0, 0, 1, None])
    candidate = model_scores("cand", [1, 1, 1, 1, 0, 1])
    paired = paired_difference("ref", reference, "cand", candidate)
    assert paired.shared_cases == 5  # c005 never heard by the reference: left out, counted
    assert paired.left_out == {"ref": 1, "cand": 0}
    assert paired.difference == pytest.approx(100 * (0 + 0 + 1 + 1 - 1) / 5)
    assert paired.low is not None and paired.high is not None
    assert paired.low <= paired.difference <= paired.high
    assert (paired.reference_only, paired.candidate_only) == (1, 2)
    assert paired.mcnemar_p == pytest.approx(binomtest(2, 3, 0.5).pvalue)


@given(
    reference_only=st.integers(min_value=0, max_value=400),
    candidate_only=st.integers(min_value=0, max_value=400),
)
@example(reference_only=0, candidate_only=0)  # nothing discordant: no evidence, p = 1
@example(reference_only=5, candidate_only=5)  # the most likely outcome: p = 1, not above
@example(reference_only=0, candidate_only=1)
@example(reference_only=0, candidate_only=400)  # far in the tail
def test_mcnemar_is_scipys_exact_binomial_test(reference_only: int, candidate_only: int) -> None:
    discordant = reference_only + candidate_only
    expected = binomtest(candidate_only, discordant, 0.5).pvalue if discordant else 1.0
    assert mcnemar_p(reference_only, candidate_only) == pytest.approx(expected, rel=1e-9, abs=0)
    assert mcnemar_p(reference_only, candidate_only) == mcnemar_p(candidate_only, reference_only)


def test_comparing_two_models_does_not_import_scipy() -> None:
    """Found timing the results job and `evalp audit`: every process that computed one
    McNemar p-value imported scipy.stats for it (0.6-0.7 s, more than the comparison)."""
    code = (
        "import sys\n"
        "from eval_pipeline.scoring.compare import mcnemar_p\n"
        "assert mcnemar_p(3, 9) > 0\n"
        "print(sorted(name for name in sys.modules if name.split('.')[0] == 'scipy'))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_nothing_shared_is_no_difference_not_a_zero() -> None:
    paired = paired_difference("a", model_scores("a", [None]), "b", model_scores("b", [1]))
    assert (paired.shared_cases, paired.difference, paired.mcnemar_p) == (0, None, None)


def test_the_noise_floor_is_the_largest_paired_gap_between_two_seeds_of_one_model() -> None:
    scores = [
        *model_scores("m", [1, 1, 1, 1], seed=0),
        *model_scores("m", [1, 1, 1, 0], seed=1),  # 25 points below seed 0
        *model_scores("m", [1, 0, 0, 1], seed=2),  # 50 below seed 0, 25 below seed 1
    ]
    assert seed_noise_floor(scores) == pytest.approx(50.0)
    assert seed_noise_floor(model_scores("m", [1, 0])) is None  # one seed: unknown, not zero


def test_a_gap_beyond_the_interval_and_the_noise_is_a_lead_a_smaller_one_is_not() -> None:
    strong = [*model_scores("strong", [1] * 40, seed=0), *model_scores("strong", [1] * 40, seed=1)]
    weak = [
        *model_scores("weak", [1] * 20 + [0] * 20, seed=0),
        *model_scores("weak", [1] * 20 + [0] * 20, seed=1),
    ]
    lead = compare_models("product", "weak", weak, "strong", strong)
    assert lead.reading == "ahead"
    assert lead.noise_floor == 0.0
    assert lead.sentence().startswith("strong leads weak: +50.0 points [")
    # A smaller gap with a model whose two seeds disagree by more than the gap: the
    # interval excludes zero, and still a re-run of the same model moves as much.
    noisy = [
        *model_scores("noisy", [1] * 40, seed=0),
        *model_scores("noisy", [1] * 20 + [0] * 20, seed=1),
    ]
    within = compare_models("product", "weak", weak, "noisy", noisy)
    assert within.paired.difference == pytest.approx(25.0)
    assert within.paired.low is not None and within.paired.low > 0
    assert within.noise_floor == pytest.approx(50.0)
    assert within.reading == "within noise"
    assert "a gap within the seed noise" in within.sentence()
    same = compare_models(
        "product",
        "weak",
        weak,
        "weak-too",
        [s.model_copy(update={"model": "weak-too"}) for s in weak],
    )
    assert same.reading == "no difference shown"
    assert "no difference shown (the interval includes 0)" in same.sentence()


def test_pairs_are_oriented_leader_first_and_a_chosen_reference_is_kept() -> None:
    scores = [
        *model_scores("a", [1, 0, 0, 0] * 10),
        *model_scores("b", [1, 1, 1, 0] * 10),
        *model_scores("c", [1, 1, 0, 0] * 10),
    ]
    automatic = lane_comparisons(scores)
    assert [(c.candidate, c.reference) for c in automatic] == [("b", "c"), ("b", "a"), ("c", "a")]
    assert all((c.paired.difference or 0) > 0 for c in automatic)
    assert leaders(automatic) == {"product": "b"}
    against_a = lane_comparisons(scores, reference="c")
    assert [(c.candidate, c.reference) for c in against_a] == [("b", "c"), ("a", "c")]
    assert (against_a[1].paired.difference or 0) < 0  # a is below c: the sign says so


def test_beyond_the_all_pairs_limit_each_model_is_compared_with_the_leader() -> None:
    scores = [
        s
        for index in range(ALL_PAIRS_UP_TO + 1)
        for s in model_scores(f"m{index}", [1] * (20 - index) + [0] * index)
    ]
    compared = lane_comparisons(scores)
    assert len(compared) == ALL_PAIRS_UP_TO
    assert {c.candidate for c in compared} == {"m0"}


def test_no_clear_leader_when_the_top_two_are_not_apart() -> None:
    scores = [*model_scores("a", [1, 0] * 10), *model_scores("b", [0, 1] * 10)]
    assert leaders(lane_comparisons(scores)) == {"product": None}


def test_lanes_are_compared_apart_model_lane_first_and_printed_by_lane() -> None:
    scores = [
        *model_scores("a", [1, 0] * 5, lane="product"),
        *model_scores("b", [1, 1] * 5, lane="product"),
        *model_scores("a", [1, 1] * 5, lane="model"),
        *model_scores("b", [1, 1] * 5, lane="model"),
    ]
    compared = lane_comparisons(scores)
    assert [c.lane for c in compared] == ["model", "product"]
    text = comparisons_text(compared)
    assert text.splitlines()[0] == "model lane:"
    assert "product lane:" in text


def test_category_gaps_pair_within_each_category() -> None:
    reference = [
        *model_scores("r", [1, 1], category="catalog_lookup"),
        score("r", 5, 0, category="royalty_math"),
    ]
    candidate = [
        *model_scores("c", [1, 0], category="catalog_lookup"),
        score("c", 5, 1, category="royalty_math"),
    ]
    gaps = {g.category: g for g in category_gaps(reference, candidate)}
    assert gaps["catalog_lookup"].difference == pytest.approx(-50.0)
    assert gaps["royalty_math"].difference == pytest.approx(100.0)
    assert [g.category for g in category_gaps(reference, candidate)] == [
        "catalog_lookup",
        "royalty_math",
    ]
