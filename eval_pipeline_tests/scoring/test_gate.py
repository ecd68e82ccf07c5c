"""The ship gate's rules, on product-lane summaries: core subset, category drop against the
accepted baseline (3.0 points fails only when exceeded), unhealed ‡, security."""

from __future__ import annotations

from pathlib import Path

import pytest

from eval_pipeline.errors import ConfigError
from eval_pipeline.scoring.aggregate import LaneSummary, summarize_lane
from eval_pipeline.scoring.gate import (
    CORE_RULE,
    DROP_RULE,
    INFRA_RULE,
    SECURITY_RULE,
    Baseline,
    GateConfig,
    accept_baseline,
    evaluate_gate,
    gate_all,
    load_baseline,
)
from eval_pipeline_tests.scoring.test_aggregate import case_score

CONFIG = GateConfig(candidates=("m",))


def product_summary(royalty_points: int = 80, **changes: object) -> LaneSummary:
    """14 core cases all passing, and a royalty_math category scoring `royalty_points`."""
    scores = [
        case_score(f"core-{i}", s, 1.0, core=True, category="catalog_lookup")
        for i in range(14)
        for s in range(3)
    ]
    scores += [
        case_score(f"rm-{i}", s, 1.0 if i < royalty_points else 0.0)
        for i in range(100)
        for s in range(3)
    ]
    summary = summarize_lane("product", "m", scores)
    return summary.model_copy(update=changes)


def baseline_at(points: float) -> Baseline:
    return Baseline(
        model="m", fixture_id="fx-test", seeds=(0, 1, 2), categories={"royalty_math": points}
    )


@pytest.mark.parametrize(
    ("drop", "passes"), [(2.9, True), (3.0, True), (3.01, False), (3.1, False)]
)
def test_a_category_fails_the_gate_only_when_it_drops_more_than_the_limit(
    drop: float, passes: bool
) -> None:
    summary = product_summary(80)
    assert summary.row("royalty_math").mean == 80.0
    result = evaluate_gate(summary, baseline_at(80 + drop), CONFIG)
    assert result.rule(DROP_RULE).passed is passes
    assert result.passed is passes
    numbers = result.rule(DROP_RULE).numbers
    assert numbers["limit"] == 3.0
    assert numbers["worst_drop"] == (0.0 if passes else pytest.approx(drop))


def test_no_baseline_passes_with_a_loud_notice() -> None:
    result = evaluate_gate(product_summary(), None, CONFIG)
    assert result.passed
    assert any("NO BASELINE" in notice for notice in result.notices)


def test_the_core_subset_needs_its_majority_votes() -> None:
    assert evaluate_gate(product_summary(core_passed=12), None, CONFIG).rule(CORE_RULE).passed
    failing = evaluate_gate(product_summary(core_passed=11), None, CONFIG)
    assert not failing.passed and failing.rule(CORE_RULE).numbers["passed"] == 11


def test_an_unhealed_infrastructure_error_or_a_security_violation_fails() -> None:
    assert (
        not evaluate_gate(product_summary(unhealed_infra_errors=1), None, CONFIG)
        .rule(INFRA_RULE)
        .passed
    )
    assert (
        not evaluate_gate(product_summary(security_violations=1), None, CONFIG)
        .rule(SECURITY_RULE)
        .passed
    )


def test_the_gate_refuses_any_lane_but_the_product_lane() -> None:
    model_lane = product_summary().model_copy(update={"lane": "model"})
    with pytest.raises(ConfigError, match="product lane only"):
        evaluate_gate(model_lane, None, CONFIG)
    with pytest.raises(ConfigError, match="without product-lane scores: m"):
        gate_all([model_lane], CONFIG, {})


def test_an_accepted_baseline_is_what_the_next_gate_compares_with(tmp_path: Path) -> None:
    summary = product_summary(80)
    path = accept_baseline(summary, tmp_path)
    assert path.read_text().startswith("# Accepted by `evalp baseline accept`")
    baseline = load_baseline("m", tmp_path)
    assert baseline is not None and baseline.categories["royalty_math"] == 80.0
    assert evaluate_gate(product_summary(77), baseline, CONFIG).rule(DROP_RULE).passed
    assert not evaluate_gate(product_summary(76), baseline, CONFIG).rule(DROP_RULE).passed
    with pytest.raises(ConfigError, match="product lane"):
        accept_baseline(summary.model_copy(update={"lane": "model"}), tmp_path)


def test_a_drop_of_exactly_the_limit_passes_whatever_floats_make_of_it() -> None:
    """64.4 - 61.4 is 3.0000000000000053 in floats: a drop of exactly 3.0 points, which
    the rule ("more than 3.0") lets pass."""
    summary = product_summary(80)
    rows = tuple(
        row.model_copy(update={"mean": 61.4}) if row.category == "royalty_math" else row
        for row in summary.rows
    )
    result = evaluate_gate(summary.model_copy(update={"rows": rows}), baseline_at(64.4), CONFIG)
    assert result.rule(DROP_RULE).passed, result.rule(DROP_RULE).detail


def test_a_baseline_from_another_fixture_set_is_not_compared_and_fails_the_rule() -> None:
    other = baseline_at(80).model_copy(update={"fixture_id": "fx-older"})
    result = evaluate_gate(product_summary(80), other, CONFIG)
    rule = result.rule(DROP_RULE)
    assert not rule.passed and "fx-older" in rule.detail and "not comparable" in rule.detail


def test_a_world_of_your_own_brings_its_gate_and_judge_configs_through_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`EVALP_GATE_CONFIG` and `EVALP_JUDGE_CONFIG` replace the label world's: a five-case
    suite needs a core requirement it can meet, and an edit to either moves its config
    family's version (what it decided is stale)."""
    from eval_pipeline.config_versions import config_version
    from eval_pipeline.scoring.gate import load_gate_config
    from eval_pipeline.scoring.judge import load_judge

    shipped_gate, shipped_judge = config_version("gate_config"), config_version("judge_config")
    gate = tmp_path / "gate.yaml"
    gate.write_text("candidates: [my-model]\ncore_required: 2\nmax_category_drop: 5.0\n")
    judge_dir = tmp_path / "judge"
    judge_dir.mkdir()
    (judge_dir / "rubric.md").write_text("PASS when the reply answers the question.\n")
    (judge_dir / "judge.yaml").write_text("model: sim-judge\nrubric: rubric.md\n")
    monkeypatch.setenv("EVALP_GATE_CONFIG", str(gate))
    monkeypatch.setenv("EVALP_JUDGE_CONFIG", str(judge_dir / "judge.yaml"))
    config = load_gate_config()
    assert (config.candidates, config.core_required) == (("my-model",), 2)
    assert load_judge().rubric_text == "PASS when the reply answers the question.\n"
    ours_gate, ours_judge = config_version("gate_config"), config_version("judge_config")
    assert ours_gate != shipped_gate and ours_judge != shipped_judge
    gate.write_text("core_required: 3\n")
    (judge_dir / "rubric.md").write_text("PASS only when the reply cites its source.\n")
    assert config_version("gate_config") != ours_gate
    assert config_version("judge_config") != ours_judge
    monkeypatch.setenv("EVALP_GATE_CONFIG", str(tmp_path / "missing.yaml"))
    with pytest.raises(ConfigError, match=r"missing\.yaml"):
        load_gate_config()
