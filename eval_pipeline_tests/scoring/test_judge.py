"""Tier 3's judge worked directly: the pinned judge as loaded, the verdict key, the
request, the verdict store on an on-disk warehouse, and the calls through a real call
session against a loopback server that answers what each test needs (docs/scoring.md)."""

from __future__ import annotations

import asyncio
import hashlib
import json
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import duckdb
import pytest
from aiohttp import web

from eval_pipeline.cases.case import Case
from eval_pipeline.config import ConfigError
from eval_pipeline.paths import CONFIGS_DIR
from eval_pipeline.providers.config import ModelConfig
from eval_pipeline.providers.types import Message, ModelRequest
from eval_pipeline.providers.wire import wire_body
from eval_pipeline.scoring.judge import (
    JUDGE_LANE,
    VERDICTS,
    Judge,
    ask_judge,
    ensure_verdict_table,
    judge_in_session,
    judge_request,
    load_judge,
    store_verdicts,
    stored_verdicts,
    verdict_key,
)
from eval_pipeline.scoring.score import JudgeVerdict
from eval_pipeline_tests.providers.conftest import FAKE_KEY, KEY_ENV, new_session
from eval_pipeline_tests.providers.test_provider_transports import (
    Handler,
    Seen,
    config_for,
    recording_server,
)
from eval_pipeline_tests.scoring.cases import make_case


def judge(**update: Any) -> Judge:
    base = Judge(
        model="sim-judge",
        rubric_text="Pass a reply that declines.",
        rubric_hash="r1",
        max_tokens=64,
    )
    return base.model_copy(update=update)


def case(case_id: str = "premise", question: str = "Which clause sets the audit window?") -> Case:
    return make_case(case_id=case_id, kind="abstain", expected="ABSTAIN", question=question)


# -- the pinned judge -----------------------------------------------------------------------


def test_the_pinned_judge_is_the_configs_model_rubric_and_the_rubrics_hash() -> None:
    pinned = load_judge()
    rubric = (CONFIGS_DIR / "judge" / "false-premise.md").read_text("utf-8")
    assert pinned == Judge(
        model="sim-judge",
        rubric_text=rubric,
        rubric_hash=hashlib.sha256(rubric.encode("utf-8")).hexdigest()[:16],
        max_tokens=256,
    )


