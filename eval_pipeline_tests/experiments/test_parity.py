"""The parity statistics on hand-made case scores: the verdict rule at its edges, pairs
that stay pairs, McNemar's discordant counts against scipy, ‡ that cannot confirm, the
category rule, and the small-n caveat."""

from __future__ import annotations

from pathlib import Path
from statistics import mean
from typing import Any

import numpy as np
import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st
from scipy.stats import binomtest

from eval_pipeline import paths
from eval_pipeline.experiments.parity import (
    _breaks,
    arm_summary,
    experiment_reports_dir,
    parity_report,
    report_markdown,
    verdict_for,
)
from eval_pipeline.experiments.spec import ExperimentSpec
from eval_pipeline.scoring.aggregate import summarize_lane
from eval_pipeline.scoring.compare import (
    BOOTSTRAP_RESAMPLES,
    BOOTSTRAP_SEED,
    bootstrap,
    case_values,
)
from eval_pipeline.scoring.gate import Baseline, GateConfig, evaluate_gate, gate_markdown
from eval_pipeline.scoring.score import CaseScore
from eval_pipeline_tests.scoring.cases import case_score

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
    return case_score(model, case, value, category=category, status=status, seed=seed)


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


def test_touching_the_margin_decides_each_kind_as_the_docstring_says() -> None:
    # equivalence: confirmed only strictly inside; refuted from the margin outwards
    assert verdict_for("equivalence", 2, -1.0, 2.0) == "inconclusive"
    assert verdict_for("equivalence", 2, 2.0, 2.5) == "refuted"
    assert verdict_for("equivalence", 2, -2.5, -2.0) == "refuted"
    assert verdict_for("equivalence", 2, 1.9, 2.5) == "inconclusive"
    assert verdict_for("equivalence", 2, -2.5, -1.9) == "inconclusive"
    # non-inferiority: the threshold is -m
    assert verdict_for("non_inferiority", 3, -3.0, 4.0) == "inconclusive"
    assert verdict_for("non_inferiority", 3, -4.0, -3.0) == "refuted"
    assert verdict_for("non_inferiority", 3, -4.0, -2.9) == "inconclusive"
    assert verdict_for("non_inferiority", 3, 2.9, 3.0) == "confirmed"
    # superiority: the threshold is +m
    assert verdict_for("superiority", 3, 3.0, 9.0) == "inconclusive"
    assert verdict_for("superiority", 3, 2.0, 3.0) == "refuted"
    assert verdict_for("superiority", 3, 2.0, 3.1) == "inconclusive"
    assert verdict_for("superiority", 3, -2.9, -1.0) == "refuted"


def test_the_category_rule_at_its_limit_for_each_kind() -> None:
    assert not _breaks("equivalence", 10.0, 10.0)
    assert not _breaks("equivalence", 10.0, -10.0)
    assert _breaks("equivalence", 10.0, 10.5)
    assert _breaks("equivalence", 10.0, -10.5)
    assert not _breaks("non_inferiority", 10.0, -10.0)
    assert _breaks("non_inferiority", 10.0, -10.5)
    assert not _breaks("non_inferiority", 10.0, 50.0)
    assert _breaks("superiority", 10.0, -10.5)


def test_the_interval_is_the_published_bootstrap_seed_resamples_and_percentiles() -> None:
    differences = [0.0, 100.0, -50.0, 25.0, 0.0, 100.0, 100.0]
    rng = np.random.default_rng(20261130)
    picks = rng.integers(0, 7, size=(4000, 7))
    means = np.asarray(differences)[picks].mean(axis=1)
    assert (BOOTSTRAP_SEED, BOOTSTRAP_RESAMPLES) == (20261130, 4000)
    assert bootstrap(differences, 0.9) == tuple(np.percentile(means, [5.0, 95.0]))
    assert bootstrap(differences, 0.5) == tuple(np.percentile(means, [25.0, 75.0]))
    low, high = bootstrap([1, 3], 0.95)  # integers are read as floats
    assert (type(low), type(high)) == (float, float) and low < high


def test_a_case_value_leaves_out_unscored_seeds_and_a_failed_majority_is_zero() -> None:
    rows = [
        score("m", 1, 0.0, seed=0),
        score("m", 1, 1.0, seed=1),
        score("m", 1, 0.0, seed=2),
        score("m", 1, None, seed=3, status="infra_error"),
        score("m", 2, None, status="infra_error"),
        score("m", 3, 0.25),
    ]
    assert case_values(rows, "case_score") == {
        "c001": pytest.approx(100 / 3),
        "c003": 25.0,
    }
    assert case_values(rows, "majority_pass") == {"c001": 0.0, "c003": 0.0}


