"""What `grade_answer` returns for a reply, field by field: the verdict, where the answer was
put, the value read, the value expected and the reason a report shows.

From the readers run of the mutation tests (issue 13): the verdicts were tested, but no test
graded a reply with no answer line, no test read the reasons, values and expectations a
grade carries, and no case had a tolerance or an expected value written with its currency."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from eval_pipeline.cases.case import AnswerKind
from eval_pipeline.cases.readers import (
    Grade,
    canonical_json,
    grade_answer,
    read_json_answer,
    reads_json,
)
from eval_pipeline_tests.scoring.cases import make_case

JPY = "End with one line: ANSWER: <amount in JPY>"


@pytest.mark.parametrize(
    ("kind", "expected", "reply", "grade"),
    [
        (
            "money",
            "2480.10",
            "I could not work it out.",
            Grade(
                correct=False,
                placement="none",
                value=None,
                expected="2480.10",
                reason="no answer line",
            ),
        ),
        (
            "money",
            "2480.10",
            None,
            Grade(
                correct=False,
                placement="none",
                value=None,
                expected="2480.10",
                reason="no answer line",
            ),
        ),
        (
            "money",
            "2480.10",
            "ABSTAIN: the ledger stops in March",
            Grade(
                correct=False,
                placement="abstain",
                value=None,
                expected="2480.10",
                reason="abstained on an answerable case",
            ),
        ),
        (
            "abstain",
            "ABSTAIN",
            "ABSTAIN: no artist of that name",
            Grade(
                correct=True,
                placement="abstain",
                value=None,
                expected="ABSTAIN",
                reason="abstained",
            ),
        ),
        (
            "abstain",
            "ABSTAIN",
            "ANSWER: $12.00",
            Grade(
                correct=False,
                placement="answer",
                value="$12.00",
                expected="ABSTAIN",
                reason="answered an unanswerable case",
            ),
        ),
        (
            "money",
            "2480.10",
            "ANSWER: about two and a half thousand",
            Grade(
                correct=False,
                placement="answer",
                value=None,
                expected="2480.10",
                reason="unreadable: not an amount: 'about two and a half thousand'",
            ),
        ),
        (
            "money",
            "2480.10",
            "ANSWER: $2,480.10",
            Grade(
                correct=True,
                placement="answer",
                value="2480.1",
                expected="2480.1",
                reason="right",
            ),
        ),
        (
            "money",
            "2480.10",
            "ANSWER: $2,480.01",
            Grade(
                correct=False,
                placement="answer",
                value="2480.01",
                expected="2480.1",
                reason="read 2480.01, expected 2480.1",
            ),
        ),
        (
            "date",
            "2025-03-05",
            "ANSWER: March 5, 2025",
            Grade(
                correct=True,
                placement="answer",
                value="2025-03-05",
                expected="2025-03-05",
                reason="right",
            ),
        ),
        (
            "id_list",
            "12,13",
            "ANSWER: 13, 14",
            Grade(
                correct=False,
                placement="answer",
                value="13,14",
                expected="12,13",
                reason="read 13,14, expected 12,13",
            ),
        ),
    ],
)
def test_a_grade_carries_the_verdict_placement_value_expected_and_reason(
    kind: AnswerKind, expected: str, reply: str | None, grade: Grade
) -> None:
    assert grade_answer(make_case(kind=kind, expected=expected), reply) == grade


@pytest.mark.parametrize(
    ("kind", "expected", "tolerance", "right", "wrong"),
    [
        ("money", "2480.10", "0.01", ["$2,480.11", "2480.09", "2480.1"], ["2480.12", "2480.08"]),
        ("percent", "16.25", "0.5", ["16.75%", "15.75", "16"], ["16.76%", "15.74"]),
        ("integer", "15000", "1", ["15,001", "14999"], ["15002", "14998"]),
    ],
)
def test_a_numeric_answer_within_the_cases_tolerance_is_right(
    kind: AnswerKind, expected: str, tolerance: str, right: list[str], wrong: list[str]
) -> None:
    case = make_case(kind=kind, expected=expected, tolerance=tolerance)
    for answer in right:
        grade = grade_answer(case, f"ANSWER: {answer}")
        assert grade.correct and grade.reason == "right", answer
    for answer in wrong:
        grade = grade_answer(case, f"ANSWER: {answer}")
        assert not grade.correct and grade.reason.startswith("read "), answer


def test_the_tolerance_does_not_apply_to_answers_that_are_not_numbers() -> None:
    # a tolerance of 1 between dates or line ids is no tolerance at all: they are compared
    # as read
    date_case = make_case(kind="date", expected="2025-03-05", tolerance="1")
    assert not grade_answer(date_case, "ANSWER: 2025-03-06").correct
    ids = make_case(kind="id_list", expected="12", tolerance="1")
    assert not grade_answer(ids, "ANSWER: 13").correct
    assert grade_answer(ids, "ANSWER: [12]").correct


def test_the_expected_amount_is_read_in_the_cases_currency() -> None:
    case = make_case(kind="money", expected="¥3,815,299", contract=JPY)
    grade = grade_answer(case, "ANSWER: 3815299 yen")
    assert grade == Grade(
        correct=True, placement="answer", value="3815299", expected="3815299", reason="right"
    )
    assert not grade_answer(case, "ANSWER: $3,815,299").correct


# -- JSON answers: the grade of a structured reply

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "artist_id": {"type": "string"},
        "net_payable": {"type": "string"},
        "accounts": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["artist_id", "net_payable"],
    "additionalProperties": False,
}
EXPECTED = {"artist_id": "ART-0118", "net_payable": "0.00", "accounts": ["ACC-0224", "ACC-0223"]}
CANONICAL = '{"accounts":["ACC-0224","ACC-0223"],"artist_id":"ART-0118","net_payable":"0.00"}'
OTHER = {**EXPECTED, "net_payable": "12.00"}


def json_grade(reply: str | None) -> Grade:
    case = make_case(
        kind="json",
        expected=json.dumps(EXPECTED, indent=2),
        contract="End with one line: ANSWER: <a JSON object>",
        tiers=("exact",),
        answer_schema=SCHEMA,
    )
    return grade_answer(case, reply)


def test_only_a_json_case_is_read_as_json() -> None:
    # the bulk re-label asks this to pick the reader for each case
    json_case = make_case(
        kind="json",
        expected="{}",
        contract="End with one line: ANSWER: <a JSON object>",
        answer_schema=SCHEMA,
    )
    assert reads_json(json_case)
    assert not any(
        reads_json(make_case(kind=kind, expected="1")) for kind in ("money", "text", "id_list")
    )


def test_a_right_json_answer_is_graded_on_its_canonical_text() -> None:
    assert json_grade("ANSWER: " + json.dumps(EXPECTED)) == Grade(
        correct=True, placement="answer", value=CANONICAL, expected=CANONICAL, reason="right"
    )


def test_a_json_answer_with_other_values_is_wrong_and_says_so() -> None:
    assert json_grade(json.dumps(OTHER)) == Grade(
        correct=False,
        placement="answer",
        value=canonical_json(OTHER),
        expected=CANONICAL,
        reason="a different structure than expected",
    )


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        ("I cannot say.", "no JSON answer in the reply"),
        (None, "no JSON answer in the reply"),
        ('{"artist_id": "ART-0118"}', "the JSON answer breaks its schema: "),
    ],
)
def test_a_reply_with_no_json_answer_or_one_breaking_the_schema_has_no_answer(
    reply: str | None, reason: str
) -> None:
    grade = json_grade(reply)
    assert (grade.correct, grade.placement, grade.value, grade.expected) == (
        False,
        "none",
        None,
        CANONICAL,
    )
    assert grade.reason.startswith(reason)


def test_the_last_fenced_block_is_the_answer_not_a_draft_before_it() -> None:
    reply = (
        "A first draft:\n```json\n"
        + json.dumps(OTHER)
        + "\n```\nChecked again, the final answer:\n```json\n"
        + json.dumps(EXPECTED)
        + "\n```"
    )
    assert json_grade(reply).correct
    assert read_json_answer(reply, SCHEMA).value == CANONICAL


def test_prose_on_the_answer_line_does_not_hide_the_json_block_that_follows() -> None:
    reply = "ANSWER: the object below\n```json\n" + json.dumps(EXPECTED) + "\n```"
    assert json_grade(reply).correct


def test_json_on_an_abstain_line_is_no_answer() -> None:
    grade = json_grade("ABSTAIN: " + json.dumps(EXPECTED))
    assert not grade.correct and grade.value is None


def test_no_json_answer_is_said_so_whatever_the_reply() -> None:
    for reply in (None, "", "no braces here", "ANSWER: twelve"):
        read = read_json_answer(reply, SCHEMA)
        assert (read.value, read.problem) == (None, "no JSON answer in the reply")


# -- the canonical JSON text: one text per structure


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)


@given(JSON_VALUES)
def test_the_canonical_text_is_compact_json_of_the_same_value_whatever_its_layout(
    value: Any,
) -> None:
    text = canonical_json(value)
    assert json.loads(text) == value
    assert canonical_json(json.loads(json.dumps(value, indent=3))) == text
    assert len(text) <= len(json.dumps(value, ensure_ascii=False))


def test_the_canonical_text_sorts_keys_keeps_unicode_and_has_no_spaces() -> None:
    value = {"name": "Björk — 東京", "b": [1, 2], "a": {"y": None, "x": True}}
    assert canonical_json(value) == '{"a":{"x":true,"y":null},"b":[1,2],"name":"Björk — 東京"}'
