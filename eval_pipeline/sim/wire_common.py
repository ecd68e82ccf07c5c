"""Pieces shared by the two wire formats."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from eval_pipeline.sim.errors import SimRequestError
from eval_pipeline.sim.neutral import SimMessage, SimTool, SimToolChoice


@dataclass(frozen=True, slots=True)
class ParsedRequest:
    """What a wire parser extracts from a body; the server adds model, seeds and counts."""

    system: str
    messages: tuple[SimMessage, ...]
    tools: tuple[SimTool, ...]
    tool_choice: SimToolChoice
    max_tokens: int | None
    temperature: float | None
    seed: int | None


_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))


def dumps(obj: object) -> bytes:
    """Compact UTF-8 JSON, as the server writes every body."""
    return _ENCODER.encode(obj).encode("utf-8")


def optional_int(body: Mapping[str, Any], key: str, *, minimum: int | None = None) -> int | None:
    value = body.get(key)
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool):
        raise SimRequestError(f"'{key}' must be an integer")
    if minimum is not None and value < minimum:
        raise SimRequestError(f"'{key}' must be at least {minimum}")
    return value


def optional_number(body: Mapping[str, Any], key: str, low: float, high: float) -> float | None:
    value = body.get(key)
    if value is None:
        return None
    if not isinstance(value, int | float) or isinstance(value, bool):
        raise SimRequestError(f"'{key}' must be a number")
    if not low <= value <= high:
        raise SimRequestError(f"'{key}' must be between {low:g} and {high:g}")
    return float(value)
