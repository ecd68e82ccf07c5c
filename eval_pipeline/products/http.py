"""``http``: a deployed product behind an HTTP endpoint (the user's own agent).

Each case is POSTed as JSON::

    {"case_id": "...", "prompt": "...", "system_prompt": "...", "seed": 0, "model": "..."}

and the endpoint answers with its final reply, and optionally what it did and what it spent::

    {"reply": "... ANSWER: 42",
     "trace": [{"kind": "tool_call", "tool": "add", "data": {"arguments": {...}}},
               {"kind": "tool_result", "tool": "add", "data": {"text": "42"}},
               {"kind": "write", "tool": "pay", "data": {"request": {...}}}],
     "usage": {"cost_usd": "0.0123", "input_tokens": 812, "output_tokens": 64}}

The product's model calls are its own: no envelope of ours exists for them, so the case's
cost and tokens are what it reports (the trace's final event says `usage: reported`, and a
report that leaves them out counts zero, said the same way). A connection failure, a timeout,
a 429 or a 5xx is an infrastructure error (‡, healed by the next run); another 4xx is a
harness error (our request refused); a reply that is not the documented shape, or larger
than `max_reply_bytes`, is read as an empty reply with its problem in the trace.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from decimal import Decimal
from typing import TYPE_CHECKING, Literal

from pydantic import Field, JsonValue, ValidationError, field_validator

from eval_pipeline.products import ProductRegistration, ProductTools, WorldTools
from eval_pipeline.records import FrozenRecord

if TYPE_CHECKING:
    from eval_pipeline.lane_records import CaseRun
    from eval_pipeline.lanes.conversation import CaseContext


class HttpOptions(FrozenRecord):
    """Where the deployed product answers, and how long a case may take."""

    url: str = Field(pattern=r"^https?://")
    api_key_env: str | None = None
    """An environment variable whose value is sent as `Authorization: Bearer …` (the key
    itself never appears in a config, a log or a record)."""
    timeout_s: float = Field(default=120.0, gt=0, le=3600)
    max_reply_bytes: int = Field(default=1_000_000, gt=0, le=64_000_000)


class ReportedEvent(FrozenRecord):
    kind: Literal["model_reply", "tool_call", "tool_result", "guard", "write"]
    tool: str | None = None
    data: dict[str, JsonValue] = Field(default_factory=dict)


class ReportedUsage(FrozenRecord):
    cost_usd: Decimal = Field(default=Decimal(0), ge=0)
    """Exact: a JSON string ("0.0123") or number; a float is read from its shortest text."""
    input_tokens: int = Field(default=0, ge=0)
    output_tokens: int = Field(default=0, ge=0)

    @field_validator("cost_usd", mode="before")
    @classmethod
    def _exact(cls, value: object) -> object:
        return str(value) if isinstance(value, float) else value


class ProductReply(FrozenRecord):
    """The documented shape of the endpoint's answer (see the module docstring)."""

    reply: str
    trace: tuple[ReportedEvent, ...] = ()
    usage: ReportedUsage | None = None


class HttpProduct:
    name = "http"

    def __init__(self, options: HttpOptions) -> None:
        self.options = options

    @contextmanager
    def open_tools(self, world: WorldTools) -> Iterator[ProductTools]:
        # The deployed product runs its own tools; none are offered or run here.
        yield ProductTools(toolbox=None, specs=())

    def _headers(self) -> dict[str, str]:
        from eval_pipeline.errors import ConfigError

        if self.options.api_key_env is None:
            return {}
        key = os.environ.get(self.options.api_key_env)
        if not key:
            raise ConfigError(
                f"http product: api_key_env {self.options.api_key_env} is not set in the "
                "environment"
            )
        return {"Authorization": f"Bearer {key}"}

    async def run_case(self, ctx: CaseContext) -> CaseRun:
        import httpx

        body = {
            "case_id": ctx.case.case_id,
            "prompt": ctx.case.prompt,
            "system_prompt": ctx.system_prompt,
            "seed": ctx.seed,
            "model": ctx.model,
        }
        try:
            async with (
                httpx.AsyncClient(timeout=self.options.timeout_s) as client,
                client.stream("POST", self.options.url, json=body, headers=self._headers()) as sent,
            ):
                status = sent.status_code
                data = bytearray()
                async for chunk in sent.aiter_bytes():
                    data.extend(chunk)
                    if len(data) > self.options.max_reply_bytes:
                        break
        except httpx.HTTPError as error:
            ctx.trace(
                0, "model_reply", {"product": "http", "error": f"{type(error).__name__}: {error}"}
            )
            return ctx.finish("infra_error", "call_failed", None, 1, 0)
        if status == 429 or status >= 500:
            ctx.trace(0, "model_reply", {"product": "http", "status": status})
            return ctx.finish("infra_error", "call_failed", None, 1, 0)
        if status >= 400:
            ctx.trace(0, "model_reply", {"product": "http", "status": status})
            return ctx.finish("harness_error", "call_failed", None, 1, 0)
        if len(data) > self.options.max_reply_bytes:
            problem = f"reply over {self.options.max_reply_bytes} bytes, not read"
            return self._unreadable(ctx, status, problem)
        try:
            reply = ProductReply.model_validate_json(bytes(data))
        except ValidationError as error:
            problem = f"not the documented reply shape: {error.errors()[0]['msg']}"
            return self._unreadable(ctx, status, problem)
        return self._finished(ctx, status, reply)

    def _unreadable(self, ctx: CaseContext, status: int, problem: str) -> CaseRun:
        ctx.trace(0, "model_reply", {"product": "http", "status": status, "problem": problem})
        return ctx.finish("completed", "empty_reply", None, 1, 0)

    def _finished(self, ctx: CaseContext, status: int, reply: ProductReply) -> CaseRun:
        for event in reply.trace:
            ctx.trace(0, event.kind, {"reported": True, **event.data}, tool=event.tool)
        usage = reply.usage or ReportedUsage()
        ctx.trace(
            0,
            "model_reply",
            {
                "product": "http",
                "status": status,
                "text": reply.reply,
                "usage": "reported" if reply.usage is not None else "not reported (counted 0)",
                "cost_usd": str(usage.cost_usd),
                "input_tokens": usage.input_tokens,
                "output_tokens": usage.output_tokens,
            },
        )
        tool_calls = sum(1 for event in reply.trace if event.kind == "tool_call")
        run = ctx.finish("completed", "final_answer", reply.reply, 1, tool_calls)
        return run.model_copy(
            update={
                "cost_usd": usage.cost_usd,
                "input_tokens": usage.input_tokens,
                "output_tokens": usage.output_tokens,
            }
        )


def _config_model() -> type[FrozenRecord]:
    return HttpOptions


def _product_for(options: HttpOptions) -> HttpProduct:
    return HttpProduct(options)


registration = ProductRegistration(config_model=_config_model, product_for=_product_for)
