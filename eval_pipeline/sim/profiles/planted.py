"""``planted``: 24 fixed replies, one per ``PLANTED-<n>`` (n in 0..23) in the last user text.

Label of n is ``LABELS[n // 4]``; the expected answer of every one is ``ANSWER: 42``.
Only the ``right`` replies (20..23) contain the text ``ANSWER: 42``; so "HTTP 200 with the
expected text" holds for 4/24 and accuracy on yield (wrong + right) is 4/8.

====  =========  ===========================================================================
n     label      reply (the same on every occurrence)
====  =========  ===========================================================================
0     drop       503
1     drop       429 with ``Retry-After`` (option ``retry_after_s``, default 1) and
                 ``retry-after-ms``
2     drop       500
3     drop       connection closed without a response
4     empty      200, content ``""``, no tool calls
5     empty      200, content null (Anthropic: no content blocks), no tool calls
6     empty      200 with an empty body
7     empty      200 with body ``{}``
8     truncated  stop max_tokens, ``{"artist_id": "ART-0001", "amount": "4"}`` (parses)
9     truncated  stop max_tokens, ``{"artist_id": "ART-0001", "amount": "4``
10    truncated  stop max_tokens, ``[{"artist_id": "ART-0001", "amount": 4``
11    truncated  stop max_tokens, a ``lookup`` call with arguments ``{"query": "ART-0``
12    schema     text with no ``ANSWER:`` line
13    schema     a ``lookup`` call whose arguments are not valid JSON
14    schema     a ``lookup`` call with ``{}`` (required ``query`` missing)
15    schema     a call to ``get_weather``, which was not offered
16    wrong      ``ANSWER: 41``
17    wrong      a sentence, then ``ANSWER: 41``
18    wrong      ``ANSWER: 40``, a correction, then ``ANSWER: 41`` (the last line counts)
19    wrong      two text blocks (Anthropic) / one joined string (OpenAI), ending ``ANSWER: 41``
20-23 right      the same four shapes with the last answer ``ANSWER: 42`` (22: 41 then 42)
====  =========  ===========================================================================

A request without a ``PLANTED-<n>`` tag in range gets a 400.
"""

from __future__ import annotations

import re

from pydantic import Field

from eval_pipeline.records import FrozenRecord
from eval_pipeline.sim.neutral import (
    ConnectionDrop,
    ErrorStatus,
    Outcome,
    RawBody,
    Reply,
    SimRequest,
    SimToolCall,
)
from eval_pipeline.sim.profiles import ProfileSetup, register_profile
from eval_pipeline.sim.profiles._options import no_options, parse_options

LABELS = ("drop", "empty", "truncated", "schema", "wrong", "right")
EXPECTED_ANSWER = "ANSWER: 42"
PLANTED_COUNT = 24
_TAG = re.compile(r"PLANTED-(\d+)")
_UNOFFERED_TOOLS = ("get_weather", "send_email", "web_search")


class PlantedOptions(FrozenRecord):
    retry_after_s: int = Field(default=1, ge=0)
    retry_after_ms: int | None = Field(default=None, ge=0)


def planted_label(n: int) -> str:
    return LABELS[n // 4]


def _answer_shapes(value: str, previous: str) -> list[Reply]:
    return [
        Reply.of_text(f"ANSWER: {value}"),
        Reply.of_text(f"Summing the statement lines for the period.\nANSWER: {value}"),
        Reply.of_text(f"ANSWER: {previous}\nRechecking one refunded line.\nANSWER: {value}"),
        Reply(text_blocks=("Checked the ledger.\n", f"ANSWER: {value}")),
    ]


def planted_outcome(n: int, request: SimRequest, options: PlantedOptions) -> Outcome:
    """The fixed outcome for ``PLANTED-<n>``."""
    if n == 0:
        return ErrorStatus(status=503, message="The service is overloaded (planted).")
    if n == 1:
        ms = options.retry_after_ms
        return ErrorStatus(
            status=429,
            message="Rate limit reached (planted).",
            retry_after_s=options.retry_after_s,
            retry_after_ms=options.retry_after_s * 1000 if ms is None else ms,
        )
    if n == 2:
        return ErrorStatus(status=500, message="Internal server error (planted).")
    if n == 3:
        return ConnectionDrop()
    if n == 4:
        return Reply(text_blocks=("",))
    if n == 5:
        return Reply()
    if n == 6:
        return RawBody(status=200, body=b"")
    if n == 7:
        return RawBody(status=200, body=b"{}")
    if n == 8:
        return Reply.of_text('{"artist_id": "ART-0001", "amount": "4"}', stop="max_tokens")
    if n == 9:
        return Reply.of_text('{"artist_id": "ART-0001", "amount": "4', stop="max_tokens")
    if n == 10:
        return Reply.of_text('[{"artist_id": "ART-0001", "amount": 4', stop="max_tokens")
    if n == 11:
        return Reply(
            tool_calls=(SimToolCall(name="lookup", arguments='{"query": "ART-0'),),
            stop="max_tokens",
        )
    if n == 12:
        return Reply.of_text("The net payable for the artist comes to forty-two dollars.")
    if n == 13:
        return Reply(
            tool_calls=(SimToolCall(name="lookup", arguments='{"query": "ART-0001",,}'),),
            stop="tool_use",
        )
    if n == 14:
        return Reply(tool_calls=(SimToolCall(name="lookup", arguments="{}"),), stop="tool_use")
    if n == 15:
        offered = {tool.name for tool in request.tools}
        name = next(t for t in _UNOFFERED_TOOLS if t not in offered)
        return Reply(
            tool_calls=(SimToolCall.of(name, {"query": "ART-0001"}),),
            stop="tool_use",
        )
    if 16 <= n < 20:
        return _answer_shapes("41", "40")[n - 16]
    return _answer_shapes("42", "41")[n - 20]


@register_profile("planted")
class Planted:
    """The ``planted`` profile (options ``retry_after_s``, ``retry_after_ms``; no variants)."""

    def __init__(self, setup: ProfileSetup) -> None:
        self.options = parse_options(PlantedOptions, setup.name, setup.options)
        no_options(setup.name + " variants", setup.variant_options)

    def accepts_variant(self, variant: str | None) -> bool:
        return variant is None

    def respond(self, request: SimRequest) -> Outcome:
        tags = _TAG.findall(request.last_user_text())
        n = int(tags[-1]) if tags else -1
        if not 0 <= n < PLANTED_COUNT:
            return ErrorStatus(
                status=400,
                message="planted: the last user message must contain PLANTED-<n>, n in 0..23",
            )
        return planted_outcome(n, request, self.options)
