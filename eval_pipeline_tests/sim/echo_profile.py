"""A profile defined outside the sim package, loaded with ``plugins=[...]`` in the tests.

It shows what a plugin sees: it echoes the wire-neutral request it was handed.
"""

from __future__ import annotations

import json

from eval_pipeline.sim.neutral import Outcome, Reply, SimRequest
from eval_pipeline.sim.profiles import ProfileSetup, register_profile


@register_profile("test-echo")
class Echo:
    def __init__(self, setup: ProfileSetup) -> None:
        self.prefix = str(setup.options.get("prefix", ""))
        self.variants = set(setup.variant_options)

    def accepts_variant(self, variant: str | None) -> bool:
        return variant is None or variant in self.variants

    def respond(self, request: SimRequest) -> Outcome:
        if request.last_user_text() == "crash":
            raise RuntimeError("echo profile crashed on purpose")
        if request.last_user_text() == "junk":
            return "not an outcome"  # type: ignore[return-value]
        seen = {
            "wire": request.wire_format,
            "profile": request.profile,
            "variant": request.variant,
            "system": request.system,
            "messages": [
                {
                    "role": m.role,
                    "text": m.text,
                    "calls": [[c.name, c.arguments, c.id] for c in m.tool_calls],
                    "results": [[r.call_id, r.text, r.is_error] for r in m.tool_results],
                }
                for m in request.messages
            ],
            "tools": [[t.name, t.description, dict(t.input_schema)] for t in request.tools],
            "tool_choice": [request.tool_choice.mode, request.tool_choice.name],
            "max_tokens": request.max_tokens,
            "temperature": request.temperature,
            "replicate_seed": request.replicate_seed,
            "occurrence": request.occurrence,
            "server_seed": request.server_seed,
        }
        return Reply.of_text(self.prefix + json.dumps(seen, sort_keys=True))
