"""Record/replay: a content-addressed response cache.

The key is the SHA-256 of a canonical JSON of everything that changes the answer — the
provider identity, the wire API, the wire model, every generation parameter, messages,
tools, tool choice, seed and replicate — and nothing that does not (base URL, timeouts,
retries, concurrency, API key). An entry holds the landed reply (status, raw body, parsed
response, usage, cost and tier); infrastructure and harness errors are never stored.

Every hit or miss is logged with its reason. A miss is explained by comparing the key's
material with the entries recorded for the same call slot (provider, model, case, turn,
lane): "differs in request.temperature (0.0 -> 0.7)". In replay mode a miss raises with
that explanation and no network call is made.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import tempfile
from collections.abc import Callable, Mapping, Sequence
from datetime import date
from decimal import Decimal
from pathlib import Path
from typing import Any, Literal, TypeVar

from eval_pipeline.providers.errors import CacheIntegrityError
from eval_pipeline.providers.types import Message, ModelRequest, ToolCall
from eval_pipeline.records import FrozenRecord

log = logging.getLogger(__name__)

CacheMode = Literal["off", "record", "replay"]
"""off: no cache; record: read hits, send and store misses; replay: hits only, no network."""

KEY_VERSION = 1
MAX_DIFF_PATHS = 8


_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def canonical_json(value: Any) -> str:
    """Sorted keys, no spaces, UTF-8 kept: the same value always gives the same text."""
    return _CANONICAL.encode(value)


def key_of(material: Mapping[str, Any]) -> str:
    """The cache key of some key material."""
    return digest_of(canonical_json(material))


def digest_of(text: str) -> str:
    """The SHA-256 (hex) of canonical JSON text: what `key_of` hashes."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def material_of(provider: str, api: str, model: str, request: ModelRequest) -> dict[str, Any]:
    """A request's key material: everything that changes the answer, and nothing that
    does not (the provider identity, the wire API and model, the whole request)."""
    return {
        "v": KEY_VERSION,
        "provider": provider,
        "api": api,
        "model": model,
        "request": request.model_dump(mode="json"),
    }


# The canonical encoder's own pieces: `_text` is the C string encoder `_CANONICAL` calls
# (ensure_ascii off), numbers are written as `json` writes them (`int.__repr__`,
# `float.__repr__`, NaN and the infinities spelled as `json` spells them).
_text = json.encoder.encode_basestring
_NON_FINITE = {"nan": "NaN", "inf": "Infinity", "-inf": "-Infinity"}


def _float(value: float | None) -> str:
    if value is None:
        return "null"
    if math.isfinite(value):
        return float.__repr__(value)
    return _NON_FINITE[float.__repr__(value)]


_Item = TypeVar("_Item")


def _each_json(items: Sequence[_Item], write: Callable[[_Item], str | None]) -> list[str] | None:
    """Each item's JSON, or None as soon as one cannot be written directly."""
    texts: list[str] = []
    for item in items:
        text = write(item)
        if text is None:
            return None
        texts.append(text)
    return texts


def _call_json(call: ToolCall) -> str | None:
    if type(call) is not ToolCall or not (
        type(call.arguments) is str and type(call.id) is str and type(call.name) is str
    ):
        return None
    return (
        f'{{"arguments":{_text(call.arguments)},"id":{_text(call.id)},"name":{_text(call.name)}}}'
    )


def _message_json(message: Message) -> str | None:
    content, role, call_id = message.content, message.role, message.tool_call_id
    if type(message) is not Message or not (
        type(content) is str
        and type(role) is str
        and type(message.is_error) is bool
        and (call_id is None or type(call_id) is str)
    ):
        return None
    calls = _each_json(message.tool_calls, _call_json)
    if calls is None:
        return None
    return (
        f'{{"content":{_text(content)},"is_error":{"true" if message.is_error else "false"},'
        f'"role":{_text(role)},"tool_call_id":{"null" if call_id is None else _text(call_id)},'
        f'"tool_calls":[{",".join(calls)}]}}'
    )


