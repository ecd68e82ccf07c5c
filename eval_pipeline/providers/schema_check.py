"""A small JSON Schema checker for tool arguments (no third-party validator is installed).

It returns the first problem found, as a short path-and-reason string, or None. The
subset: `type` (single or list), `enum`, `const`, `properties`, `required`,
`additionalProperties: false`, `items`, `minItems`/`maxItems`, `minLength`/`maxLength`,
`minimum`/`maximum`, `anyOf`/`oneOf` (any branch), `allOf`, and local `$ref`. Keywords
outside the subset are ignored, so the check never refuses what a full validator accepts
for reasons outside it — it may accept a little more.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

_TYPE_CHECKS: dict[str, Any] = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: (
        (isinstance(v, int) and not isinstance(v, bool))
        or (isinstance(v, float) and v.is_integer())
    ),
    "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
}
_MAX_DEPTH = 32


def schema_problem(value: Any, schema: Mapping[str, Any]) -> str | None:
    """The first way `value` breaks `schema`, or None when it conforms (within the subset)."""
    return _check(value, schema, schema, "$", 0)


def _resolve(schema: Mapping[str, Any], root: Mapping[str, Any]) -> Mapping[str, Any]:
    ref = schema.get("$ref")
    seen = 0
    while isinstance(ref, str) and ref.startswith("#/") and seen < _MAX_DEPTH:
        target: Any = root
        for part in ref[2:].split("/"):
            target = target.get(part) if isinstance(target, Mapping) else None
        if not isinstance(target, Mapping):
            return schema
        schema = target
        ref = schema.get("$ref")
        seen += 1
    return schema


def _check(
    value: Any, schema: Mapping[str, Any], root: Mapping[str, Any], path: str, depth: int
) -> str | None:
    if depth > _MAX_DEPTH:
        return None
    schema = _resolve(schema, root)
    problem = _check_type(value, schema, path)
    if problem:
        return problem
    if "const" in schema and value != schema["const"]:
        return f"{path}: must be {schema['const']!r}"
    if "enum" in schema and value not in schema["enum"]:
        return f"{path}: {value!r} is not one of {schema['enum']!r}"
    for branch_key in ("anyOf", "oneOf"):
        branches = schema.get(branch_key)
        if not isinstance(branches, list) or not branches:
            continue
        options = [b for b in branches if isinstance(b, Mapping)]
        if options and all(_check(value, b, root, path, depth + 1) for b in options):
            return f"{path}: matches no branch of {branch_key}"
    for branch in schema.get("allOf", []) if isinstance(schema.get("allOf"), list) else []:
        if isinstance(branch, Mapping):
            problem = _check(value, branch, root, path, depth + 1)
            if problem:
                return problem
    if isinstance(value, dict):
        return _check_object(value, schema, root, path, depth)
    if isinstance(value, list):
        return _check_array(value, schema, root, path, depth)
    if isinstance(value, str):
        if isinstance(schema.get("minLength"), int) and len(value) < schema["minLength"]:
            return f"{path}: shorter than {schema['minLength']}"
        if isinstance(schema.get("maxLength"), int) and len(value) > schema["maxLength"]:
            return f"{path}: longer than {schema['maxLength']}"
    if isinstance(value, int | float) and not isinstance(value, bool):
        minimum, maximum = schema.get("minimum"), schema.get("maximum")
        if isinstance(minimum, int | float) and value < minimum:
            return f"{path}: below minimum {minimum}"
        if isinstance(maximum, int | float) and value > maximum:
            return f"{path}: above maximum {maximum}"
    return None


def _check_type(value: Any, schema: Mapping[str, Any], path: str) -> str | None:
    expected = schema.get("type")
    if expected is None:
        return None
    names = expected if isinstance(expected, list) else [expected]
    checks = [_TYPE_CHECKS[name] for name in names if name in _TYPE_CHECKS]
    if checks and not any(check(value) for check in checks):
        return f"{path}: expected {'/'.join(str(n) for n in names)}, got {type(value).__name__}"
    return None


def _check_object(
    value: dict[str, Any],
    schema: Mapping[str, Any],
    root: Mapping[str, Any],
    path: str,
    depth: int,
) -> str | None:
    required = schema.get("required")
    for name in required if isinstance(required, list) else []:
        if name not in value:
            return f"{path}: missing required property {name!r}"
    properties = schema.get("properties")
    properties = properties if isinstance(properties, Mapping) else {}
    for name, item in value.items():
        sub = properties.get(name)
        if isinstance(sub, Mapping):
            problem = _check(item, sub, root, f"{path}.{name}", depth + 1)
            if problem:
                return problem
        elif schema.get("additionalProperties") is False:
            return f"{path}: unexpected property {name!r}"
    return None


def _check_array(
    value: list[Any],
    schema: Mapping[str, Any],
    root: Mapping[str, Any],
    path: str,
    depth: int,
) -> str | None:
    if isinstance(schema.get("minItems"), int) and len(value) < schema["minItems"]:
        return f"{path}: fewer than {schema['minItems']} items"
    if isinstance(schema.get("maxItems"), int) and len(value) > schema["maxItems"]:
        return f"{path}: more than {schema['maxItems']} items"
    items = schema.get("items")
    if isinstance(items, Mapping):
        for index, item in enumerate(value):
            problem = _check(item, items, root, f"{path}[{index}]", depth + 1)
            if problem:
                return problem
    return None
