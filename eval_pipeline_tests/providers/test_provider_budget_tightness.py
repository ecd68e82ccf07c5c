"""How tight the budget's worst case is on the tool-responder profile, as documented.

The bound must hold for any tokenizer, so it takes one token per request byte and the
whole output limit; the sim's tokenizer takes four bytes a token and its replies are short.
docs/model-calls.md states the measured ratio; this test measures it again and compares.
"""

from __future__ import annotations

import asyncio
import re
import statistics
from decimal import Decimal
from pathlib import Path

from eval_pipeline import paths
from eval_pipeline.providers.budget import BudgetGate, worst_case_input_tokens
from eval_pipeline.providers.calibration import PLANTED_LOOKUP_TOOL
from eval_pipeline.providers.harness import CallResult, CallTag
from eval_pipeline.providers.types import Message, ModelRequest, ToolCall
from eval_pipeline.sim.process import SimHandle
from eval_pipeline_tests.providers.conftest import BEFORE_TIER_CHANGE, new_session, sim_config

DOC = paths.PROJECT_ROOT / "docs" / "model-calls.md"
SYSTEM = "You answer questions about a record label's royalties. End with ANSWER: <value>."


def lane_requests(n: int) -> list[ModelRequest]:
    """The three turns a lane sends: a question, a question with a tool, a tool result."""
    question = Message(role="user", content=f"What is the net payable of artist ART-{n:04d}?")
    call = ToolCall(id=f"call_{n}", name="lookup", arguments=f'{{"query": "ART-{n:04d}"}}')
    return [
        ModelRequest(messages=(Message(role="system", content=SYSTEM), question), max_tokens=256),
        ModelRequest(
            messages=(Message(role="system", content=SYSTEM), question),
            tools=(PLANTED_LOOKUP_TOOL,),
            max_tokens=256,
        ),
        ModelRequest(
            messages=(
                Message(role="system", content=SYSTEM),
                question,
                Message(role="assistant", tool_calls=(call,)),
                Message(role="tool", tool_call_id=call.id, content=f"{1000 + n}.25 USD"),
            ),
            tools=(PLANTED_LOOKUP_TOOL,),
            max_tokens=256,
        ),
    ]


def measured_ratios(sim: SimHandle, tmp_path: Path) -> tuple[list[Decimal], list[Decimal]]:
    """Per call: the input bound over the input tokens billed, and reserved over actual."""

    async def run() -> list[tuple[CallResult, int]]:
        async with new_session(tmp_path, budget=BudgetGate(Decimal("100"))) as session:
            calls, bounds = [], []
            for api in ("openai_compatible", "anthropic_messages"):
                client = session.client(sim_config(sim, "tool-responder", api=api))
                for n in range(10):
                    for turn, request in enumerate(lane_requests(n)):
                        bounds.append(worst_case_input_tokens(client.transport.wire_body(request)))
                        calls.append(
                            client.call(request, CallTag(lane=api, case_id=f"{n}", turn=turn))
                        )
            return list(zip(await asyncio.gather(*calls), bounds, strict=True))

    input_factors, ratios = [], []
    for result, bound in asyncio.run(run()):
        envelope = result.final
        assert envelope.cost_usd and envelope.reserved_usd and envelope.input_tokens
        input_factors.append(Decimal(bound) / envelope.input_tokens)
        ratios.append(envelope.reserved_usd / envelope.cost_usd)
    return input_factors, ratios


def _spread(values: list[Decimal]) -> list[float]:
    return [round(float(v), 1) for v in (min(values), statistics.median(values), max(values))]


def _stated(what: str) -> list[float]:
    found = re.search(
        re.escape(what) + r" on the tool-responder profile: min ([\d.]+), "
        r"median ([\d.]+), max ([\d.]+)",
        DOC.read_text(),
    )
    assert found is not None, f"{DOC} does not state the measured {what}"
    return [float(v) for v in found.groups()]


def test_the_documented_tightness_of_the_worst_case_is_what_is_measured(
    sim: SimHandle, tmp_path: Path
) -> None:
    sim.set_clock(BEFORE_TIER_CHANGE)
    input_factors, ratios = measured_ratios(sim, tmp_path)
    assert all(ratio >= 1 for ratio in ratios), "the worst case is an upper bound"
    assert _stated("input bound / input tokens") == _spread(input_factors)
    assert _stated("reserved / actual at max_tokens 256") == _spread(ratios)