def _request_json(request: ModelRequest) -> str | None:
    """`canonical_json(request.model_dump(mode="json"))`, written field by field (sorted),
    or None when a value is not of its field's plain type (a subclass, an unvalidated
    record): then only the general path is sure to write what it writes. `tools` and
    `extra` (free-form JSON schemas and parameters) are dumped and encoded as before."""
    if type(request) is not ModelRequest:
        return None
    messages = _each_json(request.messages, _message_json)
    if messages is None:
        return None
    seed, choice, stop = request.seed, request.tool_choice, request.stop
    if not (
        type(request.max_tokens) is int
        and type(request.replicate) is int
        and (seed is None or type(seed) is int)
        and (choice is None or type(choice) is str)
        and all(type(word) is str for word in stop)
        and all(v is None or type(v) is float for v in (request.temperature, request.top_p))
    ):
        return None
    extra, tools = "{}", "[]"
    if request.tools or request.extra:
        free = request.model_dump(mode="json", include={"tools", "extra"})
        extra, tools = canonical_json(free["extra"]), canonical_json(free["tools"])
    return (
        f'{{"extra":{extra},"max_tokens":{int.__repr__(request.max_tokens)},'
        f'"messages":[{",".join(messages)}],"replicate":{int.__repr__(request.replicate)},'
        f'"seed":{"null" if seed is None else int.__repr__(seed)},'
        f'"stop":[{",".join(_text(word) for word in stop)}],'
        f'"temperature":{_float(request.temperature)},'
        f'"tool_choice":{"null" if choice is None else _text(choice)},'
        f'"tools":{tools},"top_p":{_float(request.top_p)}}}'
    )


def request_key(provider: str, api: str, model: str, request: ModelRequest) -> str:
    """`key_of(material_of(provider, api, model, request))`, without building the material.

    A call is hashed before it is sent, on the event loop every call shares: dumping the
    request to a dict and encoding it with sorted keys cost a call about twice what
    writing the same canonical text directly does. The text is the same (keys in sorted
    order, the encoder's own string and number spellings); `test_provider_cache_key.py`
    checks it equals the general path's over generated requests.
    """
    head = (provider, api, model)
    body = _request_json(request) if all(type(v) is str for v in head) else None
    if body is None:
        return key_of(material_of(provider, api, model, request))
    return digest_of(
        f'{{"api":{_text(api)},"model":{_text(model)},"provider":{_text(provider)},'
        f'"request":{body},"v":{KEY_VERSION}}}'
    )


def call_key_json(parts: Sequence[str | int]) -> str:
    """`canonical_json(list(parts))` for strings and ints (a call id's material)."""
    if all(type(part) is str or type(part) is int for part in parts):
        return (
            "["
            + ",".join(_text(part) if type(part) is str else int.__repr__(part) for part in parts)
            + "]"
        )
    return canonical_json(list(parts))


class CachedReply(FrozenRecord):
    """A landed reply, as stored under its key."""

    key: str
    material: dict[str, Any]
    slot: str
    http_status: int
    response_body: str
    response_json: str
    finish_reason: str | None
    stop_kind: str | None
    input_tokens: int | None
    output_tokens: int | None
    price_tier: str | None
    cost_usd: Decimal | None
    reserved_usd: Decimal | None
    call_day: date
    attempt: int


class CacheLookup(FrozenRecord):
    """The outcome of a lookup: the entry, or why there is none."""

    key: str
    entry: CachedReply | None
    reason: str


def slot_of(provider: str, model: str, lane: str, case_id: str, turn: int) -> str:
    """The call slot a key belongs to, used only to explain misses."""
    return key_of({"provider": provider, "model": model, "lane": lane, "case": case_id, "t": turn})


