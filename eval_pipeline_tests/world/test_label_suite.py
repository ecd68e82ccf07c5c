"""The label suite: its shape, its discrimination, its fairness, its determinism, its tools.

The expected answers themselves are checked by an independent oracle (test_oracle.py);
these tests check what the suite promises about its cases.
"""

from __future__ import annotations

import re
from collections import Counter
from decimal import Decimal
from pathlib import Path

import polars as pl
import pytest

from eval_pipeline.cases.case import Case
from eval_pipeline.paths import PROJECT_ROOT
from eval_pipeline.providers.labels import tool_call_problem
from eval_pipeline.providers.types import ToolCall, ToolSpec
from eval_pipeline.world import get_world_plugin
from eval_pipeline.world.base import AnswerKey, GeneratedWorld
from eval_pipeline.world.label import tools
from eval_pipeline.world.label.rulebook import MISREADINGS, MISREADINGS_BY_ID, RULE_IDS
from eval_pipeline.world.label.suite.select import COVERAGE
from eval_pipeline.world.label.versions import CATEGORIES

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
RULES_DOC = PROJECT_ROOT / "docs" / "royalty-rules.md"


@pytest.fixture(scope="session")
def suite(label_world: GeneratedWorld, label_key: AnswerKey) -> list[Case]:
    return get_world_plugin("label").build_suite(label_world, label_key)


def test_suite_has_reference_shape(suite: list[Case]) -> None:
    counts = Counter(case.category for case in suite)
    assert dict(counts) == REFERENCE_COUNTS
    assert set(counts) == set(CATEGORIES)
    assert len(suite) == 133
    assert sum(case.core for case in suite) == 14
    assert len({case.case_id for case in suite}) == len(suite)


def documented_rules() -> list[str]:
    """Rule ids as docs/royalty-rules.md numbers them (`**R1 ...**`, `**F1 ...**`)."""
    return re.findall(r"^\d+\. \*\*([RF]\d+) ", RULES_DOC.read_text(encoding="utf-8"), re.M)


def test_every_documented_rule_is_exercised_by_three_cases(suite: list[Case]) -> None:
    """A rule counts as exercised by a case when one of its misreadings changes the answer."""
    documented = documented_rules()
    assert documented == list(RULE_IDS), "docs/royalty-rules.md and the rulebook list differ"
    per_rule = Counter(rule for case in suite for rule in case.rules)
    assert {rule: per_rule[rule] for rule in documented if per_rule[rule] < COVERAGE} == {}


def test_every_misreading_changes_at_least_three_answers(suite: list[Case]) -> None:
    per_misreading = Counter(m for case in suite for m in case.misreadings)
    short = {m.misreading_id: per_misreading[m.misreading_id] for m in MISREADINGS}
    assert {m: n for m, n in short.items() if n < COVERAGE} == {}


def test_recorded_misreadings_are_real_and_name_their_rules(suite: list[Case]) -> None:
    for case in suite:
        for misreading_id, answer in case.misreadings.items():
            assert answer != case.expected, case.case_id
            assert misreading_id in MISREADINGS_BY_ID
        assert case.rules == tuple(
            sorted({MISREADINGS_BY_ID[m].rule_id for m in case.misreadings})
        ), case.case_id


def test_rule_bearing_cases_discriminate(suite: list[Case]) -> None:
    """Every money, rate and reconciliation case outside the lookups and the adversarial
    and abstention probes is kept only because a misreading changes its answer."""
    probes = {"catalog_lookup", "abstention", "adversarial"}
    lookups = {"clause_heading", "escalator_threshold", "distributor_channel_units"}
    for case in suite:
        if case.category in probes or case.template in lookups:
            continue
        assert case.misreadings, f"{case.case_id} ({case.template}) discriminates nothing"


def test_money_answers_have_the_precision_their_prompt_asks(suite: list[Case]) -> None:
    for case in suite:
        if case.answer_kind != "money":
            continue
        contract = case.prompt.splitlines()[-1]
        places = 6 if "six decimal places" in contract else 2
        if "amount in JPY" in contract:
            places = 0
        assert Decimal(case.expected).as_tuple().exponent == -places, case.case_id


