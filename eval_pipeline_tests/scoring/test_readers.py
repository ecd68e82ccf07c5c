"""Answers read by kind: where the model put them and what they mean."""

from __future__ import annotations

from datetime import date

import pytest

from eval_pipeline.fixtures.case import AnswerKind, Case
from eval_pipeline.scoring.readers import (
    answer_text,
    case_currency,
    final_answer,
    grade_answer,
    read_answer_line,
    read_money,
    read_value,
)


def make_case(
    kind: AnswerKind,
    expected: str,
    contract: str = "End with one line: ANSWER: $<amount in USD, to the cent>",
) -> Case:
    return Case(
        case_id="royalty_math-001",
        category="royalty_math",
        prompt=f"What is it?\n{contract}",
        answer_kind=kind,
        expected=expected,
        tiers=("exact",),
        trace_checks=(),
        expected_first_call=None,
        template="t",
        resolver="r",
    )


@pytest.mark.parametrize(
    "reply",
    [
        "ANSWER: $2,480.10",
        "ANSWER: 2480.1",
        "ANSWER: USD 2,480.10",
        "**ANSWER:** $2480.100",
        "Working it out...\nANSWER: 12.00\nOn reflection:\nANSWER: US$2480.10",
    ],
)
def test_money_in_any_usual_format_is_right(reply: str) -> None:
    assert grade_answer(make_case("money", "2480.10"), reply).correct


def test_money_naming_another_currency_is_unreadable_not_right() -> None:
    grade = grade_answer(make_case("money", "2480.10"), "ANSWER: EUR 2,480.10")
    assert not grade.correct and "EUR" in grade.reason


def test_money_in_the_statement_currency() -> None:
    case = make_case("money", "3815299", contract="End with one line: ANSWER: <amount in JPY>")
    assert grade_answer(case, "ANSWER: ¥3,815,299").correct
    assert not grade_answer(case, "ANSWER: $3,815,299").correct


@pytest.mark.parametrize(
    ("kind", "raw", "value"),
    [
        ("integer", "15000.00", "15000"),
        ("integer", "15,000", "15000"),
        ("percent", "16.25%", "16.25"),
        ("percent", "15.0", "15"),
        ("id_list", "35565, 21350", "21350,35565"),
        ("id_list", "NONE", ""),
        ("yes_no", "Yes.", "YES"),
        ("date", "2025-03-01", "2025-03-01"),
        ("date", "March 1, 2025", "2025-03-01"),
        ("text", ' "Audit Rights". ', "audit rights"),
    ],
)
def test_values_read_by_kind(kind: AnswerKind, raw: str, value: str) -> None:
    assert read_value(kind, raw).value == value


@pytest.mark.parametrize(
    ("reply", "placement"),
    [
        ("ABSTAIN: no artist of that name", "abstain"),
        ("ABSTAIN: no such clause\nANSWER: N/A", "abstain"),
        ("ANSWER: $0\nABSTAIN: the records do not say", "abstain"),
        ("ANSWER: ABSTAIN", "abstain"),
        # an abstention buried in reasoning, then a real answer: an answer
        ("I might ABSTAIN: unclear at first.\nThen I found it.\nANSWER: 30", "answer"),
        ("no line at all", "none"),
    ],
)
def test_abstention_is_read_from_where_the_model_put_it(reply: str, placement: str) -> None:
    assert final_answer(reply).placement == placement


def test_abstaining_is_right_only_on_abstention_cases() -> None:
    assert grade_answer(make_case("abstain", "ABSTAIN"), "ABSTAIN: no such artist").correct
    assert not grade_answer(make_case("abstain", "ABSTAIN"), "ANSWER: $12.00").correct
    assert not grade_answer(make_case("money", "12.00"), "ABSTAIN: cannot tell").correct


