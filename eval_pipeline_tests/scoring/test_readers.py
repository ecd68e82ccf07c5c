"""Answers read by kind: where the model put them and what they mean."""

from __future__ import annotations

import string
from datetime import date

import pytest

from eval_pipeline.fixtures.case import AnswerKind, Case
from eval_pipeline.scoring.readers import (
    FinalAnswer,
    ReadValue,
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


# -- read_value by kind, from the readers run's survivors (issue 13): every spelling of
# yes and no, the refusals and their wording, zero and negative zero, final periods,
# backticks and brackets, and no stray letter ever read away.


@pytest.mark.parametrize(
    ("raw", "value"),
    [
        ("yes", "YES"),
        ("Y", "YES"),
        ("y.", "YES"),
        ("True", "YES"),
        ("YES!", "YES"),
        ("no", "NO"),
        ("N", "NO"),
        ("n", "NO"),
        ("false", "NO"),
        ("FALSE.", "NO"),
        ("`No`", "NO"),
    ],
)
def test_every_spelling_of_yes_and_no_reads_as_yes_or_no(raw: str, value: str) -> None:
    assert read_value("yes_no", raw) == ReadValue(value=value)


@pytest.mark.parametrize(
    ("kind", "raw", "problem"),
    [
        ("yes_no", "maybe", "not YES or NO: 'maybe'"),
        ("percent", "about half", "not a number: 'about half'"),
        ("integer", "twelve", "not a number: 'twelve'"),
        ("integer", "12.5", "not a whole number: '12.5'"),
        ("integer", "-3.01", "not a whole number: '-3.01'"),
        ("date", "next Tuesday", "not a date: 'next Tuesday'"),
        ("date", "2025-02-30", "not a date: '2025-02-30'"),
        ("id_list", "lines 3 and 4", "not a list of line ids: 'lines 3 and 4'"),
    ],
)
def test_an_answer_that_is_not_of_its_kind_is_refused_saying_why(
    kind: AnswerKind, raw: str, problem: str
) -> None:
    assert read_value(kind, raw) == ReadValue(value=None, problem=problem)


def test_a_whole_number_written_with_decimals_is_an_integer() -> None:
    assert read_value("integer", "12.000") == ReadValue(value="12")
    assert read_value("percent", "12.5") == ReadValue(value="12.5")  # only integers refuse


@pytest.mark.parametrize("kind", ["money", "percent", "integer"])
@pytest.mark.parametrize("zero", ["0", "0.00", "-0", "-0.00", "(0.00)", "\u22120"])
def test_zero_reads_as_0_whatever_its_sign_or_decimals(kind: AnswerKind, zero: str) -> None:
    assert read_value(kind, zero) == ReadValue(value="0")


@pytest.mark.parametrize(
    ("kind", "raw", "value"),
    [
        ("money", "$1,000,000.00", "1000000"),  # never 1E+6
        ("money", "2500", "2500"),
        ("percent", "100%", "100"),
        ("integer", "15,000", "15000"),
    ],
)
def test_round_numbers_read_in_plain_digits(kind: AnswerKind, raw: str, value: str) -> None:
    assert read_value(kind, raw) == ReadValue(value=value)


@pytest.mark.parametrize(
    ("raw", "value"),
    [
        ("2 480.10", "2480.1"),  # a space between thousands
        ("2\u202f480.10", "2480.1"),  # a narrow no-break space
        ("2\u00a0480.10", "2480.1"),  # a no-break space
        ("$ 2\u00a0480.10", "2480.1"),
    ],
)
def test_money_with_spaces_between_the_thousands(raw: str, value: str) -> None:
    assert read_value("money", raw) == ReadValue(value=value)


def test_money_is_in_usd_unless_another_currency_is_asked_for() -> None:
    assert read_value("money", "$12.50") == ReadValue(value="12.5")
    assert read_value("money", "USD 12.50") == ReadValue(value="12.5")
    assert read_value("money", "€12.50").value is None
    assert read_value("money", "€12.50", currency="EUR") == ReadValue(value="12.5")


@pytest.mark.parametrize(
    ("raw", "value"),
    [
        ("16.25%", "16.25"),
        ("16.25 %", "16.25"),
        ("16.25%.", "16.25"),
        ("16.25 % .", "16.25"),
        ("16.25", "16.25"),
        ("16.25.", "16.25"),
    ],
)
def test_a_percentage_with_or_without_its_sign_and_final_period(raw: str, value: str) -> None:
    assert read_value("percent", raw) == ReadValue(value=value)


@pytest.mark.parametrize(
    ("kind", "raw", "value"),
    [
        ("money", "`$12.50`", "12.5"),
        ("percent", "`16.25%`", "16.25"),
        ("date", "`2025-03-05`", "2025-03-05"),
        ("id_list", "`12, 13`", "12,13"),
        ("text", "` ART-0001 `", "art-0001"),
    ],
)
def test_an_answer_in_backticks_reads_as_without(kind: AnswerKind, raw: str, value: str) -> None:
    assert read_value(kind, raw) == ReadValue(value=value)


@pytest.mark.parametrize(
    ("raw", "value"),
    [
        ("March 5, 2025.", "2025-03-05"),
        ("2025-03-05.", "2025-03-05"),
        ("5 Mar 2025.", "2025-03-05"),
    ],
)
def test_a_date_with_a_final_period(raw: str, value: str) -> None:
    assert read_value("date", raw) == ReadValue(value=value)


@pytest.mark.parametrize(
    ("raw", "value"),
    [
        ("[12, 13]", "12,13"),
        ("(13, 12).", "12,13"),
        ("13;12 12", "12,13"),
        ("None.", ""),
        ("none", ""),
        ("[]", ""),
        ("()", ""),
        ("", ""),
    ],
)
def test_line_ids_in_brackets_or_none_at_all(raw: str, value: str) -> None:
    assert read_value("id_list", raw) == ReadValue(value=value)


@pytest.mark.parametrize(
    ("raw", "value"),
    [
        ("Exhibit X", "exhibit x"),  # a final capital letter is part of the answer
        ("'Schedule X'.", "schedule x"),
        ("“Audit  Rights”", "audit rights"),
    ],
)
def test_text_keeps_every_letter_and_drops_quotes_spacing_and_case(raw: str, value: str) -> None:
    assert read_value("text", raw) == ReadValue(value=value)


READABLE: list[tuple[AnswerKind, str]] = [
    ("money", "$12.50"),
    ("money", "12.50"),
    ("percent", "16.25%"),
    ("percent", "16.25"),
    ("integer", "15000"),
    ("date", "2025-03-05"),
    ("date", "March 5, 2025"),
    ("id_list", "12, 13"),
    ("id_list", "NONE"),
    ("yes_no", "YES"),
    ("yes_no", "NO"),
]


@pytest.mark.parametrize(("kind", "raw"), READABLE)
def test_a_stray_letter_before_or_after_an_answer_makes_it_unreadable(
    kind: AnswerKind, raw: str
) -> None:
    assert read_value(kind, raw).value is not None
    for letter in string.ascii_letters:
        for spoiled in (raw + letter, letter + raw):
            read = read_value(kind, spoiled)
            assert read.value is None, f"{spoiled!r} read as {read.value!r}"
            assert read.problem is not None and repr(spoiled) in read.problem


@pytest.mark.parametrize(
    ("answer", "placement"),
    [
        ("X", "answer"),  # a one-letter answer (Schedule X) is no placeholder
        ("NOX", "answer"),
        ("N/A", "abstain"),
    ],
)
def test_only_a_placeholder_beside_an_abstention_is_no_answer(answer: str, placement: str) -> None:
    assert final_answer(f"ABSTAIN: unsure\nANSWER: {answer}").placement == placement


@pytest.mark.parametrize(
    ("reply", "stored"),
    [
        ("ABSTAIN: not in Exhibit X", "ABSTAIN: not in Exhibit X"),
        ("ABSTAIN: unclear\t :", "ABSTAIN: unclear"),
        ("ABSTAIN: ::", "ABSTAIN"),
    ],
)
def test_a_stored_abstention_keeps_its_reason_and_ends_with_no_colon_or_space(
    reply: str, stored: str
) -> None:
    assert answer_text(reply) == stored


def test_the_contract_currency_is_read_from_the_last_line_of_a_longer_prompt() -> None:
    case = make_case("money", "1", contract="End with one line: ANSWER: <amount in EUR>")
    longer = case.model_copy(
        update={"prompt": "Question.\nQuote it as <amount in GBP>.\nNote.\n" + case.prompt}
    )
    assert case_currency(longer) == "EUR"
    usd = case.model_copy(
        update={"prompt": "Question.\n<amount in GBP>\nEnd with one line: ANSWER: $<amount in USD>"}
    )
    assert case_currency(usd) == "USD"


# -- issue 25, finding 9: an answer the model withdrew was graded. A tag was read only at a
# line's start, so `... Actually, correcting: ANSWER: $1,250.00` was not read and the reply
# was graded on the 1,204.18 it withdrew. The last tag wins wherever it stands.

CORRECTED_REPLIES = [
    ("ANSWER: $1,204.18\nActually, correcting: ANSWER: $1,250.00", "$1,250.00"),
    ("ANSWER: $1,204.18 Actually, correcting: ANSWER: $1,250.00", "$1,250.00"),
    ("ANSWER: $1,204.18 (wrong rate) correcting: **ANSWER:** $1,250.00", "$1,250.00"),
    ("Summing up... ANSWER: $1,204.18.\nNo: correcting, _ANSWER:_ `$1,250.00` ", "$1,250.00"),
]


@pytest.mark.parametrize(("reply", "raw"), CORRECTED_REPLIES)
def test_the_models_last_answer_wins_wherever_its_tag_stands(reply: str, raw: str) -> None:
    assert final_answer(reply) == FinalAnswer(placement="answer", raw=raw)
    grade = grade_answer(make_case("money", "1250.00"), reply)
    assert (grade.correct, grade.value) == (True, "1250"), grade.reason


@pytest.mark.parametrize(
    ("reply", "placement", "raw"),
    [
        # two answers and no correction: the last, as before, on one line or two
        ("ANSWER: 40\nANSWER: 41", "answer", "41"),
        ("ANSWER: 40 ANSWER: 41", "answer", "41"),
        # a tag's value ends where the next tag on its line starts
        ("ABSTAIN: unsure ANSWER: N/A", "abstain", "unsure"),
        ("ANSWER: 41 ABSTAIN: unsure", "abstain", "unsure"),
        ("ANSWER: ABSTAIN: no such row", "abstain", "no such row"),
        (
            "The ledger has no such row. ABSTAIN: no row for that period",
            "abstain",
            "no row for that period",
        ),
        # inside a line only the capital tag counts, and not inside a word or number
        ("ANSWER: 41\nmy first answer: 40, I thought", "answer", "41"),
        ("ANSWER: 41\nsee FINALANSWER: 40", "answer", "41"),
        ("ANSWER: 41\nsee 2ANSWER: 40", "answer", "41"),
        ("ANSWER: 41\nno abstain: here", "answer", "41"),
        ("ANSWER: 41\nsee ANSWERS: 40", "answer", "41"),
        # at a line's start any case, as before
        ("- answer: 41", "answer", "41"),
        ("Reasoning. ANSWER:**  42 **", "answer", "42"),
    ],
)
def test_where_a_tag_stands_and_where_its_value_ends(reply: str, placement: str, raw: str) -> None:
    assert final_answer(reply) == FinalAnswer(placement=placement, raw=raw)


@pytest.mark.timeout(20)  # linear: milliseconds; the old pattern rescanned each run of
# spaces and marks from each of its characters (20,000 spaces: 15 s; this: hours)
@pytest.mark.parametrize("run", [" ", "*_", "\n", " \t`"])
def test_a_long_run_of_spaces_or_marks_is_read_in_one_pass(run: str) -> None:
    filler = run * (1_000_000 // len(run))
    assert final_answer(f"ANSWER: 5{filler}x") == FinalAnswer(
        placement="answer", raw="5" + ("" if run == "\n" else filler + "x")
    )