def test_an_arm_summary_counts_cases_scores_and_every_kind_never_heard() -> None:
    rows = [
        score("m-a", 0, 1.0, seed=0),
        score("m-a", 0, 0.5, seed=1),
        score("m-a", 1, 0.0),
        score("m-a", 2, None, status="infra_error"),
        score("m-a", 3, None, status="harness_error"),
        score("m-a", 4, None, status="judge_error"),
        score("m-a", 5, None, status="budget_stopped"),
        score("m-a", 6, None, status="budget_stopped"),
    ]
    arm = spec().reference.model_copy(update={"seeds": (0, 1)})
    summary = arm_summary("reference", arm, rows, GATE, "simulated")
    assert summary.model_dump(exclude={"gate"}) == {
        "arm": "reference",
        "label": "a",
        "model": "m-a",
        "provider": "simulated",
        "lane": "product",
        "seeds": (0, 1),
        "cases": 7,
        "scored": 3,
        "infra_errors": 3,
        "budget_stopped": 2,
        "mean_points": 37.5,
        "gate_passed": False,
    }
    assert summary.gate.startswith("| model | rule | passed | detail |")
    assert "| m-a | no_unhealed_infra_errors | **NO** | 3 case(s) never heard" in summary.gate
    model_lane = arm.model_copy(update={"lane": "model"})
    off = arm_summary("x", model_lane, rows, GATE, "openai")
    assert (off.gate, off.gate_passed, off.provider, off.lane) == (
        "not applicable: the ship gate reads the product lane only",
        None,
        "openai",
        "model",
    )
    empty = arm_summary("x", arm, [], GATE, "simulated")
    assert (empty.cases, empty.scored, empty.mean_points, empty.gate_passed) == (0, 0, None, None)
    assert empty.gate == "not applicable: the ship gate reads the product lane only"
    unscored = arm_summary("x", arm, rows[3:], GATE, "simulated")
    assert unscored.mean_points is None and unscored.gate_passed is False


def test_a_passing_arms_gate_is_the_gates_own_markdown() -> None:
    rows = [score("m-a", i, 1.0) for i in range(3)]
    arm = spec().reference
    summary = arm_summary("reference", arm, rows, GATE, "simulated")
    assert summary.gate_passed is True
    expected = evaluate_gate(summarize_lane("product", "m-a", rows), None, GATE)
    assert summary.gate == gate_markdown([expected])


def test_a_comparison_without_a_shared_case_is_inconclusive_with_nothing_computed() -> None:
    reference = [score("m-a", 0, 1.0), score("m-a", 1, None, status="infra_error")]
    candidate = [score("m-b", 1, 1.0), score("m-b", 2, 1.0)]
    (comparison,) = parity_report(
        spec(), "hash", {"reference": reference, "candidate": candidate}, GATE, PROVIDERS
    ).comparisons
    assert comparison.model_dump() == {
        "reference": "reference",
        "candidate": "candidate",
        "shared_cases": 0,
        "left_out": {"reference": 2, "candidate": 1},
        "difference": None,
        "low": None,
        "high": None,
        "mcnemar_reference_only": 0,
        "mcnemar_candidate_only": 0,
        "mcnemar_p": None,
        "verdict": "inconclusive",
        "reasons": ("no case was scored in both arms",),
        "categories": (),
    }


