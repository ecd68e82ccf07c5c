"""The model-call layer: one async model interface over the official SDKs, with envelopes.

Dagster-free. The public surface (see docs/model-calls.md):

- requests and replies: `ModelRequest`, `Message`, `ToolSpec`, `ToolCall`, `ModelResponse`,
  `actionable` (the only way to act on a reply; refuses a cut-off one);
- configs: `ModelConfig`, `load_model_configs` (a folder's), `read_price_book` (a file's;
  where the project keeps them is `eval_pipeline.project_configs`');
- calling: `CallSession`, `ModelClient`, `CallTag`, `CallResult`, `BudgetGate`,
  `ResponseCache`;
- labels: `classify`, `summarize`, `expect_answer`, `expect_tool_call`;
- what a call leaves: `CallEnvelope` (journaled per attempt; loading journals into the
  warehouse is `eval_pipeline.warehouse.envelopes`'s, not this layer's).

Names are imported on first use, so that importing one module (the simulated provider
imports `prices`) does not load the rest.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_EXPORTS = {
    "ModelRequest": "types",
    "Message": "types",
    "ToolSpec": "types",
    "ToolCall": "types",
    "ModelResponse": "types",
    "Usage": "types",
    "actionable": "types",
    "ModelConfig": "config",
    "RetryPolicy": "config",
    "load_model_config": "config",
    "load_model_configs": "config",
    "PriceBook": "prices",
    "PriceQuote": "prices",
    "read_price_book": "prices",
    "CallSession": "harness",
    "ModelClient": "harness",
    "CallTag": "harness",
    "CallResult": "harness",
    "BudgetGate": "budget",
    "ResponseCache": "cache",
    "CallEnvelope": "envelope",
    "classify": "labels",
    "summarize": "labels",
    "expect_answer": "labels",
    "expect_tool_call": "labels",
    "LabelSummary": "labels",
}

__all__ = [
    "BudgetGate",
    "CallEnvelope",
    "CallResult",
    "CallSession",
    "CallTag",
    "LabelSummary",
    "Message",
    "ModelClient",
    "ModelConfig",
    "ModelRequest",
    "ModelResponse",
    "PriceBook",
    "PriceQuote",
    "ResponseCache",
    "RetryPolicy",
    "ToolCall",
    "ToolSpec",
    "Usage",
    "actionable",
    "classify",
    "expect_answer",
    "expect_tool_call",
    "load_model_config",
    "load_model_configs",
    "read_price_book",
    "summarize",
]

if TYPE_CHECKING:
    from eval_pipeline.providers.budget import BudgetGate
    from eval_pipeline.providers.cache import ResponseCache
    from eval_pipeline.providers.config import (
        ModelConfig,
        RetryPolicy,
        load_model_config,
        load_model_configs,
    )
    from eval_pipeline.providers.envelope import CallEnvelope
    from eval_pipeline.providers.harness import CallResult, CallSession, CallTag, ModelClient
    from eval_pipeline.providers.labels import (
        LabelSummary,
        classify,
        expect_answer,
        expect_tool_call,
        summarize,
    )
    from eval_pipeline.providers.prices import PriceBook, PriceQuote, read_price_book
    from eval_pipeline.providers.types import (
        Message,
        ModelRequest,
        ModelResponse,
        ToolCall,
        ToolSpec,
        Usage,
        actionable,
    )


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)
