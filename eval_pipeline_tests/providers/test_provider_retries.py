"""Retries: every attempt recorded, Retry-After honoured, bounded, counted apart from drops.

The behaviour replaced is the SDKs' own retry loop: it retries out of sight, so the server
sees more requests than the harness records. Here the SDK retries are off and the server's
request count equals the number of envelopes.
"""

from __future__ import annotations

import asyncio
import random
from pathlib import Path
from typing import Any

import duckdb
import openai
import pytest

from eval_pipeline.providers.config import RetryPolicy
from eval_pipeline.providers.harness import CallTag, backoff_delay_s
from eval_pipeline.providers.labels import summarize
from eval_pipeline.providers.transport import AttemptOutcome, WireRequest, parse_retry_after_ms
from eval_pipeline.providers.types import Message, ModelRequest
from eval_pipeline.providers.wire import openai_body
from eval_pipeline.sim.process import SimHandle
from eval_pipeline.warehouse.envelopes import OUTCOMES_VIEW, infra_error_calls, load_journal
from eval_pipeline_tests.providers.conftest import (
    FAKE_KEY,
    FAST_RETRY,
    new_session,
    sim_config,
)
from eval_pipeline_tests.providers.test_provider_planted import planted_request


def ask(text: str, seed: int = 0) -> ModelRequest:
    return ModelRequest(messages=(Message(role="user", content=text),), max_tokens=32, seed=seed)


def test_backoff_is_jittered_exponential_and_honours_retry_after() -> None:
    policy = RetryPolicy(base_delay_s=1.0, multiplier=2.0, max_delay_s=5.0, jitter=0.5)
    rng = random.Random(0)
    for attempt, ceiling in [(1, 1.0), (2, 2.0), (3, 4.0), (4, 5.0), (9, 5.0)]:
        delays = [backoff_delay_s(policy, attempt, None, rng) for _ in range(200)]
        assert all(ceiling * 0.5 <= d <= ceiling for d in delays)
        assert len(set(delays)) > 100  # jittered
    assert backoff_delay_s(policy, 1, 7_500, rng) == 7.5  # Retry-After wins when longer


def test_retry_after_headers() -> None:
    assert parse_retry_after_ms({"retry-after-ms": "250", "retry-after": "3"}) == 250
    assert parse_retry_after_ms({"retry-after": "3"}) == 3_000
    assert parse_retry_after_ms({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}) == 0
    assert parse_retry_after_ms({}) is None


def test_every_attempt_is_recorded_with_its_number(sim: SimHandle, tmp_path: Path) -> None:
    async def run() -> Any:
        async with new_session(tmp_path) as session:
            client = session.client(sim_config(sim, "planted"))
            return await client.call(planted_request(1), CallTag(lane="model", case_id="p1"))

    result = asyncio.run(run())
    assert [e.attempt for e in result.envelopes] == [1, 2, 3]
    assert [e.status for e in result.envelopes] == ["retried", "retried", "infra_error"]
    assert [e.final for e in result.envelopes] == [False, False, True]
    assert all(e.http_status == 429 and e.retry_after_ms == 3 for e in result.envelopes)
    assert all((e.backoff_ms or 0) >= 3 for e in result.envelopes[:-1])
    assert result.mark == "‡" and result.label.label == "drop" and result.retries == 2
    assert sim.request_count() == len(result.envelopes)  # nothing retried out of sight
    summary = summarize(result.envelopes)
    assert summary.retries == 2 and summary.labels["drop"] == 1  # counted apart


def test_sdk_retries_would_hide_attempts(sim: SimHandle) -> None:
    """The naive client (SDK retries on) makes 3 requests and shows one failure."""

    async def naive() -> int:
        client = openai.AsyncOpenAI(api_key=FAKE_KEY, base_url=sim.openai_base_url, max_retries=2)
        seen = 0
        try:
            await client.chat.completions.create(model="planted", **openai_body(planted_request(0)))
        except openai.APIStatusError:
            seen += 1
        finally:
            await client.close()
        return seen

    recorded = asyncio.run(naive())
    assert recorded == 1
    assert sim.request_count() == 3  # != recorded: two attempts went unrecorded


