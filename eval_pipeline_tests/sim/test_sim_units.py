"""Pieces of the simulator that need no server: schemas, tokens, registry, options."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from eval_pipeline.cases.schema_check import schema_problem
from eval_pipeline.sim.errors import ProfileError, SimError
from eval_pipeline.sim.neutral import Reply, SimToolCall, stable_index, stable_unit
from eval_pipeline.sim.profiles import build_profiles, discover_profiles, register_profile
from eval_pipeline.sim.schema import example_value
from eval_pipeline.sim.server import SimConfig, parse_profile_options
from eval_pipeline.sim.tokens import fit_reply, reply_tokens, text_tokens

SCHEMAS: list[dict[str, Any]] = [
    {"type": "object", "properties": {}},
    {
        "type": "object",
        "properties": {
            "artist_id": {"type": "string", "pattern": r"^ART-\d{4}$"},
            "period": {"type": "string", "format": "date"},
            "count": {"type": "integer", "minimum": 10, "maximum": 20, "multipleOf": 5},
            "share": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1},
            "flag": {"type": "boolean"},
            "tags": {
                "type": "array",
                "items": {"type": "string"},
                "minItems": 2,
                "uniqueItems": True,
            },
            "currency": {"enum": ["USD", "EUR", "GBP"]},
            "mode": {"const": "strict"},
            "maybe": {"type": ["null", "string"], "maxLength": 3},
        },
        "required": [
            "artist_id",
            "period",
            "count",
            "share",
            "flag",
            "tags",
            "currency",
            "mode",
            "maybe",
        ],
        "additionalProperties": False,
    },
    {
        "$defs": {
            "Line": {
                "type": "object",
                "properties": {"amount": {"type": "string"}},
                "required": ["amount"],
            }
        },
        "type": "object",
        "properties": {
            "line": {"$ref": "#/$defs/Line"},
            "lines": {"type": "array", "items": {"$ref": "#/$defs/Line"}},
            "either": {"anyOf": [{"type": "null"}, {"type": "integer", "minimum": 3}]},
            "both": {
                "allOf": [
                    {"$ref": "#/$defs/Line"},
                    {"properties": {"note": {"type": "string"}}, "required": ["note"]},
                ]
            },
        },
        "required": ["line", "lines", "either", "both"],
    },
]


@pytest.mark.parametrize("schema", SCHEMAS)
def test_example_values_are_valid_and_stable(schema: dict[str, Any]) -> None:
    value = example_value(schema, salt="abc")
    assert schema_problem(value, schema) is None
    assert value == example_value(schema, salt="abc")


def test_example_values_honour_the_harder_keywords() -> None:
    value = example_value(SCHEMAS[1], salt="x")
    assert value["artist_id"] == "ART-0001"
    assert value["count"] in (10, 15, 20) and isinstance(value["count"], int)
    assert 0 < value["share"] < 1
    assert len(set(value["tags"])) == 2
    assert value["mode"] == "strict"
    assert len(value["maybe"]) <= 3


@settings(max_examples=60, deadline=None)
@given(
    st.dictionaries(
        st.text("abcdefgh", min_size=1, max_size=5),
        st.sampled_from(
            [
                {"type": "string", "minLength": 12},
                {"type": "integer", "minimum": -5, "maximum": -2},
                {"type": "number", "maximum": -0.5},
                {"type": "boolean"},
                {"type": "array", "items": {"type": "integer"}, "maxItems": 0},
                {"enum": [1, "two", None]},
            ]
        ),
        max_size=6,
    ),
    st.text(max_size=8),
)
def test_any_required_object_schema_gets_a_valid_value(
    properties: dict[str, Any], salt: str
) -> None:
    schema = {"type": "object", "properties": properties, "required": sorted(properties)}
    assert schema_problem(example_value(schema, salt=salt), schema) is None


def test_token_rule() -> None:
    assert [text_tokens(s) for s in ("", "a", "abcd", "abcde", "ééé")] == [0, 1, 1, 2, 2]
    reply = Reply(text_blocks=("abcd", "ef"), tool_calls=(SimToolCall("f", "{}"),))
    assert reply_tokens(reply) == 1 + 1 + 1 + 4 + 1 + 1


def test_fit_reply_cuts_long_replies_and_keeps_short_ones() -> None:
    short = Reply.of_text("ANSWER: 1")
    assert fit_reply(short, 100) == (short, reply_tokens(short))
    assert fit_reply(short, None) == (short, reply_tokens(short))
    cut, tokens = fit_reply(Reply.of_text("é" * 100), 3)
    assert tokens == 3 and cut.stop == "max_tokens"
    assert cut.text is not None and len(cut.text.encode()) <= 8
    marked = Reply.of_text("{", stop="max_tokens")
    assert fit_reply(marked, 77) == (marked, 77)


def test_stable_draws_do_not_depend_on_the_process() -> None:
    assert stable_unit("a", 1) == stable_unit("a", 1) != stable_unit("a", 2)
    assert 0 <= stable_unit("z") < 1
    assert all(0 <= stable_index(3, i) < 3 for i in range(50))
    assert stable_unit(7, "x") == pytest.approx(stable_unit(7, "x"))


def test_registry_refuses_duplicates_and_bad_names() -> None:
    discover_profiles()
    with pytest.raises(ProfileError, match="already registered"):
        register_profile("planted")(lambda setup: None)  # type: ignore[type-var]
    with pytest.raises(ProfileError, match="must match"):
        register_profile("Bad:Name")


def test_profile_options_are_validated() -> None:
    discover_profiles()
    assert set(build_profiles(0, None)) >= {"flaky", "planted", "tool-responder"}
    with pytest.raises(ProfileError, match="takes no options"):
        build_profiles(0, {"tool-responder": {"x": 1}})
    with pytest.raises(ProfileError, match="invalid profile options for flaky:bad"):
        build_profiles(0, {"flaky:bad": {"drop": 2}})
    with pytest.raises(ProfileError, match="must be a JSON object"):
        build_profiles(0, {"flaky": 3})
    assert parse_profile_options('{"flaky": {"drop": 0.5}}') == {"flaky": {"drop": 0.5}}
    assert parse_profile_options("") is None
    with pytest.raises(ProfileError, match="not valid JSON"):
        parse_profile_options("{nope")


def test_a_profile_may_report_its_own_usage() -> None:
    reported = Reply(text_blocks=("ok",), output_tokens=7, input_tokens=1000)
    assert fit_reply(reported, 100) == (reported, 7)
    too_long = Reply(text_blocks=("ok",), output_tokens=500)
    cut, tokens = fit_reply(too_long, 100)
    assert tokens == 100 and cut.stop == "max_tokens" and cut.text == "ok"


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"latency_ms": -5.0}, "latency_ms"),
        ({"latency_ms": float("inf")}, "latency_ms"),
        ({"latency_ms": float("nan")}, "latency_ms"),
        ({"seed": -1}, "seed"),
    ],
)
def test_a_negative_or_endless_latency_or_seed_is_refused(
    options: dict[str, Any], named: str
) -> None:
    """Issue 25, finding 12: `--latency-ms -5` was clamped to 0 in silence (and `inf`
    would stall every reply forever); the server's config refuses them, naming the field."""
    with pytest.raises(SimError, match=named):
        SimConfig(**options)


def test_the_module_entry_point_refuses_a_negative_latency() -> None:
    """`python -m eval_pipeline.sim --latency-ms -5` ends at once with one line (before the
    fix it served, clamped to 0, until killed: the timeout here)."""
    completed = subprocess.run(
        [sys.executable, "-m", "eval_pipeline.sim", "--port", "0", "--latency-ms", "-5"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert completed.returncode == 2, completed.stderr
    assert completed.stderr.strip().splitlines() == [
        "sim: error: latency_ms must be a finite number of milliseconds >= 0, got -5.0"
    ]
