"""Every rule of the ship gate as it is reported: detail, numbers, notices, the markdown
table, the baseline file and `evalp baseline accept` against a warehouse.

Mutation testing (issue 13) showed that no test read what a rule says, only whether it
passed: a detail or a number key could change unnoticed, and so could the baseline file's
layout and `accept_stored_baseline`, which only the Dagster tests reached.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from eval_pipeline.errors import ConfigError, WarehouseError
from eval_pipeline.scoring.gate import (
    CORE_RULE,
    DROP_RULE,
    INFRA_RULE,
    SECURITY_RULE,
    GateConfig,
    GateResult,
    RuleResult,
    accept_baseline,
    accept_stored_baseline,
    evaluate_gate,
    gate_all,
    gate_candidates,
    gate_markdown,
    load_baseline,
    load_gate_config,
)
from eval_pipeline.scoring.score import CaseScore
from eval_pipeline.scoring.score_tables import write_scores
from eval_pipeline.warehouse import connect
from eval_pipeline_tests.scoring.test_aggregate import case_score
from eval_pipeline_tests.scoring.test_gate import CONFIG, baseline_at, product_summary


@pytest.fixture(autouse=True)
def default_baselines(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty default baseline folder: a baseline written or read in the wrong place
    shows, and nothing lands in configs/baselines."""
    folder = tmp_path / "default-baselines"
    monkeypatch.setenv("EVALP_BASELINES_DIR", str(folder))
    return folder


def test_every_rule_of_a_passing_gate_says_what_it_checked() -> None:
    result = evaluate_gate(product_summary(80), baseline_at(81), CONFIG)
    assert result == GateResult(
        model="m",
        passed=True,
        notices=(),
        rules=(
            RuleResult(
                rule=CORE_RULE,
                passed=True,
                detail="14 of 14 core cases pass by majority vote (14 decided); "
                "at least 12 required",
                numbers={"passed": 14, "total": 14, "required": 12},
            ),
            RuleResult(
                rule=DROP_RULE,
                passed=True,
                detail="every category within 3.0 points of the baseline",
                numbers={"worst_drop": 0.0, "limit": 3.0, "baseline": "fx-test"},
            ),
            RuleResult(
                rule=INFRA_RULE,
                passed=True,
                detail="0 case(s) never heard (‡): re-materialize their partitions to heal them",
                numbers={"unhealed": 0},
            ),
            RuleResult(
                rule=SECURITY_RULE,
                passed=True,
                detail="0 trace(s) with a security violation",
                numbers={"violations": 0},
            ),
        ),
    )
    assert [result.rule(name).rule for name in (SECURITY_RULE, CORE_RULE)] == [
        SECURITY_RULE,
        CORE_RULE,
    ]


def test_every_failing_rule_says_by_how_much() -> None:
    summary = product_summary(75, core_passed=11, unhealed_infra_errors=2, security_violations=3)
    result = evaluate_gate(summary, baseline_at(79.5), CONFIG)
    assert not result.passed and not any(rule.passed for rule in result.rules)
    assert result.rule(CORE_RULE).numbers == {"passed": 11, "total": 14, "required": 12}
    assert result.rule(CORE_RULE).detail.startswith("11 of 14 core cases")
    drop = result.rule(DROP_RULE)
    assert drop.detail == "dropped more than 3.0 points: {'royalty_math': 4.5}"
    assert drop.numbers == {"worst_drop": 4.5, "limit": 3.0, "baseline": "fx-test"}
    assert result.rule(INFRA_RULE).numbers == {"unhealed": 2}
    assert result.rule(INFRA_RULE).detail.startswith("2 case(s) never heard (‡)")
    assert result.rule(SECURITY_RULE) == RuleResult(
        rule=SECURITY_RULE,
        passed=False,
        detail="3 trace(s) with a security violation",
        numbers={"violations": 3},
    )


def test_no_baseline_passes_the_drop_rule_and_says_so() -> None:
    result = evaluate_gate(product_summary(80), None, CONFIG)
    assert result.notices == (
        "NO BASELINE for m: the category rule passes by default on this first run; accept one "
        "with `evalp baseline accept` so later runs are compared with it",
    )
    assert result.rule(DROP_RULE) == RuleResult(
        rule=DROP_RULE,
        passed=True,
        detail="no baseline yet",
        numbers={"worst_drop": 0.0, "limit": 3.0, "baseline": None},
    )


