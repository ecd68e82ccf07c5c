"""Every committed case's prompt against its reader: a reply that follows the prompt's
stated format to the letter, with the expected value, is right; the same reply with the
answer a misreading of the rulebook gives is wrong; an abstention is right exactly on the
cases that cannot be answered."""

from __future__ import annotations

import re

import pytest

from eval_pipeline.cases.case import Case
from eval_pipeline.cases.readers import grade_answer
from eval_pipeline_tests.cases.committed import committed_fixture_set

CONTRACT = re.compile(
    r"^End with one line: ANSWER: (?P<before>[^<]*)<(?P<slot>[^>]+)>(?P<after>.*)$"
)
ABSTAIN_INVITATION = "say so with a line ABSTAIN: <reason>"


def cases() -> list[Case]:
    return list(committed_fixture_set().cases)


def literal_reply(case: Case, value: str) -> str:
    """The answer line the prompt asks for, with `value` in its slot."""
    match = CONTRACT.match(case.prompt.splitlines()[-1])
    assert match, f"{case.case_id}: the last line is not an ANSWER contract"
    return f"Worked it out from the records.\nANSWER: {match['before']}{value}{match['after']}"


@pytest.mark.parametrize("case", cases(), ids=lambda c: c.case_id)
def test_the_prompts_format_and_its_reader_agree(case: Case) -> None:
    assert ABSTAIN_INVITATION in case.prompt, case.case_id
    abstention = "ABSTAIN: the records do not support an answer"
    if case.answer_kind == "abstain":
        assert grade_answer(case, abstention).correct
        assert grade_answer(case, f"{abstention}\n{literal_reply(case, '0')}").correct
        return
    right = grade_answer(case, literal_reply(case, case.expected))
    assert right.correct, f"{case.case_id}: {right.reason}"
    for misreading, answer in case.misreadings.items():
        wrong = grade_answer(case, literal_reply(case, answer))
        assert not wrong.correct, f"{case.case_id}: misreading {misreading} graded right"
    assert not grade_answer(case, abstention).correct


def test_every_kind_of_contract_is_covered() -> None:
    kinds = {case.answer_kind for case in cases()}
    assert kinds >= {"money", "integer", "percent", "date", "text", "id_list", "yes_no", "abstain"}
