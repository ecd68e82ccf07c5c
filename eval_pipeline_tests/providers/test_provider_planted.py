"""The planted profile: all 24 labels recovered exactly, in both wire formats, over HTTP.

The naive "HTTP 200 and the expected text" rate on the same envelopes is 4/24, and
accuracy on yield is 50% (4 right against 4 wrong).
"""

from __future__ import annotations

import asyncio
from fractions import Fraction
from pathlib import Path

import pytest

from eval_pipeline.providers.calibration import (
    PLANTED_EXPECTED,
    PlantedCalibration,
    calibrate_planted,
    planted_request,
)
from eval_pipeline.providers.harness import CallResult, CallTag
from eval_pipeline.providers.labels import LABELS, expect_answer, naive_pass
from eval_pipeline.sim.process import SimHandle
from eval_pipeline_tests.providers.conftest import new_session, sim_config

EXPECTED = PLANTED_EXPECTED


async def run_planted(sim: SimHandle, tmp_path: Path, api: str) -> list[CallResult]:
    async with new_session(tmp_path) as session:
        client = session.client(sim_config(sim, "planted", api=api))
        return list(
            await asyncio.gather(
                *(
                    client.call(
                        planted_request(n),
                        CallTag(lane="model", case_id=f"planted-{n}"),
                        expect_answer(EXPECTED),
                    )
                    for n in range(24)
                )
            )
        )


@pytest.mark.parametrize("api", ["openai_compatible", "openai_chat", "anthropic_messages"])
def test_planted_labels_are_recovered_exactly(sim: SimHandle, tmp_path: Path, api: str) -> None:
    results = asyncio.run(run_planted(sim, tmp_path, api))
    assert [r.label.label for r in results] == [LABELS[n // 4] for n in range(24)]
    assert [r.label.drop_cause for r in results[:4]] == ["5xx", "429", "5xx", "connect"]
    # the drops were retried (retries counted apart), and are infrastructure errors (‡)
    assert all(r.status == "infra_error" and r.mark == "‡" for r in results[:4])
    assert all(r.retries == 2 for r in results[:4])
    assert all(r.status == "ok" for r in results[4:])


@pytest.mark.parametrize("api", ["openai_compatible", "openai_chat", "anthropic_messages"])
def test_naive_rate_is_4_of_24_and_accuracy_on_yield_is_half(
    sim: SimHandle, tmp_path: Path, api: str
) -> None:
    results = asyncio.run(run_planted(sim, tmp_path, api))
    finals = [r.final for r in results]
    naive = sum(naive_pass(e.http_status, e.response_body, EXPECTED) for e in finals)
    assert Fraction(naive, len(finals)) == Fraction(4, 24)

    from eval_pipeline.providers.labels import summarize

    summary = summarize(e for r in results for e in r.envelopes)
    assert summary.labels == {label: 4 for label in LABELS}
    assert summary.accuracy_on_yield == Fraction(1, 2)
    assert summary.yield_rate == Fraction(8, 24)
    assert summary.schema_rate == Fraction(4, 24)
    assert summary.retries == 8
    assert summary.infra_errors == 4
    assert summary.drop_causes == {"5xx": 2, "429": 1, "connect": 1}


@pytest.mark.parametrize("api", ["openai_compatible", "openai_chat", "anthropic_messages"])
def test_calibration_report_states_recovery_and_rates(
    sim: SimHandle, tmp_path: Path, api: str
) -> None:
    async def run() -> PlantedCalibration:
        async with new_session(tmp_path) as session:
            return await calibrate_planted(session, sim_config(sim, "planted", api=api))

    report = asyncio.run(run())
    assert report.recovered and report.mismatches == []
    assert (report.naive_passes, report.total) == (4, 24)
    assert (report.yield_rate, report.accuracy_on_yield) == ("1/3", "1/2")
    assert report.infra_errors == 4
    broken = report.model_copy(update={"observed_labels": ("empty", *report.observed_labels[1:])})
    assert not broken.recovered
    assert broken.mismatches == ["PLANTED-0: expected drop, got empty"]