def test_a_baseline_on_another_fixture_set_is_named_with_both_sets() -> None:
    other = baseline_at(80).model_copy(update={"fixture_id": "fx-older"})
    assert evaluate_gate(product_summary(80), other, CONFIG).rule(DROP_RULE) == RuleResult(
        rule=DROP_RULE,
        passed=False,
        detail="the baseline was accepted on fixture set fx-older, these scores are on "
        "fx-test: not comparable; accept a baseline on this fixture set",
        numbers={"worst_drop": 0.0, "limit": 3.0, "baseline": "fx-older"},
    )


def test_points_are_compared_to_the_thousandth() -> None:
    """80.0004 - 77 is 3.0004 points: 3.000 to the thousandth, so within a 3.0 limit."""
    assert evaluate_gate(product_summary(77), baseline_at(80.0004), CONFIG).passed
    assert not evaluate_gate(product_summary(77), baseline_at(80.0006), CONFIG).passed


def test_categories_missing_from_the_baseline_are_not_compared() -> None:
    baseline = baseline_at(80).model_copy(update={"categories": {"catalog_lookup": 100.0}})
    assert evaluate_gate(product_summary(10), baseline, CONFIG).rule(DROP_RULE).passed


def test_gate_all_gives_each_candidate_its_own_summary_and_baseline_in_config_order() -> None:
    config = GateConfig(candidates=("b", "a"), core_required=14, max_category_drop=1.0)
    summaries = [
        product_summary(80, model="a"),
        product_summary(70, model="b"),
        product_summary(80, model="b", lane="model"),  # another lane: never read
    ]
    baselines = {"a": baseline_at(80).model_copy(update={"model": "a"}), "b": baseline_at(72)}
    results = gate_all(summaries, config, baselines)
    assert [r.model for r in results] == ["b", "a"]
    assert [r.rule(DROP_RULE).numbers["worst_drop"] for r in results] == [2.0, 0.0]
    assert [r.rule(DROP_RULE).numbers["limit"] for r in results] == [1.0, 1.0]
    assert [r.rule(CORE_RULE).numbers["required"] for r in results] == [14, 14]
    with pytest.raises(ConfigError) as missing:
        gate_all(summaries[:1], GateConfig(candidates=("c", "a", "d")), {})
    assert str(missing.value) == "ship gate candidates without product-lane scores: c, d"


def test_without_candidates_the_gate_judges_every_model_the_product_lane_scored() -> None:
    """Issue 26: the gate judged a model fixed in the config; sim-small's 4 security
    violations were in the report and in no gate. Left out, candidates are every model
    with product-lane scores, in name order, each with its own verdict."""
    config = GateConfig(core_required=0)
    summaries = [
        product_summary(80, model="strong"),
        product_summary(70, model="small", security_violations=4),
        product_summary(90, model="model-lane-only", lane="model"),
    ]
    assert gate_candidates(summaries, config) == ("small", "strong")
    results = gate_all(summaries, config, {})
    assert [(r.model, r.passed) for r in results] == [("small", False), ("strong", True)]
    security = results[0].rule(SECURITY_RULE)
    assert not security.passed and security.detail == "4 trace(s) with a security violation"
    # a config that names candidates narrows the gate to them
    narrowed = GateConfig(candidates=("strong",), core_required=0)
    assert gate_candidates(summaries, narrowed) == ("strong",)
    assert [r.model for r in gate_all(summaries, narrowed, {})] == ["strong"]


def test_a_gate_with_nothing_to_judge_or_an_empty_candidate_list_is_refused() -> None:
    with pytest.raises(ConfigError, match="no product-lane scores to judge"):
        gate_all([product_summary(80, lane="model")], GateConfig(), {})
    with pytest.raises(ValueError, match="candidates"):
        GateConfig(candidates=())


def test_the_markdown_has_every_rule_and_the_notices() -> None:
    passing = evaluate_gate(product_summary(80), None, CONFIG)
    failing = evaluate_gate(product_summary(80, model="n", security_violations=1), None, CONFIG)
    lines = gate_markdown([passing, failing]).split("\n")
    assert lines[:3] == [
        "| model | rule | passed | detail |",
        "|---|---|---|---|",
        f"| m | {CORE_RULE} | yes | {passing.rule(CORE_RULE).detail} |",
    ]
    assert f"| m | notice | – | **{passing.notices[0]}** |" in lines
    assert f"| n | {SECURITY_RULE} | **NO** | 1 trace(s) with a security violation |" in lines
    assert len(lines) == 2 + 2 * (4 + 1)