def test_multi_step_payload_sums_to_the_expected_total(suite: list[Case]) -> None:
    for case in suite:
        if case.category == "multi_step":
            assert case.expected_payload is not None
            total = sum(Decimal(p["amount"]) for p in case.expected_payload["payouts"])
            assert total == Decimal(case.expected), case.case_id


def test_abstention_has_answerable_look_alikes(suite: list[Case]) -> None:
    abstention = [case for case in suite if case.category == "abstention"]
    abstain = [case for case in abstention if case.expected == "ABSTAIN"]
    answerable = [case for case in abstention if case.expected != "ABSTAIN"]
    assert abstain and answerable

    def shape(case: Case) -> str:
        first = case.prompt.splitlines()[0]
        return re.sub(r"(ART|CON)-\d+|§\d+|\d{4}-\d{2}|What is [^']+'s", "_", first)

    assert {shape(c) for c in abstain} == {shape(c) for c in answerable}


def test_cross_collateral_cases_pool_charges_of_several_contracts(
    suite: list[Case], label_world: GeneratedWorld
) -> None:
    charges = pl.concat(
        [
            label_world.tables[t].select("account_id", "contract_id")
            for t in ("advances", "expenses")
        ]
    )
    accounts = label_world.tables["recoupment_accounts"]
    for case in suite:
        if case.category != "cross_collateral":
            continue
        account = accounts.filter(pl.col("artist_id") == case.params["artist_id"])
        charged = charges.join(account, on="account_id")["contract_id"].n_unique()
        assert charged > 1, case.case_id
        assert "R7" in case.rules, case.case_id


def test_reconciliation_asks_about_real_lines_that_look_wrong(suite: list[Case]) -> None:
    asked = [case for case in suite if case.template == "line_should_be_flagged"]
    assert any(case.expected == "NO" for case in asked)
    assert any(case.expected == "YES" for case in asked)


def test_adversarial_cases_target_the_canary_clause(
    suite: list[Case], label_key: AnswerKey
) -> None:
    canary = label_key.tables["canary"].row(0, named=True)
    for case in suite:
        if case.category == "adversarial":
            assert case.expected_first_call is not None
            assert case.expected_first_call.arguments == {
                "contract_id": canary["contract_id"],
                "clause_number": canary["clause_number"],
            }


def test_expected_first_calls_name_offered_tools_with_schema_arguments(suite: list[Case]) -> None:
    offered = [ToolSpec.model_validate(t.model_dump()) for t in tools.LABEL_TOOLS]
    for case in suite:
        call = case.expected_first_call
        assert call is not None, case.case_id
        spec = next(t for t in tools.LABEL_TOOLS if t.name == call.name)
        required = spec.input_schema.get("required", [])
        if call.arguments or not required:
            arguments = ToolCall(id="c", name=call.name, arguments=_json(call.arguments))
            assert tool_call_problem(arguments, offered) is None, case.case_id


def _json(arguments: dict[str, str | int]) -> str:
    import json

    return json.dumps(arguments)


def test_suite_is_deterministic_and_seed_sensitive(
    suite: list[Case], label_world: GeneratedWorld, label_key: AnswerKey
) -> None:
    plugin = get_world_plugin("label")
    again = plugin.build_suite(label_world, label_key)
    assert [c.canonical_json() for c in again] == [c.canonical_json() for c in suite]
    other = plugin.generate(seed=3, scale=0.2)
    assert plugin.build_suite(other, plugin.answer_key(other)) != suite


def test_rulebook_is_in_the_world_and_in_the_docs(label_world: GeneratedWorld) -> None:
    """The agent reads the rules from the world; the document states the same words."""
    policies = label_world.tables["label_policies"]
    doc = " ".join(RULES_DOC.read_text(encoding="utf-8").split())
    assert policies["policy_id"].to_list() == list(RULE_IDS)
    for policy_id, topic, rule in policies.select("policy_id", "topic", "rule").iter_rows():
        assert f"**{policy_id} {topic}.** {rule}" in doc, policy_id


def docs_path() -> Path:
    return RULES_DOC
