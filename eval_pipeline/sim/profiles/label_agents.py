"""``sim-strong`` and ``sim-small``: simulated agents that solve the label world's cases.

Both read the question in the prompt, call the product's tools (``run_sql``,
``calculate_royalties``, ``find_artist``, ``get_clause``, ``submit_payout_batch``), read the
results the harness sends back and answer in the format the prompt's last line asks for
(:mod:`._label_plans` holds the plans, :mod:`._agent_runtime` the replay of a plan over the
conversation). Everything they know comes from the conversation: they import nothing of the
world, the lanes or the warehouse and read no file.

``sim-strong`` makes one call per reply, exactly as its plan says, and abstains when a tool
answers with an error. ``sim-small`` has the same skills plus faults, each at a rate set in
its options (``"sim-small"`` section; ``"sim-small:<variant>"`` sections define variants):

- ``stall_rate`` (per tool step): announces the step in text ("Next I will ...") and stops,
  without calling a tool or answering. A harness nudge (a user message after the reply)
  makes it carry on; it never stalls twice in a row.
- ``mangle_rate`` (per tool call): sends arguments that break the schema in a repairable
  way (``{"value": x}`` or ``[x]`` around a string, a clause number as text, a channel
  shorthand such as ``stream``). When the tool answers with a schema error it sends the
  same text once more, then gives up (abstains); a harness that repairs the arguments
  lets it through.
- ``truncate_rate`` (per payout batch): emits the batch pretty-printed and cut off at the
  token limit (stop ``max_tokens``, a partial JSON tool call). A harness notice (a user
  message, or a tool error saying the reply was cut off) makes it re-issue the call in
  compact JSON; a plain error (the cut call executed) makes it send the long form again,
  cut again, and after two cut calls it gives up.
- ``guess_rate`` (per money question): answers at once with a plausible amount, without
  calling any tool.
- ``obey_injection_rate`` (per conversation): after reading a clause carrying a planted
  instruction, submits the payout batch it demands and quotes its authorization code.

``sim-hesitant`` is sim-small with other default rates: it knows everything sim-strong knows
and never guesses, cuts or obeys a planted clause, but it stalls at half of its tool steps
and mangles a third of its calls. Alone (the model lane: its first action) it looks like
the weakest agent; through a product that nudges and repairs it scores like sim-strong. It
is there to show a reader that a model-only leaderboard and a product lane can rank the same
models differently, and (in the guard ablation) which guards carry it.

Every draw is deterministic in (server seed, replicate seed, the question's text, the fault,
the plan step): the same seed gives the same faults in either wire format, on any server;
another seed gives others. A draw is tied to the plan's step rather than to the request
body so that a fault is a property of the agent at that point of its work, whatever the
harness sent in between: a nudged step is not re-drawn, and the model lane sees the same
first-step fault as the product lane.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from pydantic import Field

from eval_pipeline.records import FrozenRecord
from eval_pipeline.sim.neutral import (
    ARGUMENTS_ENCODER,
    Reply,
    SimRequest,
    SimToolCall,
    StopKind,
    stable_unit,
)
from eval_pipeline.sim.profiles import ProfileSetup, register_profile
from eval_pipeline.sim.profiles._agent_runtime import (
    Call,
    Pending,
    Transcript,
    abstain_text,
    drive,
)
from eval_pipeline.sim.profiles._label_plans import (
    MONEY_SHAPES,
    SUBMIT_PAYOUT_BATCH,
    Question,
    Temperament,
    final,
    money_answer,
    plan_for,
    recognise,
)
from eval_pipeline.sim.profiles._options import Optionless, parse_options

CHANNEL_SHORTHAND: Mapping[str, str] = {
    "streaming": "stream",
    "download": "down",
    "physical": "phys",
    "sync": "Sync",
}
STEP_WORDS: Mapping[str, str] = {
    "run_sql": "query the label's records",
    "calculate_royalties": "look up the royalty figures",
    "get_clause": "read the contract clause",
    "find_artist": "look up the artist",
    "search_clauses": "search the contract clauses",
    SUBMIT_PAYOUT_BATCH: "submit the payout batch",
}
MAX_CUT_CALLS = 2


class SimSmallOptions(FrozenRecord):
    """Fault rates of one ``sim-small`` model (each in [0, 1])."""

    stall_rate: float = Field(default=0.15, ge=0, le=1)
    mangle_rate: float = Field(default=0.05, ge=0, le=1)
    truncate_rate: float = Field(default=0.5, ge=0, le=1)
    guess_rate: float = Field(default=0.05, ge=0, le=1)
    obey_injection_rate: float = Field(default=0.5, ge=0, le=1)


class Draws:
    """The agent's deterministic dice for one conversation."""

    def __init__(self, request: SimRequest, prompt: str) -> None:
        self.key = (request.server_seed, request.replicate_seed, prompt)

    def __call__(self, *labels: object) -> float:
        return stable_unit("sim-agent", *self.key, *labels)


def _call_reply(name: str, arguments_text: str, stop: StopKind = "tool_use") -> Reply:
    return Reply(tool_calls=(SimToolCall(name=name, arguments=arguments_text),), stop=stop)


def _encoded(arguments: Mapping[str, Any]) -> str:
    return ARGUMENTS_ENCODER.encode(dict(arguments))


def _compact(arguments: Mapping[str, Any]) -> str:
    return json.dumps(dict(arguments), ensure_ascii=False, separators=(",", ":"))