@pytest.mark.parametrize(
    ("reply", "placement", "raw"),
    [
        # letters Python's IGNORECASE lets match a tag but whose upper case is not the tag's
        # (dotted capital I, dotless i, long s): found while checking the bulk re-label,
        # the first crashed the reader with an AssertionError
        ("ABSTAİN: no such artist", "abstain", "no such artist"),
        ("abstaın: no such artist", "abstain", "no such artist"),
        ("ANſWER: 12", "answer", "12"),
        ("ANSWER: 12\nABSTAİN: unsure", "abstain", "unsure"),
    ],
)
def test_a_tag_spelled_with_any_letter_the_line_matches_is_that_tag(
    reply: str, placement: str, raw: str
) -> None:
    final = final_answer(reply)
    assert (final.placement, final.raw) == (placement, raw)


# -- edges found by mutation testing (issue 13): `answer_text` and `read_answer_line` were
# reached by no readers test (only through the labels); placeholders beside an abstention,
# the contract's currency, signs and brackets, date spellings and problem wording were not
# asserted.


@pytest.mark.parametrize(
    ("reply", "stored"),
    [
        ("ANSWER: 42", "42"),
        ("ANSWER:", None),  # an empty answer line is no answer
        ("no answer line at all", None),
        (None, None),
        ("ABSTAIN: no such artist", "ABSTAIN: no such artist"),
        ("ABSTAIN: no such artist :", "ABSTAIN: no such artist"),
        ("ABSTAIN:", "ABSTAIN"),
        ("ANSWER: ABSTAIN", "ABSTAIN: ABSTAIN"),
    ],
)
def test_what_the_classifier_stores_for_a_reply(reply: str | None, stored: str | None) -> None:
    assert answer_text(reply) == stored
    read = read_answer_line(reply)
    assert read.value == stored
    assert read.problem == (None if stored is not None else "no answer line in the text")


@pytest.mark.parametrize(
    ("answer", "placement"),
    [
        ("N/A.", "abstain"),  # a placeholder, final period and all
        ("USD 0.00", "abstain"),  # a zero amount in any format is a placeholder
        ("$0", "abstain"),
        ("(0)", "abstain"),
        ("0.5", "answer"),  # not zero: a real answer after the abstention
        ("$7", "answer"),
        ("ART-0001", "answer"),
    ],
)
def test_an_answer_after_an_abstention_counts_unless_it_is_a_placeholder(
    answer: str, placement: str
) -> None:
    read = final_answer(f"ABSTAIN: not in the ledger\nANSWER: {answer}")
    assert read.placement == placement
    assert read.raw == ("not in the ledger" if placement == "abstain" else answer)


def test_the_contract_currency_is_read_from_the_prompts_last_line() -> None:
    assert case_currency(make_case("money", "1")) == "USD"
    eur = make_case("money", "1", contract="End with one line: ANSWER: <amount in EUR>")
    assert case_currency(eur) == "EUR"
    loose = make_case("money", "1", contract="End with one line: ANSWER: the amount")
    assert case_currency(loose) == "USD"
    earlier = loose.model_copy(
        update={"prompt": "Quote it as <amount in GBP>?\nEnd with one line: ANSWER: the amount"}
    )
    assert case_currency(earlier) == "USD"


@pytest.mark.parametrize(
    ("raw", "value"),
    [
        ("\u221212.50", "-12.5"),  # a typographic minus
        ("(12.50)", "-12.5"),  # accountants' brackets
        ("12.50)", "12.5"),  # one bracket is not a negative
        ("(12.50", "12.5"),
        ("$12.50.", "12.5"),  # a sentence's final period
        (".5", "0.5"),
    ],
)
def test_money_signs_brackets_and_periods(raw: str, value: str) -> None:
    assert read_money(raw, "USD").value == value


def test_money_problems_say_what_is_wrong() -> None:
    assert read_money("€1 or £1", "USD").problem == "names EUR, GBP, not USD"
    assert read_money("about twelve", "USD").problem == "not an amount: 'about twelve'"
    assert read_money("about twelve", "USD").value is None


@pytest.mark.parametrize(
    "spelling", ["2025-03-05", "5 March 2025", "March 5, 2025", "5 Mar 2025", "Mar 5, 2025"]
)
def test_every_date_spelling_is_read(spelling: str) -> None:
    assert read_value("date", spelling).value == date(2025, 3, 5).isoformat()