def _flatten(value: Any, prefix: str, out: dict[str, Any]) -> None:
    if isinstance(value, Mapping):
        for name, item in value.items():
            _flatten(item, f"{prefix}.{name}" if prefix else str(name), out)
        if not value:
            out[prefix] = {}
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            _flatten(item, f"{prefix}[{index}]", out)
        if not value:
            out[prefix] = []
    else:
        out[prefix] = value


def _short(value: Any) -> str:
    text = "(absent)" if value is _ABSENT else json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 40 else text[:37] + "..."


_ABSENT = object()


def describe_difference(wanted: Mapping[str, Any], recorded: Mapping[str, Any]) -> list[str]:
    """Paths where two key materials differ, as `path (recorded -> wanted)`."""
    left: dict[str, Any] = {}
    right: dict[str, Any] = {}
    _flatten(wanted, "", left)
    _flatten(recorded, "", right)
    paths = sorted(set(left) | set(right))
    return [
        f"{path} ({_short(right.get(path, _ABSENT))} -> {_short(left.get(path, _ABSENT))})"
        for path in paths
        if left.get(path, _ABSENT) != right.get(path, _ABSENT)
    ]


class ResponseCache:
    """Files under `root`: `entries/<k[:2]>/<k>.json` and a slot index for miss reasons."""

    def __init__(self, root: Path) -> None:
        self.root = root
        (root / "entries").mkdir(parents=True, exist_ok=True)
        (root / "slots").mkdir(parents=True, exist_ok=True)
        self.hits = 0
        self.misses = 0

    def _entry_path(self, key: str) -> Path:
        return self.root / "entries" / key[:2] / f"{key}.json"

    def _slot_path(self, slot: str) -> Path:
        return self.root / "slots" / f"{slot}.keys"

    def lookup(self, key: str, material: Mapping[str, Any], slot: str) -> CacheLookup:
        """The entry for `key`, or a miss with the reason (what differs from the slot's)."""
        path = self._entry_path(key)
        if path.is_file():
            entry = CachedReply.model_validate_json(path.read_text(encoding="utf-8"))
            if entry.key != key:
                raise CacheIntegrityError(f"cache entry {path} holds key {entry.key}")
            self.hits += 1
            log.info("cache hit %s: same key recorded (slot %s)", key, slot[:12])
            return CacheLookup(key=key, entry=entry, reason="hit: same key recorded")
        self.misses += 1
        reason = self.explain_miss(material, slot)
        log.info("cache miss %s: %s", key, reason)
        return CacheLookup(key=key, entry=None, reason=reason)

    def explain_miss(self, material: Mapping[str, Any], slot: str) -> str:
        """Why nothing is stored for this material: the closest recorded entry of its slot."""
        slot_path = self._slot_path(slot)
        keys = (
            dict.fromkeys(slot_path.read_text(encoding="utf-8").split())
            if slot_path.is_file()
            else {}
        )
        best: tuple[int, str, list[str]] | None = None
        for other in keys:
            other_path = self._entry_path(other)
            if not other_path.is_file():
                continue
            recorded = CachedReply.model_validate_json(other_path.read_text(encoding="utf-8"))
            diffs = describe_difference(material, recorded.material)
            if best is None or len(diffs) < best[0]:
                best = (len(diffs), other, diffs)
        if best is None:
            return "miss: nothing recorded for this model, lane, case and turn"
        count, other, diffs = best
        shown = "; ".join(diffs[:MAX_DIFF_PATHS])
        more = f"; and {count - MAX_DIFF_PATHS} more" if count > MAX_DIFF_PATHS else ""
        return f"miss: nearest recorded key {other[:16]} differs in {shown}{more}"

    def store(self, entry: CachedReply) -> None:
        """Write an entry atomically (temp file + rename) and index it under its slot."""
        if entry.key != key_of(entry.material):
            raise CacheIntegrityError(f"entry key {entry.key} does not match its material")
        path = self._entry_path(entry.key)
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, temp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(entry.model_dump_json())
        os.replace(temp, path)
        with self._slot_path(entry.slot).open("a", encoding="utf-8") as index:
            index.write(entry.key + "\n")
