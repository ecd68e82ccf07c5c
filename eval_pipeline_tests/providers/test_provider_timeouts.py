"""A reply slower than the client's timeout is a timeout drop; a closed connection is not.

Both SDKs' aiohttp transport reports a connection the server closed as a timeout; the
harness must still tell the two causes apart (the planted profile covers the closed
connection, this covers the slow reply), through the SDKs (`openai_chat`,
`anthropic_messages`) and the lean aiohttp transport (`openai_compatible`) alike.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from eval_pipeline.providers.calibration import planted_request
from eval_pipeline.providers.harness import CallResult, CallTag
from eval_pipeline.providers.labels import expect_answer
from eval_pipeline.sim.process import SimHandle, running_sim
from eval_pipeline_tests.providers.conftest import new_session, sim_config


@pytest.fixture(scope="module")
def slow_sim() -> Iterator[SimHandle]:
    with running_sim(latency_ms=1500) as handle:
        yield handle


@pytest.mark.parametrize("api", ["openai_compatible", "openai_chat", "anthropic_messages"])
def test_slow_reply_is_a_timeout_drop(slow_sim: SimHandle, tmp_path: Path, api: str) -> None:
    config = sim_config(slow_sim, "tool-responder", api=api, timeout_s=0.3)

    async def run() -> CallResult:
        async with new_session(tmp_path) as session:
            return await session.client(config).call(
                planted_request(20), CallTag(lane="model", case_id="slow"), expect_answer("x")
            )

    result = asyncio.run(run())
    assert result.status == "infra_error"
    assert result.label is not None and result.label.label == "drop"
    assert result.label.drop_cause == "timeout"
    assert all(envelope.failure_cause == "timeout" for envelope in result.envelopes)
