"""A small agent loop for the simulated agents' tests (the product lane is built elsewhere).

It talks to the simulated provider with the official ``openai`` or ``anthropic`` SDK over
HTTP, executes each tool call with the product lane's :class:`LabelToolbox` on a world-only
agent database, feeds the results back, and stops at a final answer, at a stall it does not
bounce, or at the turn limit. Its only repairs are the two simplest ones, each off unless
asked for: re-asking after a stall and asking for a re-issue after a cut-off reply. Without
the second, a cut-off tool call is executed as it came (what a harness without the
truncation guard does) and the tool's error goes back to the model.

:func:`answer_is_right` reads the final answer the way the suite means it (money as
Decimal, percentages, id lists, YES/NO, abstention) to score a run against ``expected``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any

import anthropic
import openai

from eval_pipeline.cases.case import Case
from eval_pipeline.providers.labels import extract_answer
from eval_pipeline.sim.process import SimHandle
from eval_pipeline.world.label.toolbox import LabelToolbox
from eval_pipeline.world.label.tools import LABEL_TOOLS
from eval_pipeline_tests.sim.helpers import FAKE_KEY

MAX_TURNS = 16
MAX_TOKENS = 2048
NUDGE = "Please continue with the task."
REISSUE = "Your last reply was cut off at the token limit and was not executed. Re-issue it."
OPENAI_TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": spec.name,
            "description": spec.description,
            "parameters": spec.input_schema,
        },
    }
    for spec in LABEL_TOOLS
]
ANTHROPIC_TOOLS: list[dict[str, Any]] = [
    {"name": spec.name, "description": spec.description, "input_schema": spec.input_schema}
    for spec in LABEL_TOOLS
]


@dataclass(frozen=True)
class Repairs:
    """The driver's repairs (both off: nothing repairs the agent's faults)."""

    bounce_stalls: bool = False
    reissue_cut_offs: bool = False


NO_REPAIRS = Repairs()
ALL_REPAIRS = Repairs(bounce_stalls=True, reissue_cut_offs=True)


@dataclass
class CaseRun:
    """One case through the loop: what happened, in order, and how it ended."""

    case_id: str
    events: list[str] = field(default_factory=list)
    """In order: ``call <tool> <raw arguments>``, ``result <text>``, ``cut``,
    ``stall <text>``, ``nudge``, ``answer``."""
    calls: list[tuple[str, str]] = field(default_factory=list)
    writes: list[dict[str, Any]] = field(default_factory=list)
    final_text: str | None = None
    ended: str = "turn_limit"

    @property
    def first_event(self) -> str:
        return self.events[0] if self.events else ""


class Driver:
    """Runs cases against one model of a running sim, over one wire format."""

    def __init__(
        self,
        sim: SimHandle,
        toolbox: LabelToolbox,
        model: str,
        wire: str = "openai",
        seed: int = 0,
        repairs: Repairs = NO_REPAIRS,
    ) -> None:
        self.toolbox, self.model, self.wire, self.seed, self.repairs = (
            toolbox,
            model,
            wire,
            seed,
            repairs,
        )
        self.openai = openai.OpenAI(
            base_url=sim.openai_base_url, api_key=FAKE_KEY, max_retries=0, timeout=30
        )
        self.anthropic = anthropic.Anthropic(
            base_url=sim.anthropic_base_url, api_key=FAKE_KEY, max_retries=0, timeout=30
        )

    def close(self) -> None:
        self.openai.close()
        self.anthropic.close()

    def run_all(self, cases: Sequence[Case], threads: int = 6) -> dict[str, CaseRun]:
        with ThreadPoolExecutor(max_workers=threads) as pool:
            runs = list(pool.map(self.run, cases))
        return {run.case_id: run for run in runs}

    def run(self, case: Case) -> CaseRun:
        run = CaseRun(case_id=case.case_id)
        if self.wire == "openai":
            self._loop_openai(case.prompt, run)
        else:
            self._loop_anthropic(case.prompt, run)
        return run

    def _execute(self, run: CaseRun, name: str, arguments: str) -> tuple[str, bool]:
        run.events.append(f"call {name} {arguments}")
        run.calls.append((name, arguments))
        outcome = self.toolbox.execute(name, arguments)
        if outcome.write is not None:
            run.writes.append(outcome.write)
        run.events.append(f"result {outcome.text}")
        return outcome.text, outcome.is_error

    def _text_reply(self, run: CaseRun, text: str, bounced_last: bool) -> bool:
        """Record a reply without tool calls; True when the loop should nudge and go on."""
        if "ANSWER:" in text or "ABSTAIN:" in text:
            run.events.append("answer")
            run.final_text, run.ended = text, "answer"
            return False
        run.events.append(f"stall {text}")
        if self.repairs.bounce_stalls and not bounced_last:
            run.events.append("nudge")
            return True
        run.final_text, run.ended = text, "stall"
        return False

    def _loop_openai(self, prompt: str, run: CaseRun) -> None:
        messages: list[dict[str, Any]] = [{"role": "user", "content": prompt}]
        bounced = False
        for _ in range(MAX_TURNS):
            response = self.openai.chat.completions.create(
                model=self.model,
                messages=messages,  # type: ignore[arg-type]
                tools=OPENAI_TOOLS,  # type: ignore[arg-type]
                max_tokens=MAX_TOKENS,
                seed=self.seed,
            )
            choice = response.choices[0]
            message = choice.message
            calls = [c for c in message.tool_calls or [] if c.type == "function"]
            if choice.finish_reason == "length":
                run.events.append("cut")
                if self.repairs.reissue_cut_offs:
                    messages.append({"role": "user", "content": REISSUE})
                    continue
            if calls:
                bounced = False
                messages.append(
                    {
                        "role": "assistant",
                        "content": message.content,
                        "tool_calls": [
                            {
                                "id": c.id,
                                "type": "function",
                                "function": {
                                    "name": c.function.name,
                                    "arguments": c.function.arguments,
                                },
                            }
                            for c in calls
                        ],
                    }
                )
                for c in calls:
                    text, _error = self._execute(run, c.function.name, c.function.arguments)
                    messages.append({"role": "tool", "tool_call_id": c.id, "content": text})
                continue
            text = message.content or ""
            if not self._text_reply(run, text, bounced):
                return
            bounced = True
            messages.append({"role": "assistant", "content": text})
            messages.append({"role": "user", "content": NUDGE})

    def _loop_anthropic(self, prompt: str, run: CaseRun) -> None:
        messages: list[dict[str, Any]] = [{"role": "user", "content": prompt}]
        headers = {"x-evalp-seed": str(self.seed)}
        bounced = False
        for _ in range(MAX_TURNS):
            response = self.anthropic.messages.create(
                model=self.model,
                messages=messages,  # type: ignore[arg-type]
                tools=ANTHROPIC_TOOLS,  # type: ignore[arg-type]
                max_tokens=MAX_TOKENS,
                extra_headers=headers,
            )
            blocks: list[dict[str, Any]] = []
            uses: list[tuple[str, str, str]] = []
            texts: list[str] = []
            for block in response.content:
                if block.type == "text":
                    texts.append(block.text)
                    blocks.append({"type": "text", "text": block.text})
                elif block.type == "tool_use":
                    raw = block.input
                    arguments = raw if isinstance(raw, str) else json.dumps(raw)
                    uses.append((block.id, block.name, arguments))
                    blocks.append(
                        {"type": "tool_use", "id": block.id, "name": block.name, "input": raw}
                    )
            if response.stop_reason == "max_tokens":
                run.events.append("cut")
                if self.repairs.reissue_cut_offs:
                    messages.append({"role": "user", "content": REISSUE})
                    continue
            if uses:
                bounced = False
                messages.append({"role": "assistant", "content": blocks})
                results = []
                for call_id, name, arguments in uses:
                    text, error = self._execute(run, name, arguments)
                    results.append(
                        {
                            "type": "tool_result",
                            "tool_use_id": call_id,
                            "content": text,
                            "is_error": error,
                        }
                    )
                messages.append({"role": "user", "content": results})
                continue
            text = "".join(texts)
            if not self._text_reply(run, text, bounced):
                return
            bounced = True
            messages.append({"role": "assistant", "content": text})
            messages.append({"role": "user", "content": NUDGE})


# -- reading answers ---------------------------------------------------------------------


def _abstained(text: str) -> bool:
    return any(line.strip().startswith("ABSTAIN:") for line in text.splitlines())


def _number(value: str) -> Decimal | None:
    cleaned = value.replace("$", "").replace(",", "").replace("%", "").strip()
    try:
        return Decimal(cleaned)
    except InvalidOperation:
        return None


def _ids(value: str) -> list[str]:
    if value.strip().upper() == "NONE":
        return []
    return sorted((part.strip() for part in value.split(",") if part.strip()), key=int)


def answer_is_right(case: Case, text: str | None) -> bool:
    """Whether a final reply answers ``case`` exactly (tier 1), read by the case's kind."""
    if not text:
        return False
    if case.answer_kind == "abstain":
        return _abstained(text)
    if _abstained(text):
        return False
    value = extract_answer(text)
    if value is None:
        return False
    if case.answer_kind in ("money", "percent", "integer"):
        got, want = _number(value), _number(case.expected)
        return got is not None and want is not None and got == want
    if case.answer_kind == "id_list":
        return _ids(value) == _ids(case.expected)
    if case.answer_kind == "yes_no":
        return value.strip().upper() == case.expected.upper()
    return value.strip() == case.expected.strip()