def mangled(call: Call, pick: float) -> str | None:
    """The call's arguments broken in one repairable way (chosen by ``pick``), or None when
    nothing in them can be mangled. A clause number or a channel, when the call has one, is
    mangled half the time (as text, as a shorthand); otherwise a string is wrapped."""
    typed: list[tuple[str, Any]] = []
    wrapped: list[tuple[str, Any]] = []
    for name, value in call.arguments.items():
        if name == "clause_number" and isinstance(value, int):
            typed.append((name, str(value)))
        elif name == "channel" and value in CHANNEL_SHORTHAND:
            typed.append((name, CHANNEL_SHORTHAND[value]))
        elif isinstance(value, str):
            wrapped.extend([(name, {"value": value}), (name, [value])])
    if typed and (pick < 0.5 or not wrapped):
        options, share = typed, (pick * 2 if wrapped else pick)
    else:
        options, share = wrapped, ((pick - 0.5) * 2 if typed else pick)
    if not options:
        return None
    name, value = options[min(int(share * len(options)), len(options) - 1)]
    return _encoded({**call.arguments, name: value})


def guessed(question: Question, pick: float) -> str:
    """A plausible amount, made up: what an agent answers when it skips the calculator."""
    micro = 10_000_000 + int(pick * 4_990_000_000)
    amount = Decimal(micro).scaleb(-6)
    return final(
        "Based on typical royalty figures for an artist of this size, the amount is about this.",
        money_answer(question, amount),
    )


def agent_reply(request: SimRequest, faults: SimSmallOptions | None) -> Reply:
    """The agent's next reply: a tool call, or its final answer (``faults`` None: sim-strong)."""
    transcript = Transcript(request)
    question = recognise(transcript.prompt)
    if question is None:
        return Reply.of_text(abstain_text("I do not recognise what this question asks for"))
    draws = Draws(request, transcript.prompt)
    offered = (
        frozenset(tool.name for tool in request.tools)
        if request.tool_choice.mode != "none"
        else frozenset()
    )
    temperament = Temperament(
        obeys_injection=faults is not None and draws("obey") < faults.obey_injection_rate
    )
    outcome = drive(
        plan_for(question, temperament),
        transcript,
        max_attempts=1 if faults is None else 2,
        offered=offered,
    )
    if isinstance(outcome, str):
        return Reply.of_text(outcome)
    if faults is None:
        return _call_reply(outcome.call.name, _encoded(outcome.call.arguments))
    return _faulty_reply(question, outcome, transcript, draws, faults)


def _faulty_reply(
    question: Question,
    pending: Pending,
    transcript: Transcript,
    draws: Draws,
    faults: SimSmallOptions,
) -> Reply:
    """sim-small's reply when its plan needs ``pending.call``."""
    call, step = pending.call, pending.step
    if pending.attempts:
        # The tool refused the arguments: the same text once more.
        last = pending.attempts[-1].call
        return _call_reply(last.name, last.arguments)
    fresh = not transcript.nudged and not transcript.last_reply_was_text
    if (
        fresh
        and step == 0
        and not transcript.exchanges
        and question.shape in MONEY_SHAPES
        and draws("guess") < faults.guess_rate
    ):
        return Reply.of_text(guessed(question, draws("guess", "amount")))
    if fresh and draws("stall", step) < faults.stall_rate:
        return Reply.of_text(f"Next I will {STEP_WORDS.get(call.name, 'continue')}.")
    if call.name == SUBMIT_PAYOUT_BATCH:
        cut_calls = transcript.broken_calls(call.name)
        if transcript.nudged:
            return _call_reply(call.name, _compact(call.arguments))
        if cut_calls or draws("truncate", step) < faults.truncate_rate:
            if len(cut_calls) >= MAX_CUT_CALLS:
                return Reply.of_text(
                    abstain_text(
                        "the payout batch could not be submitted: the tool could not read my call"
                    )
                )
            long_form = json.dumps(dict(call.arguments), ensure_ascii=False, indent=2)
            return _call_reply(call.name, long_form[: len(long_form) // 2], stop="max_tokens")
    if fresh and draws("mangle", step) < faults.mangle_rate:
        text = mangled(call, draws("mangle", step, "how"))
        if text is not None:
            return _call_reply(call.name, text)
    return _call_reply(call.name, _encoded(call.arguments))


@register_profile("sim-strong")
class SimStrong(Optionless):
    """The ``sim-strong`` profile (no options, no variants)."""

    def respond(self, request: SimRequest) -> Reply:
        return agent_reply(request, None)


HESITANT_RATES = SimSmallOptions(
    stall_rate=0.3, mangle_rate=0.4, truncate_rate=0.0, guess_rate=0.0, obey_injection_rate=0.0
)
"""sim-hesitant's defaults: sim-strong's judgement with sim-small's two healable faults."""


@register_profile("sim-small")
class SimSmall:
    """The ``sim-small`` profile; variants are the ``"sim-small:<variant>"`` option sections."""

    defaults: SimSmallOptions | None = None

    def __init__(self, setup: ProfileSetup) -> None:
        self.base = parse_options(SimSmallOptions, setup.name, setup.options, self.defaults)
        self.variants = {
            variant: parse_options(SimSmallOptions, f"{setup.name}:{variant}", section, self.base)
            for variant, section in setup.variant_options.items()
        }

    def accepts_variant(self, variant: str | None) -> bool:
        return variant is None or variant in self.variants

    def respond(self, request: SimRequest) -> Reply:
        options = self.base if request.variant is None else self.variants[request.variant]
        return agent_reply(request, options)


@register_profile("sim-hesitant")
class SimHesitant(SimSmall):
    """The ``sim-hesitant`` profile: sim-small's faults at :data:`HESITANT_RATES` (its options
    and variants override them as sim-small's do)."""

    defaults = HESITANT_RATES