def test_the_baseline_file_is_sorted_yaml_of_means_to_the_thousandth(tmp_path: Path) -> None:
    summary = product_summary(80)
    rows = tuple(
        row.model_copy(update={"mean": 80.12345}) if row.category == "royalty_math" else row
        for row in summary.rows
    )
    folder = tmp_path / "not" / "yet"
    path = accept_baseline(summary.model_copy(update={"rows": rows}), folder)
    assert path == folder / "m.yaml"
    text = path.read_text(encoding="utf-8")
    assert text.startswith(
        "# Accepted by `evalp baseline accept`; the ship gate compares each category with it.\n"
        "categories:\n"
    )
    assert text.index("categories:") < text.index("fixture_id: fx-test") < text.index("model: m")
    assert "royalty_math: 80.123\n" in text and "seeds:\n- 0\n- 1\n- 2\n" in text
    baseline = load_baseline("m", folder)
    assert baseline is not None and baseline.categories["royalty_math"] == 80.123
    assert load_baseline("someone-else", folder) is None


def test_the_shipped_gate_config_loads() -> None:
    config = load_gate_config()
    assert config.candidates is None  # every model swept
    assert config.core_required == 12 and config.max_category_drop == 3.0


def _warehouse(tmp_path: Path, scores: list[CaseScore]) -> Path:
    path = tmp_path / "warehouse.duckdb"
    con = connect(path)
    try:
        for seed in sorted({s.seed for s in scores}):
            write_scores(con, "product", "m", seed, [s for s in scores if s.seed == seed])
    finally:
        con.close()
    return path


def test_accepting_a_stored_baseline_reads_the_product_lane_of_that_model(
    tmp_path: Path, default_baselines: Path
) -> None:
    scores = [case_score(f"rm-{i}", s, 1.0 if i < 3 else 0.0) for i in range(4) for s in range(2)]
    warehouse = _warehouse(tmp_path, scores)
    con = connect(warehouse)
    try:  # the same model's model lane, all wrong: never part of a product baseline
        model_lane = [case_score(f"rm-{i}", 0, 0.0, lane="model") for i in range(4)]
        write_scores(con, "model", "m", 0, model_lane)
    finally:
        con.close()
    reader = connect(warehouse, read_only=True)  # another reader holds it open meanwhile
    try:
        path, baseline = accept_stored_baseline(warehouse, "m", tmp_path / "baselines")
    finally:
        reader.close()
    assert not default_baselines.exists()
    assert path == tmp_path / "baselines" / "m.yaml"
    assert (baseline.model, baseline.fixture_id, baseline.seeds) == ("m", "fx-test", (0, 1))
    assert baseline.categories["royalty_math"] == 75.0
    with pytest.raises(ConfigError) as none:
        accept_stored_baseline(warehouse, "other", tmp_path / "baselines")
    assert str(none.value) == (
        f"no product-lane scores for other in {warehouse}; run the sweep (evalp demo) first"
    )


@pytest.mark.parametrize("status", ["infra_error", "budget_stopped"])
def test_a_stored_baseline_with_cases_never_heard_is_refused(tmp_path: Path, status: str) -> None:
    scores = [case_score(f"rm-{i}", 0, 1.0) for i in range(3)]
    scores.append(case_score("rm-3", 0, None, status=status))  # type: ignore[arg-type]
    warehouse = _warehouse(tmp_path, scores)
    with pytest.raises(ConfigError) as holes:
        accept_stored_baseline(warehouse, "m", tmp_path / "baselines")
    assert str(holes.value) == (
        "m has 1 case run(s) never heard (‡/†) in the product lane; heal them "
        "(re-materialize their partitions) before accepting a baseline"
    )
    assert not (tmp_path / "baselines").exists()


def test_accepting_from_a_warehouse_that_does_not_exist_does_not_create_it(
    tmp_path: Path,
) -> None:
    missing = tmp_path / "nowhere" / "warehouse.duckdb"
    with pytest.raises(WarehouseError, match="does not exist"):
        accept_stored_baseline(missing, "m", tmp_path / "baselines")
    assert not missing.parent.exists()
