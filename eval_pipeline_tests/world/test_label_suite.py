"""The label suite: its shape, its resolvers, its determinism, its tool calls."""

from __future__ import annotations

from collections import Counter
from decimal import Decimal

import polars as pl
import pytest

from eval_pipeline.fixtures.case import CATEGORIES, Case
from eval_pipeline.world import get_world_plugin
from eval_pipeline.world.base import AnswerKey, GeneratedWorld
from eval_pipeline.world.label import tools
from eval_pipeline.world.label.suite import RESOLVERS, LabelData, build_label_suite

REFERENCE_COUNTS = {
    "catalog_lookup": 15,
    "contract_terms": 20,
    "royalty_math": 25,
    "recoupment_state": 15,
    "cross_collateral": 8,
    "sql_analytics": 10,
    "reconciliation": 15,
    "multi_step": 12,
    "abstention": 10,
    "adversarial": 3,
}


@pytest.fixture(scope="module")
def small_world() -> tuple[GeneratedWorld, AnswerKey]:
    plugin = get_world_plugin("label")
    world = plugin.generate(seed=11, scale=0.05)
    return world, plugin.answer_key(world)


@pytest.fixture(scope="module")
def suite(small_world: tuple[GeneratedWorld, AnswerKey]) -> list[Case]:
    world, answer_key = small_world
    return get_world_plugin("label").build_suite(world, answer_key)


def test_suite_has_reference_shape(suite: list[Case]) -> None:
    counts = Counter(case.category for case in suite)
    assert dict(counts) == REFERENCE_COUNTS
    assert set(counts) == set(CATEGORIES)
    assert len(suite) == 133
    assert sum(case.core for case in suite) == 14
    assert len({case.case_id for case in suite}) == len(suite)


def test_every_expected_value_comes_from_its_resolver(
    suite: list[Case], small_world: tuple[GeneratedWorld, AnswerKey]
) -> None:
    world, answer_key = small_world
    data = LabelData(world=world.tables, truth=answer_key.tables)
    for case in suite:
        assert RESOLVERS[case.resolver](data, case.params) == case.expected, case.case_id


def test_money_answers_are_exact_cents(suite: list[Case]) -> None:
    for case in suite:
        if case.answer_kind == "money" and case.params.get("currency") != "JPY":
            assert Decimal(case.expected).as_tuple().exponent == -2, case.case_id


def test_multi_step_payload_sums_to_the_expected_total(suite: list[Case]) -> None:
    for case in (c for c in suite if c.category == "multi_step"):
        assert case.expected_payload is not None
        total = sum(Decimal(p["amount"]) for p in case.expected_payload["payouts"])
        assert total == Decimal(case.expected)


def test_abstention_subjects_do_not_exist(
    suite: list[Case], small_world: tuple[GeneratedWorld, AnswerKey]
) -> None:
    names = set(small_world[0].tables["artists"]["name"].to_list())
    abstentions = [c for c in suite if c.category == "abstention"]
    assert all(c.expected == "ABSTAIN" for c in abstentions)
    assert {
        c.params["artist_name"] for c in abstentions if "artist_name" in c.params
    } & names == set()
    assert any(c.template == "false_premise_clause" for c in abstentions)


def test_borderline_lines_are_asked_and_expected_unflagged(
    suite: list[Case], small_world: tuple[GeneratedWorld, AnswerKey]
) -> None:
    anomalies = small_world[1].tables["anomalies"]
    borderline = {str(i) for i in anomalies.filter(pl.col("borderline"))["line_id"].to_list()}
    asked = {
        c.params["line_id"]: c.expected for c in suite if c.template == "line_should_be_flagged"
    }
    assert borderline <= set(asked)
    assert all(asked[line_id] == "NO" for line_id in borderline)
    assert "YES" in asked.values()


def test_adversarial_cases_target_the_canary_clause(
    suite: list[Case], small_world: tuple[GeneratedWorld, AnswerKey]
) -> None:
    canary = small_world[1].tables["canary"].row(0, named=True)
    for case in (c for c in suite if c.category == "adversarial"):
        assert case.expected_first_call is not None
        assert case.expected_first_call.arguments["contract_id"] == canary["contract_id"]
        assert "injection_not_obeyed" in case.trace_checks
        assert canary["token"] not in case.prompt


def test_expected_first_calls_name_offered_tools_with_schema_arguments(suite: list[Case]) -> None:
    specs = {spec.name: spec for spec in tools.LABEL_TOOLS}
    for case in suite:
        call = case.expected_first_call
        assert call is not None, case.case_id
        spec = specs[call.name]
        properties = spec.input_schema["properties"]
        for name, value in call.arguments.items():
            assert name in properties, (case.case_id, name)
            expected_type = {"string": str, "integer": int}[properties[name]["type"]]
            assert isinstance(value, expected_type), (case.case_id, name)


def test_suite_is_deterministic_and_seed_sensitive(
    small_world: tuple[GeneratedWorld, AnswerKey], suite: list[Case]
) -> None:
    world, answer_key = small_world
    again = build_label_suite(world.tables, answer_key.tables, world.seed)
    assert [c.canonical_json() for c in again] == [c.canonical_json() for c in suite]
    other = build_label_suite(world.tables, answer_key.tables, world.seed + 1)
    assert [c.params for c in other] != [c.params for c in suite]


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_statement_totals_only_ask_single_currency_statements(seed: int) -> None:
    """A statement holding a line in another currency has no total in its own currency;
    with 6 such statements of 72, about a third of seeds would pick one if allowed."""
    plugin = get_world_plugin("label")
    world = plugin.generate(seed=seed, scale=0.02)
    suite = plugin.build_suite(world, plugin.answer_key(world))
    lines = world.tables["statement_lines"]
    for case in (c for c in suite if c.template == "statement_total"):
        own = lines.filter(pl.col("statement_id") == case.params["statement_id"])
        assert set(own["currency"].to_list()) <= {case.params["currency"]}, case.case_id
