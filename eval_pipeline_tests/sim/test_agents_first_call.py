"""The simulated agents' first action on every committed case, as the model lane sees it.

One request per case (the prompt and the label world's tools, nothing else), through the
official SDKs over HTTP. ``sim-strong``'s first call must be the case's
``expected_first_call``: the tool name always, the listed arguments as a structure. No world
is needed: a first call depends on the question alone.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import anthropic
import openai
import pytest

from eval_pipeline.cases.case import Case
from eval_pipeline.sim.process import running_sim
from eval_pipeline_tests.cases.committed import committed_fixture_set
from eval_pipeline_tests.sim.agent_driver import ANTHROPIC_TOOLS, MAX_TOKENS, OPENAI_TOOLS
from eval_pipeline_tests.sim.helpers import FAKE_KEY

FirstAction = tuple[str, dict[str, Any] | None, str]
"""(tool name or "" for text, parsed arguments or None when they do not parse, text)."""


def committed_cases() -> tuple[Case, ...]:
    return committed_fixture_set().cases


@dataclass(frozen=True)
class Clients:
    """One client per SDK for the module (building one per request costs tens of ms)."""

    openai: openai.OpenAI
    anthropic: anthropic.Anthropic


@pytest.fixture(scope="module")
def sim() -> Iterator[Clients]:
    with (
        running_sim() as handle,
        openai.OpenAI(
            base_url=handle.openai_base_url, api_key=FAKE_KEY, max_retries=0
        ) as openai_client,
        anthropic.Anthropic(
            base_url=handle.anthropic_base_url, api_key=FAKE_KEY, max_retries=0
        ) as anthropic_client,
    ):
        yield Clients(openai=openai_client, anthropic=anthropic_client)


def _parsed(arguments: str) -> dict[str, Any] | None:
    try:
        value = json.loads(arguments)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def first_action_openai(sim: Clients, model: str, prompt: str, seed: int) -> FirstAction:
    message = (
        sim.openai.chat.completions.create(
            model=model,
            messages=[{"role": "user", "content": prompt}],
            tools=OPENAI_TOOLS,  # type: ignore[arg-type]
            max_tokens=MAX_TOKENS,
            seed=seed,
        )
        .choices[0]
        .message
    )
    calls = [c for c in message.tool_calls or [] if c.type == "function"]
    if calls:
        return calls[0].function.name, _parsed(calls[0].function.arguments), message.content or ""
    return "", None, message.content or ""


def first_action_anthropic(sim: Clients, model: str, prompt: str, seed: int) -> FirstAction:
    response = sim.anthropic.messages.create(
        model=model,
        messages=[{"role": "user", "content": prompt}],
        tools=ANTHROPIC_TOOLS,  # type: ignore[arg-type]
        max_tokens=MAX_TOKENS,
        extra_headers={"x-evalp-seed": str(seed)},
    )
    text = "".join(b.text for b in response.content if b.type == "text")
    for block in response.content:
        if block.type == "tool_use":
            raw = block.input
            return block.name, raw if isinstance(raw, dict) else None, text
    return "", None, text


def matches_expected(case: Case, action: FirstAction) -> bool:
    """The model lane's comparison: tool name, and each listed argument as a structure."""
    expected = case.expected_first_call
    name, arguments, _text = action
    if expected is None:
        return name == ""
    if name != expected.name or arguments is None:
        return False
    return all(arguments.get(key) == value for key, value in expected.arguments.items())


def test_sim_strong_first_call_is_the_expected_one_on_every_committed_case(
    sim: Clients,
) -> None:
    cases = committed_cases()
    assert len(cases) == 133
    wrong = {
        case.case_id: first_action_openai(sim, "sim-strong", case.prompt, seed=0) for case in cases
    }
    wrong = {k: v for k, v in wrong.items() if not matches_expected(_case(cases, k), v)}
    assert not wrong, f"first calls differing from expected_first_call: {wrong}"


def _case(cases: tuple[Case, ...], case_id: str) -> Case:
    return next(c for c in cases if c.case_id == case_id)


def test_sim_strong_first_call_over_the_anthropic_format_too(sim: Clients) -> None:
    cases = committed_cases()
    one_per_template = list({c.template: c for c in cases}.values())
    assert len(one_per_template) >= 20
    wrong = [
        (case.case_id, action)
        for case in one_per_template
        if not matches_expected(
            case, action := first_action_anthropic(sim, "sim-strong", case.prompt, seed=0)
        )
    ]
    assert not wrong, wrong


def test_sim_small_first_actions_show_its_faults_deterministically_per_seed(
    sim: Clients,
) -> None:
    """The model lane sees sim-small stall, mangle and guess on some first steps; the same
    seed gives the same first actions, another seed others."""
    cases = committed_cases()
    seed_1 = [first_action_openai(sim, "sim-small", c.prompt, seed=1) for c in cases]
    again = [first_action_anthropic(sim, "sim-small", c.prompt, seed=1) for c in cases]
    seed_2 = [first_action_openai(sim, "sim-small", c.prompt, seed=2) for c in cases]

    def signature(action: FirstAction) -> tuple[str, str]:
        name, arguments, text = action
        return name, json.dumps(arguments, sort_keys=True) if name else text

    assert [signature(a) for a in seed_1] == [signature(a) for a in again]
    assert [signature(a) for a in seed_1] != [signature(a) for a in seed_2]
    for actions in (seed_1, seed_2):
        right = sum(matches_expected(c, a) for c, a in zip(cases, actions, strict=True))
        stalls = [a for a in actions if not a[0] and a[2].startswith("Next I will")]
        guesses = [a for a in actions if not a[0] and "ANSWER:" in a[2]]
        assert stalls and guesses, "stalls and guesses show in the model lane"
        assert right <= len(cases) - len(stalls) - len(guesses)
        assert right < len(cases) * 0.9