def test_every_field_of_a_comparison_and_its_category_rows() -> None:
    reference = [score("m-a", i, 1.0) for i in range(6)]
    reference += [score("m-a", 10 + i, 1.0, category="multi_step") for i in range(2)]
    reference.append(score("m-a", 20, 1.0, category="abstention"))
    candidate = [score("m-b", i, 0.0 if i < 3 else 1.0) for i in range(6)]
    candidate += [score("m-b", 10, 1.0, category="multi_step")]
    candidate += [score("m-b", 11, 0.5, category="multi_step", seed=s) for s in (0, 1)]
    candidate.append(score("m-b", 20, 1.0, category="catalog_lookup"))  # the reference's wins
    candidate.append(score("m-b", 30, 1.0))  # not in the reference: left out
    wide = spec(
        kind="non_inferiority", margin=5.0, category_rule={"max_difference": 20.0, "min_cases": 2}
    )
    report = parity_report(
        wide, "hash", {"reference": reference, "candidate": candidate}, GATE, PROVIDERS
    )
    (comparison,) = report.comparisons
    differences = [-100.0] * 3 + [0.0] * 3 + [0.0, -50.0] + [0.0]
    low, high = bootstrap(differences, 0.95)
    assert comparison.shared_cases == 9
    assert comparison.left_out == {"reference": 1, "candidate": 0}
    assert comparison.difference == pytest.approx(mean(differences))
    assert (comparison.low, comparison.high) == (low, high)
    # c011's 0.5 on both seeds passes the majority vote
    assert (comparison.mcnemar_reference_only, comparison.mcnemar_candidate_only) == (3, 0)
    assert comparison.mcnemar_p == pytest.approx(binomtest(0, 3, 0.5).pvalue)
    assert comparison.verdict == "refuted"
    assert comparison.reasons == (
        f"Δ {mean(differences):+.2f} points, 95% interval [{low:+.2f}, {high:+.2f}] against "
        "margin 5 (non_inferiority)",
    )
    rows = {row.category: row for row in comparison.categories}
    assert [row.category for row in comparison.categories] == [
        "royalty_math",
        "multi_step",
        "abstention",
    ]
    math_low, math_high = bootstrap(differences[:6], 0.95)
    assert rows["royalty_math"].model_dump() == {
        "category": "royalty_math",
        "shared": 6,
        "reference": 100.0,
        "candidate": 50.0,
        "difference": -50.0,
        "low": math_low,
        "high": math_high,
        "small_n": False,
        "breaks_rule": True,
    }
    assert rows["multi_step"].model_dump() == {
        "category": "multi_step",
        "shared": 2,
        "reference": 100.0,
        "candidate": 75.0,
        "difference": -25.0,
        "low": -50.0,
        "high": 0.0,
        "small_n": False,
        "breaks_rule": True,
    }
    assert (rows["abstention"].shared, rows["abstention"].small_n) == (1, True)
    assert not rows["abstention"].breaks_rule


def test_a_broken_category_rule_and_unhealed_errors_give_their_reasons() -> None:
    reference = [score("m-a", i, 1.0) for i in range(200)]
    reference += [score("m-a", 500 + i, 1.0, category="multi_step") for i in range(6)]
    candidate = [score("m-b", i, 1.0) for i in range(200)]
    candidate += [
        score("m-b", 500 + i, 0.0 if i == 0 else 1.0, category="multi_step") for i in range(6)
    ]
    wide = spec(margin=5.0)
    (broken,) = parity_report(
        wide, "hash", {"reference": reference, "candidate": candidate}, GATE, PROVIDERS
    ).comparisons
    assert broken.verdict == "refuted"
    assert broken.reasons[1:] == (
        "category rule broken in multi_step (more than 10 points, n ≥ 5)",
    )
    unheard = [*reference, score("m-a", 900, None, status="harness_error")]
    (unhealed,) = parity_report(
        wide, "hash", {"reference": unheard, "candidate": candidate[:200]}, GATE, PROVIDERS
    ).comparisons
    assert unhealed.verdict == "inconclusive"
    assert unhealed.reasons[1:] == (
        "unhealed infrastructure errors (‡) in reference: an arm with cases never heard "
        "cannot confirm anything; re-run the experiment to heal them",
    )


def test_mcnemar_counts_pass_by_majority_vote_per_case_in_each_direction() -> None:
    reference = [score("m-a", i, 1.0) for i in range(40)]
    candidate = [score("m-b", i, 1.0) for i in range(40)]
    reference[0] = score("m-a", 0, 0.0)  # candidate only
    reference[1] = score("m-a", 1, 0.0)  # candidate only
    candidate[2] = score("m-b", 2, 0.0)  # reference only
    candidate[3] = score("m-b", 3, 0.25)  # reference only: a quarter does not pass
    candidate[4] = score("m-b", 4, 0.5)  # a half passes
    (comparison,) = parity_report(
        spec(margin=20.0),
        "hash",
        {"reference": reference, "candidate": candidate},
        GATE,
        PROVIDERS,
    ).comparisons
    assert (comparison.mcnemar_reference_only, comparison.mcnemar_candidate_only) == (2, 2)
    assert comparison.mcnemar_p == pytest.approx(binomtest(2, 4, 0.5).pvalue)
    assert comparison.verdict == "confirmed"


