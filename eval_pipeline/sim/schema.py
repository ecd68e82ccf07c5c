"""Deterministic example values for a JSON schema (the arguments a profile calls a tool with).

Supported: ``type`` (single or list; ``null`` chosen last), ``const``, ``enum``,
``properties``/``required`` (only required properties are filled), ``items``/``minItems``/
``maxItems``/``uniqueItems``, ``minLength``/``maxLength``, a few string ``format``s,
``pattern`` (from a list of candidates, else the first candidate), ``minimum``/``maximum``/
``exclusiveMinimum``/``exclusiveMaximum``/``multipleOf``, ``anyOf``/``oneOf`` (first
branch), ``allOf`` (merged), and local ``$ref`` (``#/$defs/...``, ``#/definitions/...``).
Choices among enum values depend only on ``salt``, so the same request gives the same call.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

from eval_pipeline.sim.neutral import stable_index

_FORMATS = {
    "date": "2024-01-31",
    "date-time": "2024-01-31T00:00:00Z",
    "time": "00:00:00Z",
    "email": "sim@example.com",
    "uri": "https://example.com/",
    "uuid": "00000000-0000-4000-8000-000000000000",
}
_PATTERN_CANDIDATES = (
    "example",
    "ART-0001",
    "CON-0001",
    "REL-0001",
    "TRK-0001",
    "0001",
    "1",
    "A",
    "a",
    "2024-01",
    "2024-01-31",
    "USD",
    "EUR",
    "SELECT 1",
)
_MAX_DEPTH = 24


def example_value(schema: Mapping[str, Any], salt: object = "") -> Any:
    """A value valid against ``schema`` (within the supported subset), chosen by ``salt``."""
    return _Generator(schema, salt).value(schema, "$", 0)


class _Generator:
    def __init__(self, root: Mapping[str, Any], salt: object) -> None:
        self.root = root
        self.salt = salt

    def resolve(self, schema: Mapping[str, Any]) -> Mapping[str, Any]:
        ref = schema.get("$ref")
        seen = 0
        while isinstance(ref, str) and ref.startswith("#/") and seen < _MAX_DEPTH:
            target: Any = self.root
            for part in ref[2:].split("/"):
                part = part.replace("~1", "/").replace("~0", "~")
                target = target.get(part) if isinstance(target, Mapping) else None
            if not isinstance(target, Mapping):
                return {}
            merged = {k: v for k, v in schema.items() if k != "$ref"}
            schema = {**target, **merged}
            ref = schema.get("$ref")
            seen += 1
        return schema

    def value(self, schema: Mapping[str, Any], path: str, depth: int) -> Any:
        if depth > _MAX_DEPTH:
            return None
        schema = self.resolve(schema)
        if "const" in schema:
            return schema["const"]
        enum = schema.get("enum")
        if isinstance(enum, Sequence) and not isinstance(enum, str) and enum:
            return enum[stable_index(len(enum), self.salt, path)]
        all_of = schema.get("allOf")
        if isinstance(all_of, Sequence) and all_of:
            schema = self.merge([schema, *(self.resolve(s) for s in all_of)])
        for key in ("anyOf", "oneOf"):
            branches = schema.get(key)
            if isinstance(branches, Sequence) and branches:
                chosen = self.first_non_null(branches)
                rest = {k: v for k, v in schema.items() if k != key}
                return self.value({**rest, **self.resolve(chosen)}, path, depth + 1)
        kind = self.kind(schema)
        if kind == "object":
            return self.object_value(schema, path, depth)
        if kind == "array":
            return self.array_value(schema, path, depth)
        if kind == "integer":
            return int(self.number_value(schema, integer=True))
        if kind == "number":
            return self.number_value(schema, integer=False)
        if kind == "boolean":
            return stable_index(2, self.salt, path) == 0
        if kind == "null":
            return None
        return self.string_value(schema, path)

    def first_non_null(self, branches: Sequence[Any]) -> Mapping[str, Any]:
        options = [self.resolve(b) for b in branches if isinstance(b, Mapping)]
        for option in options:
            if option.get("type") != "null":
                return option
        return options[0] if options else {}

    @staticmethod
    def merge(parts: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        merged: dict[str, Any] = {}
        properties: dict[str, Any] = {}
        required: list[str] = []
        for part in parts:
            for key, val in part.items():
                if key == "allOf":
                    continue
                if key == "properties" and isinstance(val, Mapping):
                    properties.update(val)
                elif key == "required" and isinstance(val, Sequence):
                    required.extend(r for r in val if r not in required)
                else:
                    merged[key] = val
        if properties:
            merged["properties"] = properties
        if required:
            merged["required"] = required
        return merged

    @staticmethod
    def kind(schema: Mapping[str, Any]) -> str:
        declared = schema.get("type")
        if isinstance(declared, str):
            return declared
        if isinstance(declared, Sequence) and declared:
            non_null = [t for t in declared if t != "null"]
            return str(non_null[0] if non_null else declared[0])
        if "properties" in schema or "required" in schema:
            return "object"
        if "items" in schema:
            return "array"
        if "minimum" in schema or "maximum" in schema:
            return "number"
        return "string"

    def object_value(self, schema: Mapping[str, Any], path: str, depth: int) -> dict[str, Any]:
        properties = schema.get("properties")
        props: Mapping[str, Any] = properties if isinstance(properties, Mapping) else {}
        required = schema.get("required")
        names = [str(r) for r in required] if isinstance(required, Sequence) else []
        min_props = schema.get("minProperties")
        if isinstance(min_props, int) and len(names) < min_props:
            names.extend(n for n in props if n not in names)
            names = names[: max(min_props, len(names))]
        out: dict[str, Any] = {}
        for name in names:
            sub = props.get(name)
            if not isinstance(sub, Mapping):
                extra = schema.get("additionalProperties")
                sub = extra if isinstance(extra, Mapping) else {}
            out[name] = self.value(sub, f"{path}.{name}", depth + 1)
        return out

    def array_value(self, schema: Mapping[str, Any], path: str, depth: int) -> list[Any]:
        items = schema.get("items")
        item_schema: Mapping[str, Any] = items if isinstance(items, Mapping) else {}
        min_items = schema.get("minItems")
        max_items = schema.get("maxItems")
        count = min_items if isinstance(min_items, int) and min_items > 0 else 1
        if isinstance(max_items, int):
            count = min(count, max_items)
        values = [self.value(item_schema, f"{path}[{i}]", depth + 1) for i in range(count)]
        if schema.get("uniqueItems") and len(values) > 1:
            values = self.make_unique(values, item_schema)
        return values

    @staticmethod
    def make_unique(values: list[Any], item_schema: Mapping[str, Any]) -> list[Any]:
        out: list[Any] = []
        for i, val in enumerate(values):
            if isinstance(val, bool):
                out.append(val if i == 0 else not val)
            elif isinstance(val, int | float):
                out.append(val + i)
            elif isinstance(val, str):
                out.append(val if i == 0 else f"{val}{i}")
            else:
                out.append(val)
        return out

    @staticmethod
    def number_value(schema: Mapping[str, Any], *, integer: bool) -> float:
        low = schema.get("minimum")
        high = schema.get("maximum")
        ex_low = schema.get("exclusiveMinimum")
        ex_high = schema.get("exclusiveMaximum")
        step = schema.get("multipleOf")
        lo = -math.inf
        hi = math.inf
        if isinstance(low, int | float) and not isinstance(low, bool):
            lo = float(low)
        if isinstance(ex_low, int | float) and not isinstance(ex_low, bool):
            lo = max(lo, float(ex_low) + (1 if integer else 0.5))
        if isinstance(high, int | float) and not isinstance(high, bool):
            hi = float(high)
        if isinstance(ex_high, int | float) and not isinstance(ex_high, bool):
            hi = min(hi, float(ex_high) - (1 if integer else 0.5))
        value = min(max(1.0, lo), hi)
        if isinstance(step, int | float) and not isinstance(step, bool) and step > 0:
            value = math.ceil(value / step) * float(step)
            if value > hi:
                value = math.floor(hi / step) * float(step)
        if integer:
            ceiling = float(math.ceil(value))
            value = ceiling if ceiling <= hi else float(math.floor(value))
        return value

    def string_value(self, schema: Mapping[str, Any], path: str) -> str:
        fmt = schema.get("format")
        base = _FORMATS.get(fmt, "example") if isinstance(fmt, str) else "example"
        pattern = schema.get("pattern")
        if isinstance(pattern, str):
            base = self.pattern_value(pattern, base)
        min_len = schema.get("minLength")
        max_len = schema.get("maxLength")
        if isinstance(min_len, int) and len(base) < min_len:
            base = base + "x" * (min_len - len(base))
        if isinstance(max_len, int) and len(base) > max_len:
            base = base[:max_len]
        return base

    @staticmethod
    def pattern_value(pattern: str, default: str) -> str:
        try:
            compiled = re.compile(pattern)
        except re.error:
            return default
        for candidate in (default, *_PATTERN_CANDIDATES):
            if compiled.search(candidate):
                return candidate
        return default
