"""The parity statistics on hand-made case scores: the verdict rule at its edges, pairs
that stay pairs, McNemar's discordant counts against scipy, ‡ that cannot confirm, the
category rule, and the small-n caveat."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy.stats import binomtest

from eval_pipeline.experiments.parity import (
    bootstrap,
    case_values,
    parity_report,
    verdict_for,
)
from eval_pipeline.experiments.spec import ExperimentSpec
from eval_pipeline.scoring.gate import GateConfig
from eval_pipeline.scoring.score import CaseScore

PROVIDERS = {"m-a": "simulated", "m-b": "simulated"}
GATE = GateConfig(candidates=("m-a",), core_required=0, max_category_drop=3.0)


def spec(**changes: Any) -> ExperimentSpec:
    base: dict[str, Any] = {
        "id": "unit-parity",
        "title": "unit",
        "hypothesis": "the two arms score the same per case",
        "fixture_id": "fx-unit",
        "reference": {"label": "a", "model": "m-a", "lane": "product", "seeds": [0]},
        "candidate": {"label": "b", "model": "m-b", "lane": "product", "seeds": [0]},
        "kind": "equivalence",
        "margin": 2.0,
        "category_rule": {"max_difference": 10.0, "min_cases": 5},
        "falsifiers": ["the interval reaches the margin"],
        "sample_size": {"cases": 40, "seeds": 1, "why": "every case of the unit set"},
    }
    base.update(changes)
    return ExperimentSpec.model_validate(base)


def score(
    model: str,
    case: int,
    value: float | None,
    *,
    category: str = "royalty_math",
    status: str = "scored",
    seed: int = 0,
) -> CaseScore:
    return CaseScore(
        lane="product",
        model=model,
        seed=seed,
        case_id=f"c{case:03d}",
        category=category,
        core=False,
        attempt=1,
        run_id="r",
        fixture_id="fx-unit",
        settings_hash="h",
        status=status,  # type: ignore[arg-type]
        exact=value,
        trace=None,
        judged=None,
        score=value,
        failed_checks=(),
        security_violation=False,
        answer=None,
        reason="",
        label=None if value is None else ("right" if value >= 0.5 else "wrong"),
        cost_usd=Decimal(0),
        tokens=0,
    )


@pytest.mark.parametrize(
    ("kind", "margin", "low", "high", "expected"),
    [
        ("equivalence", 2, -1.9, 1.9, "confirmed"),
        ("equivalence", 2, -2.0, 1.0, "inconclusive"),  # touching the margin is not inside
        ("equivalence", 2, 2.0, 5.0, "refuted"),
        ("equivalence", 2, -5.0, -2.0, "refuted"),
        ("equivalence", 2, -3.0, 3.0, "inconclusive"),
        ("non_inferiority", 3, -2.9, 4.0, "confirmed"),
        ("non_inferiority", 3, -3.1, 4.0, "inconclusive"),
        ("non_inferiority", 3, -9.0, -3.0, "refuted"),
        ("superiority", 3, 3.1, 9.0, "confirmed"),
        ("superiority", 3, 2.0, 9.0, "inconclusive"),
        ("superiority", 3, -4.0, 3.0, "refuted"),
    ],
)
def test_the_verdict_against_the_margin(
    kind: str, margin: float, low: float, high: float, expected: str
) -> None:
    assert verdict_for(kind, margin, low, high) == expected


def test_identical_arms_are_confirmed_equivalent_with_a_zero_interval() -> None:
    values = [1.0, 0.0, 1.0, 0.5] * 10
    scores = {
        "reference": [score("m-a", i, v) for i, v in enumerate(values)],
        "candidate": [score("m-b", i, v) for i, v in enumerate(values)],
    }
    (comparison,) = parity_report(spec(), "hash", scores, GATE, PROVIDERS).comparisons
    assert comparison.verdict == "confirmed"
    assert (comparison.low, comparison.high, comparison.difference) == (0.0, 0.0, 0.0)
    assert comparison.mcnemar_p == 1.0


def test_a_drop_is_refuted_and_mcnemar_counts_the_discordant_pairs() -> None:
    reference = [score("m-a", i, 1.0) for i in range(40)]
    candidate = [score("m-b", i, 0.0 if i < 12 else 1.0) for i in range(40)]
    candidate[39] = score("m-b", 39, 1.0)
    reference[39] = score("m-a", 39, 0.0)
    (comparison,) = parity_report(
        spec(), "hash", {"reference": reference, "candidate": candidate}, GATE, PROVIDERS
    ).comparisons
    assert comparison.verdict == "refuted"
    assert comparison.mcnemar_reference_only == 12
    assert comparison.mcnemar_candidate_only == 1
    assert comparison.mcnemar_p == pytest.approx(binomtest(1, 13, 0.5).pvalue)
    assert comparison.difference == pytest.approx(100 * (1 - 12) / 40)


def test_unheard_cases_leave_the_pairs_and_an_unhealed_arm_cannot_confirm() -> None:
    reference = [score("m-a", i, 1.0) for i in range(40)]
    candidate = [score("m-b", i, 1.0) for i in range(39)]
    candidate.append(score("m-b", 39, None, status="infra_error"))
    report = parity_report(
        spec(), "hash", {"reference": reference, "candidate": candidate}, GATE, PROVIDERS
    )
    (comparison,) = report.comparisons
    assert comparison.shared_cases == 39
    assert comparison.left_out == {"reference": 0, "candidate": 1}
    assert comparison.verdict == "inconclusive"
    assert any("unhealed" in reason for reason in comparison.reasons)
    assert {arm.arm: arm.infra_errors for arm in report.arms} == {"reference": 0, "candidate": 1}


def test_a_category_past_the_rule_refutes_and_a_small_one_only_carries_a_caveat() -> None:
    def arms(category_cases: int) -> dict[str, list[CaseScore]]:
        reference = [score("m-a", i, 1.0) for i in range(200)]
        candidate = [score("m-b", i, 1.0) for i in range(200)]
        for i in range(category_cases):
            reference.append(score("m-a", 500 + i, 1.0, category="multi_step"))
            candidate.append(score("m-b", 500 + i, 0.0 if i == 0 else 1.0, category="multi_step"))
        return {"reference": reference, "candidate": candidate}

    wide = spec(margin=5.0)
    (broken,) = parity_report(wide, "hash", arms(6), GATE, PROVIDERS).comparisons
    row = next(r for r in broken.categories if r.category == "multi_step")
    assert row.breaks_rule and not row.small_n
    assert broken.verdict == "refuted"
    (small,) = parity_report(wide, "hash", arms(4), GATE, PROVIDERS).comparisons
    row = next(r for r in small.categories if r.category == "multi_step")
    assert row.small_n and not row.breaks_rule
    assert small.verdict == "confirmed"


def test_a_case_value_is_its_mean_over_seeds_and_majority_pass_votes() -> None:
    rows = [score("m", 1, v, seed=s) for s, v in enumerate([1.0, 0.0, 1.0])]
    assert case_values(rows, "case_score") == {"c001": pytest.approx(200 / 3)}
    assert case_values(rows, "majority_pass") == {"c001": 100.0}


@given(st.lists(st.floats(-100, 100), min_size=1, max_size=60), st.floats(0.6, 0.99))
def test_the_interval_holds_the_mean_and_lies_within_the_data(
    differences: list[float], confidence: float
) -> None:
    low, high = bootstrap(differences, confidence)
    assert min(differences) - 1e-9 <= low <= high <= max(differences) + 1e-9