def test_the_report_carries_the_spec_and_every_arm_and_an_arm_without_scores_is_refused() -> None:
    ablation = spec(design="ablation", candidate=None, ablate=["stall_bounce", "iteration_cap"])
    rows = [score("m-a", i, 1.0) for i in range(3)]
    scores = {name: rows for name in ablation.arms()}
    report = parity_report(ablation, "h" * 64, scores, GATE, {"m-a": "simulated"})
    assert report.model_dump(exclude={"arms", "comparisons"}) == {
        "experiment_id": "unit-parity",
        "spec_hash": "h" * 64,
        "kind": "equivalence",
        "margin": 2.0,
        "confidence": 0.95,
        "primary_metric": "case_score",
        "fixture_id": "fx-unit",
        "design": "ablation",
    }
    assert [a.arm for a in report.arms] == ["reference", "stall_bounce_off", "iteration_cap_off"]
    assert [(c.reference, c.candidate) for c in report.comparisons] == [
        ("reference", "stall_bounce_off"),
        ("reference", "iteration_cap_off"),
    ]
    assert report.arms[1].label == "a, stall_bounce off"
    with pytest.raises(
        ValueError,
        match=r"^experiment unit-parity: no scores for arm\(s\) iteration_cap_off, "
        r"stall_bounce_off$",
    ):
        parity_report(ablation, "h", {"reference": rows}, GATE, {"m-a": "simulated"})


def test_the_reports_folder_is_under_the_var_folder() -> None:
    assert experiment_reports_dir() == paths.var_dir() / "reports" / "experiments"


MARKDOWN_SPEC = {
    "candidate": {"label": "b", "model": "m-b", "lane": "model", "seeds": [0, 1]},
    "falsifiers": ["the interval reaches the margin", "a category breaks the rule"],
}


def markdown_report() -> tuple[ExperimentSpec, str]:
    experiment = spec(**MARKDOWN_SPEC)
    reference = [score("m-a", i, 1.0) for i in range(3)]
    reference += [score("m-a", 9, 1.0, category="multi_step")]
    reference.append(score("m-a", 10, None, status="budget_stopped"))
    candidate = [
        score("m-b", 0, 0.0, seed=0),
        score("m-b", 0, 1.0, seed=1),
        score("m-b", 1, 0.5),
        score("m-b", 2, None, status="judge_error"),
        score("m-b", 9, 1.0, category="multi_step"),
    ]
    report = parity_report(
        experiment,
        "0123456789abcdef0123",
        {"reference": reference, "candidate": candidate},
        GATE,
        {"m-a": "simulated", "m-b": "openai"},
    )
    return experiment, report_markdown(experiment, report)


def test_the_report_markdown_line_by_line() -> None:
    _, text = markdown_report()
    gate = gate_markdown(
        [
            evaluate_gate(
                summarize_lane(
                    "product",
                    "m-a",
                    [score("m-a", i, 1.0) for i in range(3)]
                    + [score("m-a", 9, 1.0, category="multi_step")]
                    + [score("m-a", 10, None, status="budget_stopped")],
                ),
                None,
                GATE,
            )
        ]
    )
    assert text == "\n".join(
        [
            "# Experiment unit-parity: unit",
            "",
            "**Hypothesis (registered):** the two arms score the same per case",
            "",
            "Spec hash `0123456789abcdef`, fixture set `fx-unit`, primary metric `case_score` "
            "in points, equivalence with margin 2, 95% bootstrap intervals clustered by case.",
            "",
            "Falsifiers: the interval reaches the margin; a category breaks the rule",
            "",
            "Sample size: 40 cases × 1 seed(s): every case of the unit set",
            "",
            "## Arms",
            "",
            "| arm | configuration | lane | seeds | cases | n scored | mean | ‡ | † | gate |",
            "|---|---|---|---|---:|---:|---:|---:|---:|---|",
            "| reference | a (m-a, simulated provider) | product | 0 | 5 | 4 | 100.0 | 0 | 1 "
            "| passes |",
            "| candidate | b (m-b, provider openai) | model | 0,1 | 4 | 4 | 66.7 | 1 | 0 | – |",
            "",
            "## candidate vs reference: **inconclusive** (undecided: the interval straddles ±2; "
            "more cases or seeds would decide)",
            "",
            "Paired over 3 shared cases (left out, never heard: reference 1, candidate 2). "
            "Δ = -33.3 points, interval [-50.0, +0.0] against ±2.",
            "",
            "McNemar (exact binomial, majority vote per case): reference only 1, candidate "
            "only 0, p = 1.",
            "",
            "- Δ -33.33 points, 95% interval [-50.00, +0.00] against margin 2 (equivalence)",
            "",
            "| category | n shared | reference | candidate | Δ | interval | note |",
            "|---|---:|---:|---:|---:|---|---|",
            "| royalty_math | 2 | 100.0 | 50.0 | -50.0 | [-50.0, -50.0] | small n: does not "
            "decide |",
            "| multi_step | 1 | 100.0 | 100.0 | +0.0 | [+0.0, +0.0] | small n: does not decide |",
            "",
            "## Each arm's own ship gate",
            "",
            "### reference",
            "",
            gate,
            "",
            "### candidate",
            "",
            "not applicable: the ship gate reads the product lane only",
            "",
        ]
    )


