"""A planted fake API key appears nowhere written during a run.

Searched: every file written under the test's folder (journal, cache entries and index,
the DuckDB warehouse file), every text column of the warehouse tables, the captured logs
of every logger at DEBUG (SDKs and HTTP clients included) and the sim's own output.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import urllib.parse
from pathlib import Path
from typing import Any

import anthropic
import duckdb
import httpx2
import openai
import pytest

from eval_pipeline.providers.cache import CacheMode, ResponseCache
from eval_pipeline.providers.config import ModelConfig
from eval_pipeline.providers.harness import CallResult, CallSession, CallTag
from eval_pipeline.providers.labels import expect_answer
from eval_pipeline.providers.redact import Redactor
from eval_pipeline.providers.transport import AttemptOutcome, WireRequest
from eval_pipeline.providers.types import Message, ModelRequest
from eval_pipeline.providers.wire import openai_body, parse_openai_body
from eval_pipeline.sim.process import SimHandle
from eval_pipeline.sim.sessions import session_for
from eval_pipeline.warehouse.envelopes import COLUMNS, TABLE, load_journal
from eval_pipeline_tests.providers.conftest import (
    FAKE_KEY,
    KEY_ENV,
    LOOKUP,
    new_session,
    sim_config,
)
from eval_pipeline_tests.providers.test_provider_planted import planted_request


class EchoingAuthFailure:
    """A provider that echoes the key back in its 401 body, as some real ones do."""

    def wire_body(self, request: ModelRequest) -> dict[str, Any]:
        return openai_body(request)

    async def send(self, wire: WireRequest, request: ModelRequest) -> AttemptOutcome:
        return AttemptOutcome(
            http_status=401,
            body=f'{{"error": "Incorrect API key provided: {FAKE_KEY}"}}',
            cause="harness_4xx",
            detail=f"HTTP 401 for key {FAKE_KEY}",
            retry_after_ms=None,
            response=None,
        )

    async def close(self) -> None:
        return None


async def a_full_run(sim: SimHandle, tmp_path: Path, warehouse: Path) -> None:
    cache = ResponseCache(tmp_path / "cache")
    async with new_session(tmp_path, cache=cache, cache_mode="record") as session:
        for api in ("openai_compatible", "anthropic_messages"):
            planted = session.client(sim_config(sim, "planted", api=api))
            await asyncio.gather(
                *(
                    planted.call(
                        planted_request(n), CallTag(lane=api, case_id=str(n)), expect_answer("42")
                    )
                    for n in range(24)
                )
            )
            responder = session.client(sim_config(sim, "tool-responder", api=api))
            request = ModelRequest(
                messages=(Message(role="user", content="look up ART-0001"),),
                tools=(LOOKUP,),
                max_tokens=64,
                seed=5,
            )
            await responder.call(request, CallTag(lane=api, case_id="tool"))
            unknown = sim_config(sim, "no-such-profile", api=api, price_model="tool-responder")
            not_found = await session.client(unknown).call(
                request, CallTag(lane=api, case_id="404")
            )
            assert not_found.status == "harness_error" and not_found.final.http_status == 404
        echo = ModelConfig(
            name="echo", api="openai_chat", provider="echo", model="planted", api_key_env=KEY_ENV
        )
        result = await session.client(echo, transport=EchoingAuthFailure()).call(
            planted_request(20), CallTag(lane="echo", case_id="401")
        )
        assert result.status == "harness_error"
        assert "[REDACTED]" in (result.final.response_body or "")
    load_journal(session.journal.path, warehouse)


def test_planted_key_is_nowhere_written(
    sim: SimHandle, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    for name in ("openai", "anthropic", "httpx", "httpx2", "httpcore", "eval_pipeline"):
        logging.getLogger(name).setLevel(logging.DEBUG)
    warehouse = tmp_path / "warehouse.duckdb"
    asyncio.run(a_full_run(sim, tmp_path, warehouse))

    written = [path for path in tmp_path.rglob("*") if path.is_file()]
    assert any(p.suffix == ".jsonl" for p in written)
    assert any(p.suffix == ".duckdb" for p in written)
    assert any(p.parent.parent.name == "entries" for p in written)
    for path in written:
        assert FAKE_KEY.encode() not in path.read_bytes(), f"key found in {path}"

    with duckdb.connect(str(warehouse), read_only=True) as con:
        rows = con.execute(f"SELECT count(*) FROM {TABLE}").fetchone()
        assert rows is not None and rows[0] > 48
        for name, kind in COLUMNS:
            if kind.startswith("VARCHAR"):
                found = con.execute(
                    f"SELECT count(*) FROM {TABLE} WHERE contains({name}, ?)", [FAKE_KEY]
                ).fetchone()
                assert found == (0,), f"key found in column {name}"

    assert caplog.records, "DEBUG logging was captured"
    assert any(
        "HTTP Request" in r.getMessage() or "Request options" in r.getMessage()
        for r in caplog.records
    )
    for record in caplog.records:
        assert FAKE_KEY not in record.getMessage()
        assert FAKE_KEY not in str(record.__dict__)
    assert FAKE_KEY not in caplog.text

    stdout, stderr = sim.output()
    assert FAKE_KEY not in stdout and FAKE_KEY not in stderr


def test_a_key_the_model_answers_with_is_redacted_in_every_column(
    sim: SimHandle, tmp_path: Path
) -> None:
    """tool-responder answers with the last word of the prompt: here, the key."""
    warehouse = tmp_path / "warehouse.duckdb"

    async def run() -> str | None:
        async with new_session(tmp_path) as session:
            client = session.client(sim_config(sim, "tool-responder"))
            request = ModelRequest(
                messages=(Message(role="user", content=f"Repeat the token {FAKE_KEY}"),),
                max_tokens=64,
            )
            result = await client.call(request, CallTag(lane="m", case_id="echo"))
        load_journal(session.journal.path, warehouse)
        return result.label.answer

    answer = asyncio.run(run())
    assert answer == "[REDACTED]"
    _assert_key_nowhere(tmp_path, warehouse, FAKE_KEY)


def _escaped(text: str) -> str:
    """`text` as JSON can write it: every character as a \\u escape."""
    return "".join(f"\\u{ord(c):04x}" for c in text)


class EchoesTheKeyEscaped:
    """A server that echoes the key JSON-escaped, in a reply and in an error body."""

    def __init__(self) -> None:
        self.calls = 0

    def wire_body(self, request: ModelRequest) -> dict[str, Any]:
        return openai_body(request)

    async def send(self, wire: WireRequest, request: ModelRequest) -> AttemptOutcome:
        self.calls += 1
        if self.calls == 1:
            body = (
                '{"error": {"message": "Incorrect API key provided: '
                + _escaped(FAKE_KEY[:3])
                + FAKE_KEY[3:]
                + '"}}'
            )
            return AttemptOutcome(
                http_status=401,
                body=body,
                cause="harness_4xx",
                detail="HTTP 401",
                retry_after_ms=None,
                response=None,
            )
        body = (
            '{"choices": [{"message": {"content": "ANSWER: '
            + _escaped(FAKE_KEY)
            + '"}, "finish_reason": "stop"}], '
            + '"usage": {"prompt_tokens": 5, "completion_tokens": 3}}'
        )
        return AttemptOutcome(
            http_status=200,
            body=body,
            cause=None,
            detail=None,
            retry_after_ms=None,
            response=parse_openai_body(body),
        )

    async def close(self) -> None:
        return None


def test_a_json_escaped_key_is_redacted_in_the_raw_body_and_the_decoded_text(
    tmp_path: Path,
) -> None:
    warehouse = tmp_path / "warehouse.duckdb"
    config = ModelConfig(
        name="escaped", api="openai_chat", provider="echo", model="planted", api_key_env=KEY_ENV
    )

    async def run() -> list[Any]:
        async with new_session(tmp_path) as session:
            client = session.client(config, transport=EchoesTheKeyEscaped())
            results = [
                await client.call(planted_request(20), CallTag(lane="m", case_id=str(n)))
                for n in range(2)
            ]
        load_journal(session.journal.path, warehouse)
        return results

    refused, answered = asyncio.run(run())
    for result in (refused, answered):
        body = result.final.response_body or ""
        assert "[REDACTED]" in body
        assert FAKE_KEY not in json.dumps(json.loads(body), ensure_ascii=False)
    assert answered.label.answer == "[REDACTED]"
    _assert_key_nowhere(tmp_path, warehouse, FAKE_KEY)


def _assert_key_nowhere(folder: Path, warehouse: Path, key: str) -> None:
    """Neither raw nor JSON-escaped in any file, nor decoded in any text column."""
    for path in folder.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            assert key.encode() not in data, f"key found in {path}"
            assert _escaped(key[:3]).encode() not in data, f"escaped key found in {path}"
    with duckdb.connect(str(warehouse), read_only=True) as con:
        for name, kind in COLUMNS:
            if kind.startswith("VARCHAR"):
                values = [row[0] for row in con.execute(f"SELECT {name} FROM {TABLE}").fetchall()]
                for value in values:
                    if value is None:
                        continue
                    assert key not in value, f"key found in column {name}"
                    if value.startswith("{"):
                        decoded = json.dumps(json.loads(value), ensure_ascii=False)
                        assert key not in decoded, f"key found decoded in column {name}"


def test_the_redactor_catches_every_json_spelling_of_a_key() -> None:
    key = "sk-ant/abc+def\u00e9\U0001f511xyz"
    redact = Redactor([key])
    spellings = [
        key,
        json.dumps(key)[1:-1],  # ensure_ascii: \u00e9 and a surrogate pair
        json.dumps(key, ensure_ascii=False)[1:-1].replace("/", "\\/"),
        "".join(f"\\u{ord(c):04X}" if c.isascii() else c for c in key),
    ]
    for spelling in spellings:
        body = '{"error": "bad key ' + spelling + '"}'
        clean = redact(body)
        assert clean == '{"error": "bad key [REDACTED]"}', spelling
        assert key not in json.loads(clean)["error"]
    assert redact("sk-ant-other") == "sk-ant-other"


def test_the_redactor_reads_every_two_character_json_escape() -> None:
    """JSON writes a tab as `\\t` and a carriage return as `\\r`: a key holding one, echoed
    in a body, is still found and redacted."""
    key = "sk-tab\there\rand-more"
    redact = Redactor([key])
    body = '{"error": "bad key ' + json.dumps(key)[1:-1] + '"}'
    assert "\\t" in body and "\\r" in body
    assert redact.finds(body)
    assert redact(body) == '{"error": "bad key [REDACTED]"}'


class AnswersWithAnotherKey:
    """A reply holding another client's key, base64-encoded, and in a tool call's
    arguments percent-encoded: the body a transport hands back, and its parse."""

    def __init__(self, key: str) -> None:
        self.key = key

    def wire_body(self, request: ModelRequest) -> dict[str, Any]:
        return openai_body(request)

    async def send(self, wire: WireRequest, request: ModelRequest) -> AttemptOutcome:
        encoded = base64.b64encode(self.key.encode()).decode()
        arguments = json.dumps({"query": urllib.parse.quote(self.key, safe="")})
        body = json.dumps(
            {
                "id": f"chatcmpl-{self.key}",
                "choices": [
                    {
                        "message": {
                            "content": f"ANSWER: {encoded}",
                            "tool_calls": [
                                {"id": "c1", "function": {"name": "lookup", "arguments": arguments}}
                            ],
                        },
                        "finish_reason": "stop",
                    }
                ],
                "usage": {"prompt_tokens": 5, "completion_tokens": 3},
            }
        )
        return AttemptOutcome(
            http_status=200,
            body=body,
            cause=None,
            detail=None,
            retry_after_ms=None,
            response=parse_openai_body(body),
        )

    async def close(self) -> None:
        return None


def test_a_session_redacts_every_configured_key_before_any_client_and_in_the_reply_it_returns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """session_for knows the key of every config in the models folder whose variable is
    set (the judge's, another model's), so a reply that echoes one is redacted before
    anything reads it: the result's response, label and envelope, and the cache entry a
    hit is served from."""
    other_env, other_key = "EVALP_TEST_OTHER_MODEL_KEY", "sk-other-model-key-7a6b5c4d3e2f1"
    monkeypatch.setenv(KEY_ENV, FAKE_KEY)
    monkeypatch.setenv(other_env, other_key)
    models = tmp_path / "models"
    models.mkdir()
    (models / "other.yaml").write_text(
        "name: other\napi: openai_chat\nprovider: elsewhere\nmodel: gpt-4.1\n"
        f"api_key_env: {other_env}\n"
    )
    monkeypatch.setenv("EVALP_MODELS_DIR", str(models))
    config = ModelConfig(
        name="mine", api="openai_chat", provider="echo", model="planted", api_key_env=KEY_ENV
    )
    cache = ResponseCache(tmp_path / "cache")
    transport = AnswersWithAnotherKey(other_key)
    request, tag = planted_request(20), CallTag(lane="m", case_id="c")

    async def call(session: CallSession, mode: CacheMode) -> CallResult:
        session.cache, session.cache_mode = cache, mode
        async with session:
            return await session.client(config, transport=transport).call(request, tag)

    # recorded by a session that never heard of the other key: the cache keeps it
    unaware = asyncio.run(call(new_session(tmp_path / "unaware"), "record"))
    assert unaware.response is not None and unaware.response.response_id == (
        f"chatcmpl-{other_key}"
    )
    results = []
    for mode in ("replay", "record"):
        with session_for({"mine": config}, run_id=mode, journal=tmp_path / f"{mode}.jsonl") as s:
            assert s.redact.finds(other_key) and s.redact.finds(FAKE_KEY)  # before any client
            results.append(asyncio.run(call(s, mode)))
    replayed, recorded = results
    assert replayed.final.cache_status == "hit" and recorded.final.cache_status == "hit"
    for result in (replayed, recorded):
        response = result.response
        assert response is not None
        assert response.text == "ANSWER: [REDACTED]"
        assert response.response_id == "chatcmpl-[REDACTED]"
        assert response.tool_calls[0].arguments == '{"query": "[REDACTED]"}'
        assert other_key not in result.model_dump_json()
    fresh = ResponseCache(tmp_path / "fresh")
    cache = fresh
    with session_for({"mine": config}, run_id="fresh", journal=tmp_path / "fresh.jsonl") as s:
        sent = asyncio.run(call(s, "record"))
    assert sent.final.cache_status == "miss" and sent.response is not None
    assert sent.response.text == "ANSWER: [REDACTED]"
    assert sent.response.tool_calls[0].arguments == '{"query": "[REDACTED]"}'
    assert other_key not in sent.model_dump_json()


def test_an_sdk_error_detail_carries_no_body_and_a_detail_holding_a_key_is_redacted(
    tmp_path: Path,
) -> None:
    """The SDK transport's failure details are its own words for a timeout or a lost
    connection, never the exception's message (which may quote the body); a refusal's
    detail quotes the server's own message (`HTTP 401: ...`), which the session redacts
    where the outcome enters the process, like every detail a transport gives."""
    from eval_pipeline.providers import sdk_transport

    config = ModelConfig(
        name="refused", api="anthropic_messages", provider="echo", model="m", api_key_env=KEY_ENV
    )

    request = httpx2.Request("POST", "http://127.0.0.1:9/v1/messages")
    reply = httpx2.Response(401, request=request, text=f'{{"error": "bad key {FAKE_KEY}"}}')
    status = anthropic.AuthenticationError(
        f"Error code: 401 - {FAKE_KEY}", response=reply, body=None
    )
    timeout = openai.APITimeoutError(request)
    for error in (timeout, openai.APIConnectionError(request=request)):
        outcome = sdk_transport._failure(error, config)
        assert FAKE_KEY not in (outcome.detail or ""), outcome.detail
    session = new_session(tmp_path, secrets=[FAKE_KEY])
    refusal = session.redacted(sdk_transport._failure(status, config))
    assert refusal.detail == "HTTP 401: bad key [REDACTED]"
    session.journal.close()
    leaky = AttemptOutcome(
        http_status=None,
        body=None,
        cause="connect",
        detail=f"connection error: refused for {base64.b64encode(FAKE_KEY.encode()).decode()}",
        retry_after_ms=None,
        response=None,
    )
    assert session.redacted(leaky).detail == "connection error: refused for [REDACTED]"
    assert refusal.body == '{"error": "bad key [REDACTED]"}'