def test_retries_are_bounded_in_total_time(tmp_path: Path) -> None:
    """A Retry-After longer than the time left ends the call at once as an infra error."""

    class RateLimited:
        def __init__(self) -> None:
            self.sent = 0

        def wire_body(self, request: ModelRequest) -> dict[str, Any]:
            return openai_body(request)

        async def send(self, wire: WireRequest, request: ModelRequest) -> AttemptOutcome:
            self.sent += 1
            return AttemptOutcome(
                http_status=429,
                body='{"error": "slow down"}',
                cause="429",
                detail="HTTP 429",
                retry_after_ms=60_000,
                response=None,
            )

        async def close(self) -> None:
            return None

    slept: list[float] = []

    async def fake_sleep(seconds: float) -> None:
        slept.append(seconds)

    transport = RateLimited()
    policy = FAST_RETRY.model_copy(update={"max_attempts": 10, "max_total_s": 5.0})

    async def run() -> Any:
        from eval_pipeline.providers.config import ModelConfig

        config = ModelConfig(
            name="fake",
            api="openai_compatible",
            provider="fake",
            model="planted",
            base_url="http://127.0.0.1:9",
            retry=policy,
        )
        async with new_session(tmp_path, sleep=fake_sleep) as session:
            return await session.client(config, transport=transport).call(
                ask("hello"), CallTag(lane="m", case_id="c")
            )

    result = asyncio.run(run())
    assert transport.sent == 1 and slept == []
    assert result.status == "infra_error" and result.label.drop_cause == "429"


def test_count_bound_and_5xx(sim: SimHandle, tmp_path: Path) -> None:
    async def run() -> Any:
        async with new_session(tmp_path) as session:
            config = sim_config(
                sim, "flaky:always", retry=FAST_RETRY.model_copy(update={"max_attempts": 5})
            )
            return await session.client(config).call(ask("hi"), CallTag(lane="m", case_id="c"))

    result = asyncio.run(run())
    assert len(result.envelopes) == 5 == sim.request_count()
    assert {e.http_status for e in result.envelopes} <= {500, 502, 503}
    assert result.label.drop_cause == "5xx"


def test_own_malformed_request_is_a_harness_error_not_a_drop(
    sim: SimHandle, tmp_path: Path
) -> None:
    async def run() -> Any:
        async with new_session(tmp_path) as session:
            config = sim_config(sim, "planted")  # no PLANTED tag: the server answers 400
            return await session.client(config).call(
                ask("no tag here"), CallTag(lane="m", case_id="c")
            )

    result = asyncio.run(run())
    assert result.status == "harness_error"
    assert result.final.http_status == 400 and result.final.failure_cause == "harness_4xx"
    assert result.label.label is None and len(result.envelopes) == 1  # not retried
    summary = summarize(result.envelopes)
    assert summary.harness_errors == 1 and summary.labels["drop"] == 0


def test_flaky_faults_are_retried_until_served(sim: SimHandle, tmp_path: Path) -> None:
    async def run() -> Any:
        async with new_session(tmp_path) as session:
            client = session.client(sim_config(sim, "flaky:heals"))
            return await asyncio.gather(
                *(
                    client.call(ask(f"word{n}", seed=n), CallTag(lane="m", case_id=str(n)))
                    for n in range(60)
                )
            )

    results = asyncio.run(run())
    retried = [r for r in results if r.retries]
    assert retried, "the flaky endpoint should have faulted some first attempts"
    for result in retried:
        assert result.retries == 1 and result.status == "ok"
    assert sim.request_count() == sum(len(r.envelopes) for r in results)


def test_infra_error_is_rerun_alone_and_healed(sim: SimHandle, tmp_path: Path) -> None:
    database = tmp_path / "warehouse.duckdb"
    config = sim_config(sim, "flaky:heal-late")  # fails 4 times, then serves

    async def first_run() -> None:
        async with new_session(tmp_path) as session:
            client = session.client(config)
            await client.call(ask("alpha"), CallTag(lane="m", case_id="a"))
        load_journal(session.journal.path, database)

    asyncio.run(first_run())
    with duckdb.connect(str(database)) as con:
        broken = infra_error_calls(con, "run-1")
    assert [e.case_id for e in broken] == ["a"]

    async def heal() -> Any:
        async with new_session(tmp_path, run_id="run-1") as session:
            session.client(config)
            healed = [await session.rerun(envelope) for envelope in broken]
        load_journal(session.journal.path, database)
        return healed

    (healed,) = asyncio.run(heal())
    assert healed.status == "ok" and healed.call_id == broken[0].call_id
    assert [e.attempt for e in healed.envelopes] == [4, 5]
    with duckdb.connect(str(database)) as con:
        assert infra_error_calls(con, "run-1") == []
        rows = con.execute(
            f"SELECT status, attempt FROM {OUTCOMES_VIEW} WHERE call_id = ?", [healed.call_id]
        ).fetchall()
        assert rows == [("ok", 5)]
        total = con.execute("SELECT count(*) FROM runs.call_envelopes").fetchone()
        assert total == (5,)  # the failed attempts stay on the record
    assert load_journal(tmp_path / "runs" / "run-1" / "envelopes.jsonl", database) == 0


@pytest.mark.parametrize("status", [408, 429, 500, 502, 503, 529])
def test_retryable_statuses(status: int) -> None:
    from eval_pipeline.providers.transport import cause_of_status

    assert cause_of_status(status) in {"timeout", "429", "5xx"}
    assert cause_of_status(400) == cause_of_status(404) == "harness_4xx"
