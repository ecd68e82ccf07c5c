"""``flaky``: an unreliable endpoint in front of ``tool-responder``.

Each request draws once, deterministically from (server seed, request body, replicate
seed, occurrence count), against cumulative rates: connection drop, 429 (with
``Retry-After`` integer seconds and ``retry-after-ms``), 500/502/503, 200 with an empty
body, 200 with malformed JSON, a reply cut off at ``max_tokens``, a reply held back
``slow_ms`` after it was billed (slower than a client's timeout); otherwise it answers as
``tool-responder``. Because the occurrence count is in the draw, a retry of the same
request draws again. Options (``--profile-options '{"flaky": {...}}'``; a section
``"flaky:<variant>"`` defines the variant ``flaky:<variant>`` over the base values):

``drop``, ``rate_limit``, ``server_error``, ``empty_body``, ``malformed_json``,
``truncated``, ``slow``: rates in [0, 1] summing to at most 1; ``retry_after_s`` (int,
default 1); ``retry_after_ms`` (default ``retry_after_s * 1000``);
``max_faults_per_request`` (after that many occurrences of one request it is always
served; default: no limit); ``slow_ms`` (default 2000); ``cache_read`` and
``cache_write``: the fractions of every reply's prompt tokens reported (and billed) as
prompt-cache reads and writes (default 0).
"""

from __future__ import annotations

from dataclasses import replace

from pydantic import Field, model_validator

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
from eval_pipeline.sim.profiles._options import parse_options
from eval_pipeline.sim.profiles.tool_responder import tool_responder_reply
from eval_pipeline.sim.tokens import input_tokens

MALFORMED_JSON = b'{"id": "sim-malformed", "choices": [{"index": 0, "message": {"content": "ANS'


class FlakyOptions(FrozenRecord):
    """Fault rates and retry hints of one ``flaky`` model."""

    drop: float = Field(default=0.05, ge=0, le=1)
    rate_limit: float = Field(default=0.10, ge=0, le=1)
    server_error: float = Field(default=0.10, ge=0, le=1)
    empty_body: float = Field(default=0.05, ge=0, le=1)
    malformed_json: float = Field(default=0.05, ge=0, le=1)
    truncated: float = Field(default=0.05, ge=0, le=1)
    slow: float = Field(default=0.0, ge=0, le=1)
    slow_ms: int = Field(default=2000, ge=0)
    retry_after_s: int = Field(default=1, ge=0)
    retry_after_ms: int | None = Field(default=None, ge=0)
    max_faults_per_request: int | None = Field(default=None, ge=0)
    cache_read: float = Field(default=0.0, ge=0, le=1)
    cache_write: float = Field(default=0.0, ge=0, le=1)

    @model_validator(mode="after")
    def _rates_sum_to_at_most_one(self) -> FlakyOptions:
        total = (
            self.drop
            + self.rate_limit
            + self.server_error
            + self.empty_body
            + self.malformed_json
            + self.truncated
            + self.slow
        )
        if total > 1.0 + 1e-9:
            raise ValueError(f"fault rates sum to {total:g}, more than 1")
        if self.cache_read + self.cache_write > 1.0 + 1e-9:
            raise ValueError("cache_read and cache_write fractions sum to more than 1")
        return self


def cut_off(reply: Reply) -> Reply:
    """The first half of a reply, marked as cut off at ``max_tokens``."""
    if reply.tool_calls:
        call = reply.tool_calls[0]
        half = call.arguments[: max(1, len(call.arguments) // 2)]
        return Reply(
            text_blocks=reply.text_blocks,
            tool_calls=(SimToolCall(name=call.name, arguments=half, id=call.id),),
            stop="max_tokens",
        )
    text = reply.text or ""
    return Reply.of_text(text[: max(1, len(text) // 2)], stop="max_tokens")


def flaky_outcome(request: SimRequest, options: FlakyOptions) -> Outcome:
    """The ``flaky`` behaviour for one request under ``options``."""
    cap = options.max_faults_per_request
    draw = (
        1.0
        if cap is not None and request.occurrence >= cap
        else request.unit("flaky.fault", per_occurrence=True)
    )
    edge = options.drop
    if draw < edge:
        return ConnectionDrop()
    edge += options.rate_limit
    if draw < edge:
        retry_ms = options.retry_after_ms
        return ErrorStatus(
            status=429,
            message="Rate limit reached for requests (simulated provider).",
            retry_after_s=options.retry_after_s,
            retry_after_ms=options.retry_after_s * 1000 if retry_ms is None else retry_ms,
        )
    edge += options.server_error
    if draw < edge:
        status = (500, 502, 503)[request.pick(3, "flaky.status", per_occurrence=True)]
        return ErrorStatus(status=status, message=f"Simulated server error {status}.")
    edge += options.empty_body
    if draw < edge:
        return RawBody(status=200, body=b"")
    edge += options.malformed_json
    if draw < edge:
        return RawBody(status=200, body=MALFORMED_JSON)
    edge += options.truncated
    if draw < edge:
        return with_cache(cut_off(tool_responder_reply(request)), request, options)
    edge += options.slow
    if draw < edge:
        reply = with_cache(tool_responder_reply(request), request, options)
        return replace(reply, delay_ms=options.slow_ms)
    return with_cache(tool_responder_reply(request), request, options)


def with_cache(reply: Reply, request: SimRequest, options: FlakyOptions) -> Reply:
    """The reply with the configured fractions of its prompt reported as cache tokens."""
    if not options.cache_read and not options.cache_write:
        return reply
    total = input_tokens(request)
    return replace(
        reply,
        input_tokens=total,
        cache_read_tokens=int(total * options.cache_read),
        cache_write_tokens=int(total * options.cache_write),
    )


@register_profile("flaky")
class Flaky:
    """The ``flaky`` profile; variants are the ``"flaky:<variant>"`` option sections."""

    def __init__(self, setup: ProfileSetup) -> None:
        self.base = parse_options(FlakyOptions, setup.name, setup.options)
        self.variants = {
            variant: parse_options(FlakyOptions, f"{setup.name}:{variant}", section, self.base)
            for variant, section in setup.variant_options.items()
        }

    def accepts_variant(self, variant: str | None) -> bool:
        return variant is None or variant in self.variants

    def respond(self, request: SimRequest) -> Outcome:
        options = self.base if request.variant is None else self.variants[request.variant]
        return flaky_outcome(request, options)
