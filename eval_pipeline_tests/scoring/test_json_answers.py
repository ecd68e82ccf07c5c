"""Structured (JSON) answers: read wherever the reply put them, checked against the case's
JSON schema, compared as structures.

Found from outside: a reply whose answer was a JSON object was always labelled `schema`
and never checked against any schema, and `ModelClient.call` had no way to take another
answer reader."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from eval_pipeline.cases.case import Case
from eval_pipeline.cases.readers import grade_answer, read_json_answer, reader_for
from eval_pipeline.project_configs import load_price_book
from eval_pipeline.providers.harness import CallSession, CallTag
from eval_pipeline.providers.labels import classify, expect_answer
from eval_pipeline.providers.types import Message, ModelRequest, ModelResponse
from eval_pipeline.sim.process import running_sim
from eval_pipeline_tests.providers.conftest import FAKE_KEY, KEY_ENV, sim_config
from eval_pipeline_tests.scoring.cases import make_case

PAYOUT_SCHEMA = {
    "type": "object",
    "properties": {
        "artist_id": {"type": "string"},
        "net_payable": {"type": "string"},
        "accounts": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["artist_id", "net_payable"],
    "additionalProperties": False,
}
EXPECTED = {"artist_id": "ART-0118", "net_payable": "0.00", "accounts": ["ACC-0223", "ACC-0224"]}


def json_case() -> Case:
    return make_case(
        kind="json",
        expected=json.dumps(EXPECTED),
        contract="End with one line: ANSWER: <a JSON object: artist_id, net_payable, accounts>",
        tiers=("exact",),
        answer_schema=PAYOUT_SCHEMA,
    )


def reply(text: str) -> ModelResponse:
    return ModelResponse(text=text, finish_reason="stop", stop_kind="end", tool_calls=())


SAME_DATA = [
    "ANSWER: " + json.dumps(EXPECTED),
    json.dumps(dict(reversed(list(EXPECTED.items()))), indent=2),
    "Here it is:\n```json\n" + json.dumps(EXPECTED, indent=4) + "\n```",
]


@pytest.mark.parametrize("text", SAME_DATA)
def test_the_same_data_in_another_layout_is_read_and_right(text: str) -> None:
    case = json_case()
    label = classify(
        "ok",
        reply(text),
        grader=expect_answer(case.expected, "json"),
        read_answer=reader_for(case),
    )
    assert label.label == "right", label.reason
    assert grade_answer(case, text).correct


def test_a_reply_breaking_the_schema_is_a_schema_failure_naming_what_broke() -> None:
    case = json_case()
    broken = json.dumps({"artist_id": "ART-0118"})
    label = classify("ok", reply(broken), read_answer=reader_for(case))
    assert label.label == "schema" and "net_payable" in label.reason
    extra = json.dumps({**EXPECTED, "note": "x"})
    assert "note" in str(read_json_answer(extra, PAYOUT_SCHEMA).problem)


def test_valid_json_with_other_values_is_wrong_not_schema() -> None:
    case = json_case()
    other = json.dumps({**EXPECTED, "net_payable": "12.00"})
    label = classify(
        "ok",
        reply(other),
        grader=expect_answer(case.expected, "json"),
        read_answer=reader_for(case),
    )
    assert label.label == "wrong"
    assert not grade_answer(case, other).correct


def test_a_json_case_must_carry_its_schema() -> None:
    with pytest.raises(ValueError, match="answer_schema"):
        make_case(kind="json", expected="{}", tiers=("exact",))


def test_model_client_call_reads_answers_with_the_reader_it_is_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Over HTTP: the test-echo profile replies with a JSON object (what it was sent)."""
    monkeypatch.setenv(KEY_ENV, FAKE_KEY)
    echo_schema = {
        "type": "object",
        "properties": {"profile": {"const": "test-echo"}},
        "required": ["profile", "messages"],
    }
    wrong_schema = {**echo_schema, "properties": {"profile": {"const": "someone-else"}}}
    request = ModelRequest(messages=(Message(role="user", content="hello"),), max_tokens=4096)

    async def labels() -> list[tuple[str | None, str]]:
        with running_sim(plugins=["eval_pipeline_tests.sim.echo_profile"]) as sim:
            config = sim_config(sim, "test-echo", price_model="tool-responder")
            async with CallSession(
                price_book=load_price_book(),
                run_id="json",
                journal_path=tmp_path / "envelopes.jsonl",
            ) as session:
                client = session.client(config)
                out = []
                for schema in (echo_schema, wrong_schema):
                    result = await client.call(
                        request,
                        CallTag(lane="model", case_id="c1"),
                        read_answer=lambda text, s=schema: read_json_answer(text, s),  # type: ignore[misc]
                    )
                    assert result.label is not None
                    out.append((result.label.label, result.label.reason))
                return out

    (fits, fits_reason), (breaks, breaks_reason) = asyncio.run(labels())
    assert fits is None, fits_reason  # well-formed, not graded
    assert breaks == "schema" and "profile" in breaks_reason