def test_a_judge_file_names_its_rubric_beside_it_and_max_tokens_defaults_to_256(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "elsewhere"
    folder.mkdir()
    (folder / "judge.yaml").write_text("model: other-judge\nrubric: strict.md\n", "utf-8")
    rubric = "Pass only a reply that names the clause: « §5 ».\n"
    (folder / "strict.md").write_text(rubric, "utf-8")
    loaded = load_judge(folder / "judge.yaml")
    assert loaded.model == "other-judge"
    assert loaded.rubric_text == rubric
    assert loaded.rubric_hash == hashlib.sha256(rubric.encode("utf-8")).hexdigest()[:16]
    assert len(loaded.rubric_hash) == 16
    assert loaded.max_tokens == 256
    (folder / "judge.yaml").write_text(
        "model: other-judge\nrubric: strict.md\nmax_tokens: 7\n", "utf-8"
    )
    assert load_judge(folder / "judge.yaml").max_tokens == 7


def test_a_judge_with_no_tokens_to_answer_in_is_refused(tmp_path: Path) -> None:
    (tmp_path / "judge.yaml").write_text("model: j\nrubric: r.md\nmax_tokens: 0\n", "utf-8")
    (tmp_path / "r.md").write_text("rubric", "utf-8")
    with pytest.raises(ConfigError, match="max_tokens"):
        load_judge(tmp_path / "judge.yaml")


# -- the verdict key ------------------------------------------------------------------------


def test_the_verdict_key_is_the_hash_of_model_rubric_case_prompt_and_reply() -> None:
    premise = case()
    material = "\x1f".join(["sim-judge", "r1", "premise", premise.prompt, "ABSTAIN: no"])
    assert verdict_key(judge(), premise, "ABSTAIN: no") == (
        hashlib.sha256(material.encode("utf-8")).hexdigest()
    )
    # no reply is keyed as the empty reply: stored keys stay the keys a re-grade asks for
    empty = "\x1f".join(["sim-judge", "r1", "premise", premise.prompt, ""])
    assert verdict_key(judge(), premise, None) == hashlib.sha256(empty.encode("utf-8")).hexdigest()


def test_everything_that_decides_a_verdict_changes_its_key_and_nothing_else_does() -> None:
    premise = case()
    key = verdict_key(judge(), premise, "ABSTAIN: no")
    others = [
        verdict_key(judge(model="other"), premise, "ABSTAIN: no"),
        verdict_key(judge(rubric_hash="r2"), premise, "ABSTAIN: no"),
        verdict_key(judge(), case(case_id="premise-2"), "ABSTAIN: no"),
        verdict_key(judge(), case(question="Which clause sets the term?"), "ABSTAIN: no"),
        verdict_key(judge(), premise, "ABSTAIN: yes"),
        verdict_key(judge(), premise, None),
    ]
    assert len({key, *others}) == 7
    # the rubric is in the key through its hash; the token limit decides no verdict
    assert (
        verdict_key(judge(rubric_text="other words", max_tokens=9), premise, "ABSTAIN: no") == key
    )
    # no reply and an empty reply are the same thing to judge
    assert verdict_key(judge(), premise, None) == verdict_key(judge(), premise, "")


def test_the_key_parts_are_separated_so_moving_text_between_them_changes_the_key() -> None:
    premise = case()
    assert verdict_key(judge(model="a", rubric_hash="bc"), premise, "x") != verdict_key(
        judge(model="ab", rubric_hash="c"), premise, "x"
    )


# -- the request ----------------------------------------------------------------------------


def test_the_request_holds_the_rubric_the_question_and_the_reply_never_the_expected_answer() -> (
    None
):
    premise = case()
    request = judge_request(judge(), premise, "ABSTAIN: §3 is the term clause")
    assert request == ModelRequest(
        messages=(
            Message(role="system", content="Pass a reply that declines."),
            Message(
                role="user",
                content=(
                    "QUESTION: Which clause sets the audit window?\n"
                    "REPLY:\nABSTAIN: §3 is the term clause"
                ),
            ),
        ),
        max_tokens=64,
        temperature=0,
    )
    assert request.temperature == 0 and request.tools == () and request.seed is None
    assert "ABSTAIN_NOTE" not in request.messages[1].content
    assert premise.prompt.splitlines()[1] not in request.messages[1].content


def test_a_missing_or_empty_reply_is_sent_as_no_reply() -> None:
    for reply in (None, ""):
        request = judge_request(judge(), case(), reply)
        assert request.messages[1].content.endswith("REPLY:\n(no reply)")


# -- the verdict store ----------------------------------------------------------------------


def verdict_rows(con: duckdb.DuckDBPyConnection) -> list[tuple[Any, ...]]:
    return con.execute(f"SELECT * FROM {VERDICTS} ORDER BY key").fetchall()


def test_the_verdict_table_has_its_columns_and_is_made_once(tmp_path: Path) -> None:
    con = duckdb.connect(str(tmp_path / "warehouse.duckdb"))
    ensure_verdict_table(con)
    con.execute(f"INSERT INTO {VERDICTS} VALUES ('k', 'j', 'r', 'c', true, 'why', 'call-1')")
    ensure_verdict_table(con)  # again: nothing dropped
    columns = con.execute(
        "SELECT column_name, data_type FROM information_schema.columns "
        "WHERE table_schema = 'runs' AND table_name = 'judge_verdicts' ORDER BY ordinal_position"
    ).fetchall()
    assert columns == [
        ("key", "VARCHAR"),
        ("judge_model", "VARCHAR"),
        ("rubric_hash", "VARCHAR"),
        ("case_id", "VARCHAR"),
        ("passed", "BOOLEAN"),
        ("reason", "VARCHAR"),
        ("call_id", "VARCHAR"),
    ]
    assert verdict_rows(con) == [("k", "j", "r", "c", True, "why", "call-1")]
    with pytest.raises(duckdb.ConstraintException):  # the key is the primary key
        con.execute(f"INSERT INTO {VERDICTS} VALUES ('k', 'j', 'r', 'c', false, 'x', 'y')")


def test_verdicts_are_stored_with_their_judge_and_case_and_read_back_by_key(
    tmp_path: Path,
) -> None:
    path = tmp_path / "warehouse.duckdb"
    pinned = judge()
    cases = {"k1": case(case_id="premise"), "k2": case(case_id="other")}
    verdicts = {
        "k1": JudgeVerdict(passed=True, reason="declines", call_id="call-1"),
        "k2": JudgeVerdict(passed=False, reason="answers", call_id="call-2"),
    }
    with duckdb.connect(str(path)) as con:
        store_verdicts(con, pinned, cases, verdicts)
        assert verdict_rows(con) == [
            ("k1", "sim-judge", "r1", "premise", True, "declines", "call-1"),
            ("k2", "sim-judge", "r1", "other", False, "answers", "call-2"),
        ]
    with duckdb.connect(str(path), read_only=True) as con:
        assert stored_verdicts(con, ["k2", "k1", "unknown"]) == verdicts
        assert stored_verdicts(con, ["k2"]) == {"k2": verdicts["k2"]}
        assert stored_verdicts(con, []) == {}


def test_a_verdict_stored_again_replaces_the_old_one(tmp_path: Path) -> None:
    con = duckdb.connect(str(tmp_path / "warehouse.duckdb"))
    cases = {"k": case()}
    store_verdicts(con, judge(), cases, {"k": JudgeVerdict(passed=False, reason="a", call_id="1")})
    store_verdicts(con, judge(), cases, {"k": JudgeVerdict(passed=True, reason="b", call_id="2")})
    assert verdict_rows(con) == [("k", "sim-judge", "r1", "premise", True, "b", "2")]


def test_failed_judge_calls_and_verdicts_without_a_ruling_are_not_stored(tmp_path: Path) -> None:
    con = duckdb.connect(str(tmp_path / "warehouse.duckdb"))
    cases = {key: case(case_id=key) for key in ("a", "b", "c", "d")}
    store_verdicts(
        con,
        judge(),
        cases,
        {
            "a": JudgeVerdict(passed=None, reason="judge call infra_error", failed=True),
            "b": JudgeVerdict(passed=None, reason="no ruling", failed=False),
            "c": JudgeVerdict(passed=True, reason="ruled, yet the call failed", failed=True),
            "d": JudgeVerdict(passed=False, reason="ruled", call_id="call-d"),
        },
    )
    assert verdict_rows(con) == [("d", "sim-judge", "r1", "d", False, "ruled", "call-d")]


def test_a_warehouse_without_the_verdict_table_has_no_stored_verdicts_and_is_not_written(
    tmp_path: Path,
) -> None:
    path = tmp_path / "warehouse.duckdb"
    duckdb.connect(str(path)).close()
    with duckdb.connect(str(path), read_only=True) as con:
        assert stored_verdicts(con, ["k"]) == {}
        assert stored_verdicts(con, []) == {}
    with duckdb.connect(str(path)) as con:
        store_verdicts(con, judge(), {}, {})  # storing nothing still makes the table
        assert verdict_rows(con) == []


# -- the calls ------------------------------------------------------------------------------


def openai_reply(content: str) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "model": "judge",
        "choices": [{"message": {"content": content}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 12, "completion_tokens": 3},
    }


def asked(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    answers: Mapping[str, tuple[int, str]],
    items: Mapping[str, tuple[Case, str | None]],
    pinned: Judge | None = None,
) -> tuple[dict[str, JudgeVerdict], list[Seen], ModelConfig]:
    """`ask_judge` on `items` in a real session, against a loopback server answering each
    request whose reply text contains a key of `answers` with that (HTTP status, text)."""
    monkeypatch.setenv(KEY_ENV, FAKE_KEY)

    async def answer(request: web.Request, body: bytes) -> web.StreamResponse:
        user = json.loads(body)["messages"][-1]["content"]
        status, content = next(v for k, v in answers.items() if k in user)
        if status != 200:
            return web.json_response({"error": {"message": content}}, status=status)
        return web.json_response(openai_reply(content))

    async def run() -> tuple[dict[str, JudgeVerdict], list[Seen], ModelConfig]:
        async with recording_server(answer) as server:
            config = config_for(server.base_url, "openai_compatible")
            async with new_session(tmp_path) as session:
                verdicts = await ask_judge(session, config, pinned or judge(), items)
            return verdicts, server.seen, config

    return asyncio.run(run())


def journaled(tmp_path: Path) -> list[dict[str, Any]]:
    """The session's envelopes as they ended (the journal writes each one ahead of its
    call, then again when it lands)."""
    path = tmp_path / "runs" / "run-1" / "envelopes.jsonl"
    rows = [json.loads(line) for line in path.read_text("utf-8").splitlines()]
    return list({row["envelope_id"]: row for row in rows}.values())


def test_each_item_is_one_judge_call_of_the_judge_lane_and_its_last_verdict_line_counts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    premise, other = case(), case(case_id="other")
    items = {
        "k-declines": (premise, "ABSTAIN: declines"),
        "k-answers": (other, "ANSWER: 30"),
    }
    answers = {
        "ABSTAIN: declines": (200, "The reply declines the premise.\nVERDICT: FAIL\nVERDICT: PASS"),
        "ANSWER: 30": (200, "\n  It answers as if the clause existed.\n**Verdict**: fail"),
    }
    verdicts, seen, config = asked(tmp_path, monkeypatch, answers, items)
    envelopes = {e["call_id"]: e for e in journaled(tmp_path)}
    assert set(verdicts) == set(items)
    declines, answered = verdicts["k-declines"], verdicts["k-answers"]
    assert (declines.passed, declines.reason, declines.failed) == (
        True,
        "The reply declines the premise.",
        False,
    )
    assert (answered.passed, answered.reason, answered.failed) == (
        False,
        "It answers as if the clause existed.",
        False,
    )
    assert declines.call_id != answered.call_id
    for key, verdict in verdicts.items():
        envelope = envelopes[verdict.call_id]
        assert (envelope["lane"], envelope["case_id"]) == (JUDGE_LANE, items[key][0].case_id)
    assert JUDGE_LANE == "judge"
    sent = sorted(json.loads(s.body)["messages"][-1]["content"] for s in seen)
    assert sent == sorted(
        json.loads(json.dumps(wire_body(config, judge_request(judge(), c, r))))["messages"][-1][
            "content"
        ]
        for c, r in items.values()
    )


def test_a_verdict_word_is_read_in_any_case_after_any_marks_and_only_as_a_whole_word(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    items = {f"k{i}": (case(case_id=f"c{i}"), f"reply {i}") for i in range(5)}
    answers = {
        "reply 0": (200, "ok\nverdict: pass"),
        "reply 1": (200, "ok\n> VERDICT : PASS."),
        "reply 2": (200, "ok\nVERDICT: PASSED"),  # not the word PASS
        "reply 3": (200, "ok\nThe VERDICT: PASS is not a line of its own"),
        "reply 4": (200, "ok\n  - VERDICT:FAIL"),
    }
    verdicts, _, _ = asked(tmp_path, monkeypatch, answers, items)
    assert {k: (v.passed, v.failed) for k, v in verdicts.items()} == {
        "k0": (True, False),
        "k1": (True, False),
        "k2": (None, True),
        "k3": (None, True),
        "k4": (False, False),
    }


def test_the_reason_is_the_replys_first_line_cut_at_200_characters(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    long_line = "because " + "x" * 300
    items = {"k": (case(), "ABSTAIN: no")}
    answers = {"ABSTAIN": (200, f"{long_line}\nVERDICT: PASS")}
    verdicts, _, _ = asked(tmp_path, monkeypatch, answers, items)
    assert verdicts["k"].reason == long_line[:200]
    assert len(verdicts["k"].reason) == 200


def test_a_reply_without_a_verdict_line_is_a_judge_error_with_the_calls_id(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    items = {"k": (case(), "ABSTAIN: no")}
    verdicts, _, _ = asked(tmp_path, monkeypatch, {"ABSTAIN": (200, "I think it passes.")}, items)
    (envelope,) = journaled(tmp_path)
    assert verdicts == {
        "k": JudgeVerdict(
            passed=None,
            reason="the judge gave no verdict line",
            call_id=envelope["call_id"],
            failed=True,
        )
    }


def test_a_failed_judge_call_is_a_judge_error_naming_its_status(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    items = {"k": (case(), "ABSTAIN: no"), "fine": (case(case_id="fine"), "ANSWER: 1")}
    answers = {"ABSTAIN": (400, "bad request"), "ANSWER": (200, "VERDICT: FAIL")}
    verdicts, _, _ = asked(tmp_path, monkeypatch, answers, items)
    (envelope,) = [e for e in journaled(tmp_path) if e["case_id"] == "premise"]
    assert envelope["status"] == "harness_error"
    assert verdicts["k"] == JudgeVerdict(
        passed=None, reason="judge call harness_error", call_id=envelope["call_id"], failed=True
    )
    assert (verdicts["fine"].passed, verdicts["fine"].failed) == (False, False)


@contextmanager
def server_on_a_thread(handler: Handler) -> Iterator[str]:
    """A loopback server on an event loop of its own thread (for a caller that runs its
    own loop, as `judge_in_session` does); yields its base URL."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    served = recording_server(handler)
    try:
        server = asyncio.run_coroutine_threadsafe(served.__aenter__(), loop).result(10)
        yield server.base_url
    finally:
        asyncio.run_coroutine_threadsafe(served.__aexit__(None, None, None), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()


def test_judging_in_a_session_of_its_own_returns_the_verdicts_and_journals_the_calls(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEY_ENV, FAKE_KEY)

    async def answer(request: web.Request, body: bytes) -> web.StreamResponse:
        return web.json_response(openai_reply("It declines.\nVERDICT: PASS"))

    with server_on_a_thread(answer) as base_url:
        config = config_for(base_url, "openai_compatible")
        items = {"k": (case(), "ABSTAIN: no")}
        verdicts = judge_in_session(new_session(tmp_path), config, judge(), items)
    (envelope,) = journaled(tmp_path)  # the session was closed: its journal is complete
    assert verdicts == {
        "k": JudgeVerdict(passed=True, reason="It declines.", call_id=envelope["call_id"])
    }