def test_the_markdown_of_a_failing_gate_a_broken_rule_and_nothing_shared() -> None:
    strict = GateConfig(candidates=("m-a",), core_required=5, max_category_drop=3.0)
    reference = [score("m-a", i, 1.0) for i in range(200)]
    reference += [score("m-a", 500 + i, 1.0, category="multi_step") for i in range(6)]
    candidate = [score("m-b", i, 1.0) for i in range(200)]
    candidate += [
        score("m-b", 500 + i, 0.0 if i < 2 else 1.0, category="multi_step") for i in range(6)
    ]
    for kind, against in (("non_inferiority", "−5"), ("superiority", "+5")):
        experiment = spec(kind=kind, margin=5.0)
        report = parity_report(
            experiment,
            "hash",
            {"reference": reference, "candidate": candidate},
            strict,
            PROVIDERS,
        )
        text = report_markdown(experiment, report)
        assert f"{kind.replace('_', '-')} with margin 5, 95% bootstrap" in text
        assert f"] against {against}.\n" in text
        assert "| reference | a (m-a, simulated provider) | product | 0 | 206 | 206 | " in text
        assert "| 0 | 0 | FAILS |\n" in text
        assert "| multi_step | 6 | 100.0 | 66.7 | -33.3 | [" in text
        assert "] | **breaks the category rule** |\n" in text
    lone = parity_report(
        spec(),
        "hash",
        {"reference": [score("m-a", 0, 1.0)], "candidate": [score("m-b", 1, 1.0)]},
        GATE,
        PROVIDERS,
    )
    text = report_markdown(spec(), lone)
    assert (
        "Paired over 0 shared cases (left out, never heard: reference 1, candidate 1). "
        "Δ = – points, interval [–, –] against ±2.\n"
    ) in text
    assert "candidate only 0, p = –.\n\n- no case was scored in both arms\n" in text


def test_an_arms_gate_compares_with_the_models_accepted_baseline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rows = [score("m-a", i, 1.0) for i in range(3)]
    baseline = Baseline(model="m-a", fixture_id="fx-unit", seeds=(0,), categories={"all": 100.0})
    (tmp_path / "m-a.yaml").write_text(yaml.safe_dump(baseline.model_dump(mode="json")))
    monkeypatch.setenv("EVALP_BASELINES_DIR", str(tmp_path))
    summary = arm_summary("reference", spec().reference, rows, GATE, "simulated")
    assert "no baseline yet" not in summary.gate
    assert "| m-a | no_category_drop | yes | every category within 3.0 points" in summary.gate
    expected = evaluate_gate(summarize_lane("product", "m-a", rows), baseline, GATE)
    assert summary.gate == gate_markdown([expected])


def test_the_interval_on_spread_differences_is_the_published_bootstrap_exactly() -> None:
    spread = [float(x) for x in np.linspace(-97.3, 88.1, 31)]
    rng = np.random.default_rng(20261130)
    means = np.asarray(spread)[rng.integers(0, 31, size=(4000, 31))].mean(axis=1)
    for confidence in (0.9, 0.95, 0.6):
        tail = 100 * (1 - confidence) / 2
        assert bootstrap(spread, confidence) == tuple(np.percentile(means, [tail, 100 - tail]))


