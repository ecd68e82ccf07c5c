"""Record/replay: keys hold what changes the answer and nothing else; replay is offline.

A second run of the same requests from the cache makes zero provider calls (counted on
the server) and produces the same envelopes apart from identity, timing and provenance.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

import pytest

from eval_pipeline.providers.cache import ResponseCache, key_of
from eval_pipeline.providers.config import ModelConfig
from eval_pipeline.providers.envelope import CallEnvelope, read_journal
from eval_pipeline.providers.errors import ReplayMissError
from eval_pipeline.providers.harness import CallResult, CallTag, cache_material
from eval_pipeline.providers.labels import expect_answer
from eval_pipeline.providers.types import Message, ModelRequest
from eval_pipeline.sim.process import SimHandle
from eval_pipeline_tests.providers.conftest import LOOKUP, new_session, sim_config
from eval_pipeline_tests.providers.test_provider_planted import planted_request

BASE = ModelRequest(
    messages=(Message(role="user", content="Which artist? ART-0001"),),
    tools=(LOOKUP,),
    max_tokens=64,
    temperature=0.0,
    seed=1,
)
CONFIG = ModelConfig(
    name="sim-a",
    api="openai_compatible",
    provider="simulated",
    model="tool-responder",
    base_url="http://127.0.0.1:1/v1",
)


@pytest.mark.parametrize(
    "change",
    [
        {"temperature": 0.7},
        {"top_p": 0.9},
        {"max_tokens": 65},
        {"seed": 2},
        {"replicate": 1},
        {"stop": ("END",)},
        {"tool_choice": "required"},
        {"tools": ()},
        {"extra": {"presence_penalty": 0.1}},
        {"messages": (Message(role="user", content="Which artist? ART-0002"),)},
    ],
)
def test_everything_that_changes_the_answer_changes_the_key(change: dict[str, Any]) -> None:
    base = key_of(cache_material(CONFIG, BASE))
    assert key_of(cache_material(CONFIG, BASE.model_copy(update=change))) != base


@pytest.mark.parametrize(
    "change",
    [{"model": "planted"}, {"provider": "vllm-local"}, {"api": "anthropic_messages"}],
)
def test_model_and_provider_are_in_the_key(change: dict[str, Any]) -> None:
    other = CONFIG.model_copy(update=change)
    assert key_of(cache_material(other, BASE)) != key_of(cache_material(CONFIG, BASE))


def test_what_does_not_change_the_answer_stays_out_of_the_key() -> None:
    other = CONFIG.model_copy(
        update={
            "name": "another-name",
            "base_url": "http://127.0.0.1:2/v1",
            "timeout_s": 5.0,
            "max_in_flight": 1,
            "api_key_env": "OTHER_KEY",
            "retry": CONFIG.retry.model_copy(update={"max_attempts": 9}),
        }
    )
    assert key_of(cache_material(other, BASE)) == key_of(cache_material(CONFIG, BASE))


def conversation_requests() -> list[ModelRequest]:
    requests = []
    for n in range(6):
        requests.append(
            BASE.model_copy(
                update={"messages": (Message(role="user", content=f"Case {n}: ART-000{n}"),)}
            )
        )
    requests.append(BASE.model_copy(update={"tools": (), "replicate": 3}))
    return requests


async def run_all(
    sim: SimHandle, tmp_path: Path, run_id: str, cache: ResponseCache, mode: str
) -> list[CallResult]:
    async with new_session(tmp_path, run_id=run_id, cache=cache, cache_mode=mode) as session:
        client = session.client(sim_config(sim, "tool-responder"))
        return list(
            await asyncio.gather(
                *(
                    client.call(r, CallTag(lane="model", case_id=f"c{i}"))
                    for i, r in enumerate(conversation_requests())
                )
            )
        )


def test_replay_makes_zero_calls_and_identical_envelopes(
    sim: SimHandle, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    cache = ResponseCache(tmp_path / "cache")
    caplog.set_level(logging.INFO, logger="eval_pipeline.providers.cache")
    recorded = asyncio.run(run_all(sim, tmp_path, "record", cache, "record"))
    calls_after_record = sim.request_count()
    assert calls_after_record == len(recorded)
    assert all(r.final.cache_status == "miss" for r in recorded)
    assert sum("cache miss" in m for m in caplog.messages) == len(recorded)

    replayed = asyncio.run(run_all(sim, tmp_path, "replay", cache, "replay"))
    assert sim.request_count() == calls_after_record  # zero provider calls
    assert all(r.final.cache_status == "hit" for r in replayed)
    assert sum("cache hit" in m for m in caplog.messages) == len(replayed)

    def stable(path: Path) -> list[dict[str, object]]:
        return [e.stable_view() for e in read_journal(path)]

    first = stable(tmp_path / "runs" / "record" / "envelopes.jsonl")
    second = stable(tmp_path / "runs" / "replay" / "envelopes.jsonl")
    assert sorted(first, key=str) == sorted(second, key=str)


def test_replay_miss_names_the_key_and_what_differed(sim: SimHandle, tmp_path: Path) -> None:
    cache = ResponseCache(tmp_path / "cache")
    asyncio.run(run_all(sim, tmp_path, "record", cache, "record"))
    before = sim.request_count()

    async def replay_changed() -> None:
        async with new_session(tmp_path, run_id="r2", cache=cache, cache_mode="replay") as s:
            client = s.client(sim_config(sim, "tool-responder"))
            changed = conversation_requests()[0].model_copy(update={"temperature": 0.7})
            await client.call(changed, CallTag(lane="model", case_id="c0"))

    with pytest.raises(ReplayMissError) as caught:
        asyncio.run(replay_changed())
    message = str(caught.value)
    assert caught.value.key in message
    assert "request.temperature (0.0 -> 0.7)" in message
    assert sim.request_count() == before

    async def replay_unknown() -> None:
        async with new_session(tmp_path, run_id="r3", cache=cache, cache_mode="replay") as s:
            client = s.client(sim_config(sim, "tool-responder"))
            unseen = BASE.model_copy(update={"max_tokens": 7})
            await client.call(unseen, CallTag(lane="model", case_id="new"))

    with pytest.raises(ReplayMissError, match="nothing recorded for this model, lane, case"):
        asyncio.run(replay_unknown())


def test_infrastructure_and_harness_errors_are_never_cached(sim: SimHandle, tmp_path: Path) -> None:
    cache = ResponseCache(tmp_path / "cache")

    async def record() -> list[CallEnvelope]:
        async with new_session(tmp_path, cache=cache, cache_mode="record") as session:
            client = session.client(sim_config(sim, "planted"))
            for n in (0, 1, 2, 3, 6, 20):
                await client.call(
                    planted_request(n), CallTag(lane="model", case_id=str(n)), expect_answer("42")
                )
            await client.call(
                ModelRequest(messages=(Message(role="user", content="untagged"),), max_tokens=8),
                CallTag(lane="model", case_id="400"),
            )
            return session.envelopes

    asyncio.run(record())
    stored = list((tmp_path / "cache" / "entries").rglob("*.json"))
    assert len(stored) == 2  # the empty-body reply (6) and the right answer (20) only

    async def replay() -> list[str]:
        async with new_session(tmp_path, run_id="r2", cache=cache, cache_mode="replay") as s:
            client = s.client(sim_config(sim, "planted"))
            labels = []
            for n in (6, 20):
                result = await client.call(
                    planted_request(n), CallTag(lane="model", case_id=str(n)), expect_answer("42")
                )
                labels.append(str(result.label.label))
            with pytest.raises(ReplayMissError):
                await client.call(planted_request(0), CallTag(lane="model", case_id="0"))
            return labels

    assert asyncio.run(replay()) == ["empty", "right"]


def test_the_same_request_from_another_case_is_the_same_answer(
    sim: SimHandle, tmp_path: Path
) -> None:
    cache = ResponseCache(tmp_path / "cache")
    asyncio.run(run_all(sim, tmp_path, "record", cache, "record"))
    before = sim.request_count()

    async def other_case() -> CallResult:
        async with new_session(tmp_path, run_id="r4", cache=cache, cache_mode="replay") as s:
            client = s.client(sim_config(sim, "tool-responder", name="renamed-config"))
            return await client.call(
                conversation_requests()[0], CallTag(lane="product", case_id="elsewhere", turn=3)
            )

    assert asyncio.run(other_case()).final.cache_status == "hit"
    assert sim.request_count() == before
