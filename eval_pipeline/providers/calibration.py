"""Calibrating the call classifier on failures planted on purpose, before trusting live runs.

The simulated provider's `planted` profile answers 24 requests with four replies per label
(drop, empty, truncated, schema, wrong, right). Running them through the real harness and
SDKs shows that every label is recovered, and how far the naive "HTTP 200 and the expected
text" rate is from yield and accuracy on yield on the same envelopes.
"""

from __future__ import annotations

import asyncio
from fractions import Fraction
from typing import TYPE_CHECKING

from eval_pipeline.providers.config import ModelConfig
from eval_pipeline.providers.labels import LABELS, expect_answer, naive_pass, summarize
from eval_pipeline.providers.types import Message, ModelRequest, ToolSpec
from eval_pipeline.records import FrozenRecord

if TYPE_CHECKING:
    from eval_pipeline.providers.harness import CallSession

PLANTED_COUNT = 24
PLANTED_EXPECTED = "ANSWER: 42"
PLANTED_LOOKUP_TOOL = ToolSpec(
    name="lookup",
    description="Look a record up by its id.",
    input_schema={
        "type": "object",
        "properties": {"query": {"type": "string"}},
        "required": ["query"],
    },
)


def planted_request(n: int) -> ModelRequest:
    """The request the planted profile answers with its n-th fixed reply."""
    return ModelRequest(
        messages=(
            Message(role="system", content="Answer with a last line ANSWER: <value>."),
            Message(role="user", content=f"What is the net payable? PLANTED-{n}"),
        ),
        tools=(PLANTED_LOOKUP_TOOL,) if 8 <= n < 16 else (),
        max_tokens=64,
        temperature=0.0,
        seed=3,
    )


def planted_label(n: int) -> str:
    return LABELS[n // 4]


class PlantedCalibration(FrozenRecord):
    """What the classifier made of the 24 planted replies through one model config."""

    model: str
    api: str
    expected_labels: tuple[str, ...]
    observed_labels: tuple[str | None, ...]
    naive_passes: int
    total: int
    yield_rate: str | None
    accuracy_on_yield: str | None
    retries: int
    infra_errors: int

    @property
    def recovered(self) -> bool:
        return self.observed_labels == self.expected_labels

    @property
    def mismatches(self) -> list[str]:
        return [
            f"PLANTED-{n}: expected {expected}, got {observed}"
            for n, (expected, observed) in enumerate(
                zip(self.expected_labels, self.observed_labels, strict=True)
            )
            if expected != observed
        ]


def _fraction_text(value: Fraction | None) -> str | None:
    return None if value is None else f"{value.numerator}/{value.denominator}"


async def calibrate_planted(session: CallSession, config: ModelConfig) -> PlantedCalibration:
    """Send the 24 planted requests through `config` and compare labels with the plan."""
    # The harness (and the SDKs under it) only when calibrating, not when the definitions load.
    from eval_pipeline.providers.harness import CallTag

    client = session.client(config)
    results = await asyncio.gather(
        *(
            client.call(
                planted_request(n),
                CallTag(lane="calibration", case_id=f"planted-{n:02d}"),
                expect_answer(PLANTED_EXPECTED),
            )
            for n in range(PLANTED_COUNT)
        )
    )
    finals = [result.final for result in results]
    summary = summarize(envelope for result in results for envelope in result.envelopes)
    return PlantedCalibration(
        model=config.name,
        api=config.api,
        expected_labels=tuple(planted_label(n) for n in range(PLANTED_COUNT)),
        observed_labels=tuple(result.label.label if result.label else None for result in results),
        naive_passes=sum(
            naive_pass(final.http_status, final.response_body, PLANTED_EXPECTED) for final in finals
        ),
        total=len(finals),
        yield_rate=_fraction_text(summary.yield_rate),
        accuracy_on_yield=_fraction_text(summary.accuracy_on_yield),
        retries=summary.retries,
        infra_errors=summary.infra_errors,
    )


PLANTED_CONFIGS: tuple[str, ...] = ("sim-planted", "sim-planted-anthropic")
SIM_KEY_ENV = "EVALP_SIM_API_KEY"
# The simulated provider answers Retry-After quickly so a calibration run takes seconds.
CALIBRATION_SIM_OPTIONS = {"planted": {"retry_after_s": 0, "retry_after_ms": 20}}
CALIBRATION_PLAN = f"planted-{PLANTED_COUNT}/{'+'.join(PLANTED_CONFIGS)}/{PLANTED_EXPECTED}"
"""What the calibration asks: part of its asset's code version, so a new plan re-runs it."""


async def calibrate_planted_configs(
    session: CallSession, configs: dict[str, ModelConfig]
) -> list[PlantedCalibration]:
    """Both wire formats at once, in one session (one journal): the planted replies are the
    same on every occurrence, so neither format's calls change the other's, and each
    format's retries wait beside the other's instead of after them (the main job waits on
    this step). One that fails cancels the other before the error goes up, so the session
    closes on no call still running."""
    tasks = [asyncio.create_task(calibrate_planted(session, configs[n])) for n in PLANTED_CONFIGS]
    try:
        return list(await asyncio.gather(*tasks))
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise
