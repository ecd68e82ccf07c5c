"""The cache key written directly equals the key of the dumped material.

`request_key` writes a request's canonical JSON field by field instead of dumping the
request to a dict and encoding that with sorted keys (`key_of(material_of(...))`); the
call id's material likewise (`call_key_json`). Over generated requests — any text
(escapes, control characters, non-ASCII, lone surrogates), any float (NaN, the
infinities, -0.0, subnormals), big integers, tool calls, tool schemas and free-form
`extra` parameters — both give the same text, so the same key, or fail alike.
"""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from eval_pipeline.providers.cache import (
    call_key_json,
    canonical_json,
    key_of,
    material_of,
    request_key,
)
from eval_pipeline.providers.types import (
    OUTPUT_LIMIT_KEYS,
    REFUSED_EXTRA_KEYS,
    Message,
    ModelRequest,
    ToolCall,
    ToolSpec,
)

texts = st.text(st.characters(exclude_categories=["Cs"]), max_size=12) | st.sampled_from(
    ['a"b\\c', "tab\there\nline\r\x00\x1f\x7f", "Björk — 東京 🎵", "\u2028\u2029", ""]
)
floats = st.floats(allow_nan=True, allow_infinity=True) | st.sampled_from(
    [0.0, -0.0, 1e16, 1e-5, 5e-324, 0.1, 1.7976931348623157e308, math.nan, math.inf, -math.inf]
)
big_ints = st.integers(min_value=-(2**70), max_value=2**70)
json_values = st.recursive(
    st.none() | st.booleans() | big_ints | floats | texts,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(texts, inner, max_size=3),
    max_leaves=8,
)
free_keys = texts.filter(
    lambda key: key not in OUTPUT_LIMIT_KEYS and key not in REFUSED_EXTRA_KEYS and key != "n"
)
tool_calls = st.builds(ToolCall, id=texts, name=texts, arguments=texts)
messages = st.builds(
    Message,
    role=st.sampled_from(["system", "user", "assistant", "tool"]),
    content=texts,
    tool_calls=st.lists(tool_calls, max_size=2).map(tuple),
    tool_call_id=st.none() | texts,
    is_error=st.booleans(),
)
tools = st.builds(
    ToolSpec,
    name=texts,
    description=texts,
    input_schema=st.dictionaries(texts, json_values, max_size=3),
)
requests = st.builds(
    ModelRequest,
    messages=st.lists(messages, min_size=1, max_size=3).map(tuple),
    tools=st.lists(tools, max_size=2).map(tuple),
    tool_choice=st.none() | st.sampled_from(["auto", "none", "required"]) | texts,
    max_tokens=st.integers(min_value=1, max_value=2**70),
    temperature=st.none() | floats,
    top_p=st.none() | floats,
    stop=st.lists(texts, max_size=2).map(tuple),
    seed=st.none() | big_ints,
    replicate=big_ints,
    extra=st.dictionaries(free_keys, json_values, max_size=3),
)
names = texts | st.sampled_from(["simulated", "openai_compatible", "tool-responder"])


@settings(max_examples=400, deadline=None)
@given(provider=names, api=names, model=names, request=requests)
def test_the_written_key_equals_the_key_of_the_dumped_material(
    provider: str, api: str, model: str, request: ModelRequest
) -> None:
    assert request_key(provider, api, model, request) == key_of(
        material_of(provider, api, model, request)
    )


class _Text(str):
    """A str subclass: the direct path leaves it to the general one."""


@pytest.mark.parametrize(
    "request_",
    [
        ModelRequest(messages=(Message(role="user", content=_Text("hi")),), max_tokens=3),
        ModelRequest.model_construct(
            messages=(Message(role="user", content="hi"),), max_tokens=True, replicate=0
        ),
    ],
)
def test_values_of_other_types_take_the_general_path(request_: ModelRequest) -> None:
    assert request_key("p", "a", "m", request_) == key_of(material_of("p", "a", "m", request_))
    assert request_key(_Text("p"), "a", "m", request_) == key_of(
        material_of("p", "a", "m", request_)
    )


def test_a_lone_surrogate_fails_both_paths_alike() -> None:
    request = ModelRequest(messages=(Message(role="user", content="bad \ud800"),), max_tokens=3)
    with pytest.raises(UnicodeEncodeError):
        key_of(material_of("p", "a", "m", request))
    with pytest.raises(UnicodeEncodeError):
        request_key("p", "a", "m", request)


@settings(max_examples=300, deadline=None)
@given(parts=st.lists(texts | big_ints | st.booleans(), max_size=6))
def test_the_call_id_material_equals_its_canonical_json(parts: list[Any]) -> None:
    assert call_key_json(parts) == canonical_json(parts)
