"""The simulated provider's own deterministic token count.

It is not any real tokenizer; it only has to be cheap, deterministic and roughly the
size of a real count, and identical for the same conversation in either wire format.

- ``text_tokens(s) = ceil(len(utf8(s)) / 4)`` (0 for the empty string).
- Input: 3 (reply priming); the system text if any: its tokens + 4; each message: 4 +
  its text + for each tool call (4 + name + arguments text) + for each tool result
  (4 + result text); each offered tool: 4 + name + description + the tool's JSON schema
  written canonically (sorted keys, no spaces).
- Output of a reply: 1 (end of turn) + its text + for each tool call (4 + name + arguments
  text). A reply cut off at ``max_tokens`` reports exactly ``max_tokens`` output tokens.
"""

from __future__ import annotations

import json

from eval_pipeline.sim.neutral import Reply, SimRequest

PRIMING_TOKENS = 3
PER_ITEM_TOKENS = 4
END_OF_TURN_TOKENS = 1


def text_tokens(text: str) -> int:
    """``ceil(utf-8 length / 4)``."""
    size = len(text) if text.isascii() else len(text.encode("utf-8"))
    return (size + 3) // 4


_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def schema_text(schema: object) -> str:
    """A JSON schema written canonically, as counted for input tokens."""
    return _CANONICAL.encode(schema)


def input_tokens(request: SimRequest) -> int:
    """Input tokens of a request, by the rule in this module's docstring."""
    total = PRIMING_TOKENS
    if request.system:
        total += PER_ITEM_TOKENS + text_tokens(request.system)
    for message in request.messages:
        total += PER_ITEM_TOKENS + text_tokens(message.text)
        for call in message.tool_calls:
            total += PER_ITEM_TOKENS + text_tokens(call.name) + text_tokens(call.arguments)
        for result in message.tool_results:
            total += PER_ITEM_TOKENS + text_tokens(result.text)
    for tool in request.tools:
        total += (
            PER_ITEM_TOKENS
            + text_tokens(tool.name)
            + text_tokens(tool.description)
            + text_tokens(schema_text(tool.input_schema))
        )
    return total


def reply_tokens(reply: Reply) -> int:
    """Output tokens of a reply as written (before any cut at ``max_tokens``); the reply's
    own ``output_tokens`` when its profile set them."""
    if reply.output_tokens is not None:
        return reply.output_tokens
    total = END_OF_TURN_TOKENS
    for block in reply.text_blocks:
        total += text_tokens(block)
    for call in reply.tool_calls:
        total += PER_ITEM_TOKENS + text_tokens(call.name) + text_tokens(call.arguments)
    return total


def fit_reply(reply: Reply, max_tokens: int | None) -> tuple[Reply, int]:
    """The reply as served and its output tokens.

    A reply already marked ``max_tokens`` reports ``max_tokens`` output tokens (its own
    count when the request set no limit). A reply longer than ``max_tokens`` is cut: its
    text is kept up to ``4 * (max_tokens - 1)`` UTF-8 bytes, its tool calls are dropped,
    and it is marked ``max_tokens``.
    """
    if reply.stop == "max_tokens":
        return reply, max_tokens if max_tokens is not None else reply_tokens(reply)
    if max_tokens is None or reply_tokens(reply) <= max_tokens:
        return reply, reply_tokens(reply)
    budget = 4 * (max_tokens - END_OF_TURN_TOKENS)
    blocks: list[str] = []
    for block in reply.text_blocks:
        data = block.encode("utf-8")[: max(budget, 0)]
        budget -= len(data)
        blocks.append(data.decode("utf-8", errors="ignore"))
        if budget <= 0:
            break
    return Reply(text_blocks=tuple(blocks), stop="max_tokens"), max_tokens
