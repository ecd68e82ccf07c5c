"""What a reply without tool calls is, and how a first tool call is compared."""

from __future__ import annotations

import pytest

from eval_pipeline.cases.case import Case, ExpectedToolCall
from eval_pipeline.lanes.conversation import first_call_matches, text_turn
from eval_pipeline.providers.types import ToolCall


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("The total is below.\nANSWER: $12.00", "final"),
        ("**ANSWER:** 12", "final"),
        ("ABSTAIN: no such artist", "final"),
        ("Which period do you mean?", "question"),
        ("I can't help with submitting that batch.", "refusal"),
        ("Next I will look up the contract terms.", "stall"),
        ("", "stall"),
    ],
)
def test_text_turns(text: str, kind: str) -> None:
    assert text_turn(text) == kind


def case_expecting(arguments: dict[str, str | int]) -> Case:
    return Case(
        case_id="contract_terms-001",
        category="contract_terms",
        prompt="Q?\nEnd with one line: ANSWER: <x>",
        answer_kind="text",
        expected="x",
        tiers=("exact",),
        trace_checks=(),
        expected_first_call=ExpectedToolCall(name="get_clause", arguments=arguments),
        template="t",
        resolver="r",
    )


@pytest.mark.parametrize(
    ("raw", "parsed", "matches"),
    [
        ('{"clause_number": 3, "contract_id": "CON-0001"}', True, True),
        ('{ "contract_id" : "CON-0001" ,"clause_number":3.0 }', True, True),
        ('{"contract_id": "CON-0001", "clause_number": 4}', True, False),
        ('{"contract_id": "CON-0001", "clause_number": 3', False, False),
    ],
)
def test_first_call_compared_as_a_structure(raw: str, parsed: bool, matches: bool) -> None:
    call = ToolCall(id="c1", name="get_clause", arguments=raw)
    assert first_call_matches(
        call, case_expecting({"contract_id": "CON-0001", "clause_number": 3})
    ) == (parsed, matches)
