"""``sim-tool-user`` and ``sim-no-tools``: simulated agents for a world they do not know.

The label world's agents recognise the label world's questions; a user's own cases (a
dataset world) need agents that know nothing of any world, so that the whole pipeline runs
offline on them. Both read only the request, like every profile.

- ``sim-tool-user`` picks the offered tool whose name and description share a word (or an
  operator such as ``+``) with the question, fills its number arguments with the
  question's numbers in order (its text arguments with the question's quoted strings), calls
  it, and answers with what the tool returned. With no such tool, or a tool it cannot fill,
  it answers at once, as ``sim-no-tools`` does. A tool error makes it abstain.
- ``sim-no-tools`` never calls a tool: it answers with the last number of the question
  (a model that guesses instead of working).

The answer is written as the question's last line asks (``ANSWER: <value>``).
"""

from __future__ import annotations

import json
import re
from typing import Any

from eval_pipeline.sim.neutral import Reply, SimRequest, SimTool, SimToolCall
from eval_pipeline.sim.profiles import register_profile
from eval_pipeline.sim.profiles._options import Optionless

_WORD = re.compile(r"[a-z]+|[+\-*/×÷]")
_NUMBER = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?")
_QUOTED = re.compile(r"[\"“']([^\"”']+)[\"”']")
_IGNORED = frozenset(
    (
        "a",
        "an",
        "and",
        "the",
        "of",
        "to",
        "is",
        "are",
        "what",
        "which",
        "who",
        "how",
        "there",
        "it",
        "this",
        "that",
        "for",
        "in",
        "on",
        "with",
        "by",
        "returns",
        "return",
        "give",
        "gives",
    )
)


def question(request: SimRequest) -> str:
    """The case's question: the first user text without its output-contract line."""
    first = next((m.text for m in request.messages if m.role == "user" and m.text), "")
    lines = first.rstrip().splitlines()
    if lines and "ANSWER:" in lines[-1]:
        lines = lines[:-1]
    return "\n".join(lines)


def _words(text: str) -> set[str]:
    return set(_WORD.findall(text.lower())) - _IGNORED


def _fill(tool: SimTool, text: str) -> dict[str, Any] | None:
    """Arguments for `tool` from the question's numbers and quoted strings, in order (None
    when a required argument cannot be filled)."""
    numbers = _NUMBER.findall(text)
    quoted = _QUOTED.findall(text)
    properties = tool.input_schema.get("properties", {})
    required = set(tool.input_schema.get("required", []))
    arguments: dict[str, Any] = {}
    for name, schema in properties.items():
        kind = schema.get("type") if isinstance(schema, dict) else None
        if kind in ("integer", "number") and numbers:
            raw = numbers.pop(0)
            if kind == "integer" and "." in raw:
                return None
            arguments[name] = int(raw) if kind == "integer" else float(raw)
        elif kind == "string" and quoted:
            arguments[name] = quoted.pop(0)
        elif name in required:
            return None
    return arguments


def _answer_value(text: str) -> str:
    try:
        value = json.loads(text)
    except ValueError:
        return text.strip().splitlines()[0] if text.strip() else ""
    if isinstance(value, dict) and len(value) == 1:
        value = next(iter(value.values()))
    return value if isinstance(value, str) else json.dumps(value)


def guess(request: SimRequest) -> Reply:
    """Answer at once with the question's last number (or abstain without one)."""
    numbers = _NUMBER.findall(question(request))
    if not numbers:
        return Reply.of_text("ABSTAIN: the question gives me nothing to answer with")
    return Reply.of_text(f"ANSWER: {numbers[-1]}")


def use_tools(request: SimRequest) -> Reply:
    last = request.last_message
    if last is not None and last.tool_results:
        result = last.tool_results[0]
        if result.is_error:
            return Reply.of_text(f"The tool failed.\nABSTAIN: {result.text.strip()[:200]}")
        return Reply.of_text(f"The tool returned it.\nANSWER: {_answer_value(result.text)}")
    text = question(request)
    if request.tools and request.tool_choice.mode != "none" and not request.has_tool_result():
        words = _words(text)
        ranked = sorted(
            (
                (len(words & _words(f"{tool.name} {tool.description}")), index, tool)
                for index, tool in enumerate(request.tools)
            ),
            key=lambda item: (-item[0], item[1]),
        )
        for overlap, _, tool in ranked:
            if overlap == 0:
                break
            arguments = _fill(tool, text)
            if arguments is not None:
                call = SimToolCall.of(tool.name, arguments)
                return Reply(tool_calls=(call,), stop="tool_use")
    return guess(request)


@register_profile("sim-tool-user")
class SimToolUser(Optionless):
    """Calls the tool the question names, then answers with its result (no options)."""

    def respond(self, request: SimRequest) -> Reply:
        return use_tools(request)


@register_profile("sim-no-tools")
class SimNoTools(Optionless):
    """Never calls a tool: answers with the question's last number (no options)."""

    def respond(self, request: SimRequest) -> Reply:
        return guess(request)


__all__ = ["SimNoTools", "SimToolUser", "guess", "question", "use_tools"]
