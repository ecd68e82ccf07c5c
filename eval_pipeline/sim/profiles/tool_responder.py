"""``tool-responder``: calls one offered tool, then answers with the tool's result.

- Tools offered, no tool result in the conversation yet, ``tool_choice`` not ``none``:
  call one offered tool (the forced one, else chosen deterministically from the request)
  with arguments valid against its JSON schema; stop kind ``tool_use``.
- The last message carries a tool result: answer ``The tool returned a result.`` and a
  last line ``ANSWER: <the first tool result's text, stripped, first line>``.
- Otherwise: ``ANSWER: <last word of the last user text>`` (trailing ``.,;:!?`` removed).
"""

from __future__ import annotations

from eval_pipeline.sim.neutral import Reply, SimRequest, SimToolCall
from eval_pipeline.sim.profiles import register_profile
from eval_pipeline.sim.profiles._options import Optionless
from eval_pipeline.sim.schema import example_value


def last_word(text: str) -> str:
    words = text.split()
    return words[-1].rstrip(".,;:!?") if words else ""


def tool_responder_reply(request: SimRequest) -> Reply:
    """The ``tool-responder`` behaviour, reusable by other profiles."""
    last = request.last_message
    if last is not None and last.tool_results:
        stripped = last.tool_results[0].text.strip()
        first_line = stripped.split("\n", 1)[0].strip()
        return Reply.of_text(f"The tool returned a result.\nANSWER: {first_line}")
    if request.tools and not request.has_tool_result() and request.tool_choice.mode != "none":
        tool = None
        if request.tool_choice.mode == "tool" and request.tool_choice.name is not None:
            tool = request.tool(request.tool_choice.name)
        if tool is None:
            tool = request.tools[request.pick(len(request.tools), "tool-responder.tool")]
        arguments = example_value(tool.input_schema, salt=request.body_digest)
        if not isinstance(arguments, dict):
            arguments = {}
        return Reply(tool_calls=(SimToolCall.of(tool.name, arguments),), stop="tool_use")
    return Reply.of_text(f"ANSWER: {last_word(request.last_user_text())}")


@register_profile("tool-responder")
class ToolResponder(Optionless):
    """The ``tool-responder`` profile (no options, no variants)."""

    def respond(self, request: SimRequest) -> Reply:
        return tool_responder_reply(request)