def test_an_equivalence_category_better_by_more_than_the_rule_breaks_it_too() -> None:
    reference = [score("m-a", 500 + i, 0.0, category="multi_step") for i in range(6)]
    candidate = [score("m-b", 500 + i, 0.0 if i else 1.0, category="multi_step") for i in range(6)]
    for kind, breaks in (("equivalence", True), ("non_inferiority", False)):
        (comparison,) = parity_report(
            spec(kind=kind, margin=50.0),
            "hash",
            {"reference": reference, "candidate": candidate},
            GATE,
            PROVIDERS,
        ).comparisons
        (row,) = comparison.categories
        assert row.difference == pytest.approx(100 / 6)
        assert row.breaks_rule is breaks, f"better by 16.7 against a rule of 10, {kind}"


def test_two_broken_categories_and_two_unhealed_arms_are_listed_with_commas() -> None:
    reference = [score("m-a", i, 1.0) for i in range(200)]
    candidate = [score("m-b", i, 1.0) for i in range(200)]
    for offset, category in ((500, "multi_step"), (600, "abstention")):
        reference += [score("m-a", offset + i, 1.0, category=category) for i in range(6)]
        candidate += [
            score("m-b", offset + i, 0.0 if i == 0 else 1.0, category=category) for i in range(6)
        ]
    wide = spec(margin=5.0)
    (broken,) = parity_report(
        wide, "hash", {"reference": reference, "candidate": candidate}, GATE, PROVIDERS
    ).comparisons
    assert broken.reasons[1] == (
        "category rule broken in multi_step, abstention (more than 10 points, n ≥ 5)"
    )
    both = {
        "reference": [*reference[:200], score("m-a", 900, None, status="infra_error")],
        "candidate": [*candidate[:200], score("m-b", 901, None, status="judge_error")],
    }
    (unhealed,) = parity_report(wide, "hash", both, GATE, PROVIDERS).comparisons
    assert unhealed.reasons[1].startswith(
        "unhealed infrastructure errors (‡) in reference, candidate: an arm"
    )


def test_the_primary_metric_majority_pass_pairs_each_cases_vote() -> None:
    reference = [score("m-a", i, 0.5) for i in range(10)]  # every case passes its vote
    candidate = [score("m-b", i, 0.75) for i in range(10)]  # and here too
    by_vote = spec(primary_metric="majority_pass")
    (comparison,) = parity_report(
        by_vote, "hash", {"reference": reference, "candidate": candidate}, GATE, PROVIDERS
    ).comparisons
    assert (comparison.difference, comparison.low, comparison.high) == (0.0, 0.0, 0.0)
    assert comparison.verdict == "confirmed"
    (by_score,) = parity_report(
        spec(), "hash", {"reference": reference, "candidate": candidate}, GATE, PROVIDERS
    ).comparisons
    assert by_score.difference == 25.0


def test_the_markdown_signs_a_gain_and_leaves_a_deciding_rows_note_empty() -> None:
    reference = [score("m-a", i, 0.0 if i == 0 else 1.0) for i in range(6)]
    candidate = [score("m-b", i, 1.0) for i in range(6)]
    experiment = spec(margin=50.0, category_rule={"max_difference": 20.0, "min_cases": 5})
    report = parity_report(
        experiment, "hash", {"reference": reference, "candidate": candidate}, GATE, PROVIDERS
    )
    (comparison,) = report.comparisons
    text = report_markdown(experiment, report)
    assert (
        f"Δ = +16.7 points, interval [{comparison.low:+.1f}, {comparison.high:+.1f}] against ±50."
        in text
    )
    assert comparison.low is not None and comparison.low >= 0.0
    assert "| royalty_math | 6 | 83.3 | 100.0 | +16.7 | [+0.0, +50.0] |  |" in text


def test_a_verdict_is_said_as_what_it_means_for_the_hypothesis() -> None:
    """Issue 28: "REFUTED" in the ablation read as a failure where it means the guard
    matters."""
    from eval_pipeline.experiments.parity import verdict_meaning

    assert verdict_meaning("equivalence", "ablation", 3.0, "refuted") == (
        "guard matters: the difference lies outside ±3"
    )
    assert verdict_meaning("equivalence", "ablation", 3.0, "confirmed") == (
        "guard makes no difference: the interval lies within ±3"
    )
    assert verdict_meaning("equivalence", "parity", 2.0, "confirmed") == (
        "equivalent: the interval lies within ±2"
    )
    assert verdict_meaning("non_inferiority", "parity", 1.5, "refuted") == (
        "worse: the interval lies below −1.5"
    )
    assert verdict_meaning("superiority", "parity", 1.0, "inconclusive").startswith(
        "undecided: the interval straddles +1"
    )
