"""The product lane's guards, each with an off switch, and argument repair.

A guard changes what the harness does around the model, never what the model is told
the answer is: the stall bounce nudges without naming a tool, argument repair only
reshapes values the tool's own schema makes unambiguous, truncation refusal never acts on
a cut-off reply, the iteration cap ends a runaway turn. Each is on by default, can be
turned off in the run config or by an environment flag (``EVALP_GUARD_<NAME>=off``), and
is recorded with the run, so the difference each makes is measured, not assumed.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from typing import Any

from pydantic import Field

from eval_pipeline.errors import ConfigError
from eval_pipeline.records import FrozenRecord

GUARD_NAMES: tuple[str, ...] = (
    "stall_bounce",
    "argument_repair",
    "truncation_refusal",
    "iteration_cap",
)
HARD_TURN_LIMIT = 40
"""Turns a case may take with the iteration cap off: a loop must still end."""


class GuardSettings(FrozenRecord):
    """Which guards are on, and the iteration cap."""

    stall_bounce: bool = True
    argument_repair: bool = True
    truncation_refusal: bool = True
    iteration_cap: bool = True
    max_iterations: int = Field(default=12, ge=1, le=HARD_TURN_LIMIT)

    @property
    def turn_limit(self) -> int:
        return self.max_iterations if self.iteration_cap else HARD_TURN_LIMIT

    def without(self, guard: str) -> GuardSettings:
        """These settings with one guard off (an ablation)."""
        if guard not in GUARD_NAMES:
            raise ConfigError(f"unknown guard {guard!r}; guards: {', '.join(GUARD_NAMES)}")
        return self.model_copy(update={guard: False})

    def fingerprint(self) -> str:
        return hashlib.sha256(self.model_dump_json().encode()).hexdigest()[:16]


def guards_from_env(base: GuardSettings, env: Mapping[str, str] | None = None) -> GuardSettings:
    """``EVALP_GUARD_<NAME>=off|on`` overrides a guard; any other value is an error."""
    env = os.environ if env is None else env
    update: dict[str, bool] = {}
    for name in GUARD_NAMES:
        value = env.get(f"EVALP_GUARD_{name.upper()}")
        if value is None:
            continue
        if value.lower() not in ("on", "off"):
            raise ConfigError(f"EVALP_GUARD_{name.upper()} must be on or off, got {value!r}")
        update[name] = value.lower() == "on"
    return base.model_copy(update=update)


# -- argument repair -------------------------------------------------------------------


def repair_arguments(arguments: Any, schema: Mapping[str, Any]) -> tuple[Any, tuple[str, ...]]:
    """Reshape ``arguments`` toward ``schema`` where the schema leaves one reading: a value
    wrapped in a one-key object or a one-item list where a scalar is expected, one object
    where a list of objects is expected, a number written as text, an enum value named by a
    unique case-insensitive prefix. It never adds or drops a field and leaves anything
    ambiguous alone. Returns the arguments and what was changed (JSON paths)."""
    changes: list[str] = []
    repaired = _repair(arguments, schema, "$", changes)
    return repaired, tuple(changes)


def _types(schema: Mapping[str, Any]) -> set[str]:
    kind = schema.get("type")
    if isinstance(kind, str):
        return {kind}
    if isinstance(kind, list):
        return {str(k) for k in kind}
    return set()


def _repair(value: Any, schema: Mapping[str, Any], path: str, changes: list[str]) -> Any:
    types = _types(schema)
    if not types:
        return value
    if "object" in types:
        if isinstance(value, dict):
            properties = schema.get("properties", {})
            return {
                key: _repair(item, properties[key], f"{path}.{key}", changes)
                if key in properties
                else item
                for key, item in value.items()
            }
        return value
    if "array" in types:
        items = schema.get("items", {})
        if isinstance(value, dict) and "object" in _types(items):
            changes.append(f"{path}: one object wrapped in a list")
            value = [value]
        if isinstance(value, list):
            return [_repair(item, items, f"{path}[{i}]", changes) for i, item in enumerate(value)]
        return value
    # A scalar is expected: unwrap {"value": x} / [x] when there is exactly one thing inside.
    unwrapped = value
    if isinstance(value, dict) and len(value) == 1:
        unwrapped = next(iter(value.values()))
    elif isinstance(value, list) and len(value) == 1:
        unwrapped = value[0]
    if unwrapped is not value and not isinstance(unwrapped, dict | list):
        changes.append(f"{path}: unwrapped")
        value = unwrapped
    if isinstance(value, str) and types & {"integer", "number"}:
        number = _number(value, integer="integer" in types and "number" not in types)
        if number is not None:
            changes.append(f"{path}: text {value!r} read as a number")
            value = number
    enum = schema.get("enum")
    if isinstance(enum, list) and isinstance(value, str) and value not in enum:
        canonical = _enum_match(value, [e for e in enum if isinstance(e, str)])
        if canonical is not None:
            changes.append(f"{path}: {value!r} read as {canonical!r}")
            value = canonical
    return value


def _number(text: str, *, integer: bool) -> int | float | None:
    stripped = text.strip()
    try:
        if integer:
            return int(stripped, 10)
        parsed = json.loads(stripped)
    except ValueError:
        return None
    return parsed if isinstance(parsed, int | float) and not isinstance(parsed, bool) else None


def _enum_match(value: str, options: list[str]) -> str | None:
    lowered = value.strip().lower()
    exact = [o for o in options if o.lower() == lowered]
    if len(exact) == 1:
        return exact[0]
    prefixed = [o for o in options if lowered and o.lower().startswith(lowered)]
    return prefixed[0] if len(prefixed) == 1 else None
