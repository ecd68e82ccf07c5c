"""Argument repair reshapes only what the tool's schema makes unambiguous; guard switches."""

from __future__ import annotations

from typing import Any

import pytest

from eval_pipeline.errors import ConfigError
from eval_pipeline.lanes.guards import GUARD_NAMES, GuardSettings, guards_from_env, repair_arguments
from eval_pipeline.world.label import tools

SCHEMAS = {tool.name: tool.input_schema for tool in tools.LABEL_TOOLS}


@pytest.mark.parametrize(
    ("tool", "sent", "repaired"),
    [
        (
            tools.CALCULATE_ROYALTIES,
            {"artist_id": {"value": "ART-0001"}, "period": "2025-01"},
            {"artist_id": "ART-0001", "period": "2025-01"},
        ),
        (
            tools.CALCULATE_ROYALTIES,
            {"artist_id": ["ART-0001"], "period": "2025-01"},
            {"artist_id": "ART-0001", "period": "2025-01"},
        ),
        (
            tools.GET_CLAUSE,
            {"contract_id": "CON-0001", "clause_number": "3"},
            {"contract_id": "CON-0001", "clause_number": 3},
        ),
        (
            tools.CALCULATE_ROYALTIES,
            {"artist_id": "A", "period": "2025-01", "channel": "stream"},
            {"artist_id": "A", "period": "2025-01", "channel": "streaming"},
        ),
        (
            tools.CALCULATE_ROYALTIES,
            {"artist_id": "A", "period": "2025-01", "channel": "SYNC"},
            {"artist_id": "A", "period": "2025-01", "channel": "sync"},
        ),
        (
            tools.SUBMIT_PAYOUT_BATCH,
            {
                "period": "2025-01",
                "payouts": {"artist_id": {"value": "ART-0001"}, "amount": "1.00"},
            },
            {"period": "2025-01", "payouts": [{"artist_id": "ART-0001", "amount": "1.00"}]},
        ),
    ],
)
def test_repair_fixes_what_the_schema_makes_unambiguous(
    tool: str, sent: dict[str, Any], repaired: dict[str, Any]
) -> None:
    fixed, changes = repair_arguments(sent, SCHEMAS[tool])
    assert fixed == repaired
    assert changes


@pytest.mark.parametrize(
    ("tool", "sent"),
    [
        # ambiguous or meaningless: left as sent for the tool's schema check to refuse
        (tools.CALCULATE_ROYALTIES, {"artist_id": {"id": "A", "name": "B"}, "period": "2025-01"}),
        (tools.CALCULATE_ROYALTIES, {"artist_id": "A", "period": "2025-01", "channel": "s"}),
        (tools.GET_CLAUSE, {"contract_id": "CON-0001", "clause_number": "three"}),
        (tools.GET_CLAUSE, {"contract_id": "CON-0001", "clause_number": "3.5"}),
        (tools.RUN_SQL, {"query": "SELECT 1"}),
    ],
)
def test_repair_leaves_ambiguity_alone(tool: str, sent: dict[str, Any]) -> None:
    fixed, changes = repair_arguments(sent, SCHEMAS[tool])
    assert fixed == sent and changes == ()


def test_repair_never_adds_or_drops_a_field() -> None:
    sent = {"artist_id": {"value": "A"}, "unexpected": 1}
    fixed, _ = repair_arguments(sent, SCHEMAS[tools.CALCULATE_ROYALTIES])
    assert set(fixed) == set(sent)


def test_guard_switches_from_config_and_environment() -> None:
    base = GuardSettings()
    assert all(getattr(base, name) for name in GUARD_NAMES)
    off = guards_from_env(base, {"EVALP_GUARD_STALL_BOUNCE": "off"})
    assert not off.stall_bounce and off.argument_repair
    assert base.without("argument_repair").argument_repair is False
    assert base.without("iteration_cap").turn_limit > base.turn_limit
    with pytest.raises(ConfigError, match="EVALP_GUARD_TRUNCATION_REFUSAL must be on or off"):
        guards_from_env(base, {"EVALP_GUARD_TRUNCATION_REFUSAL": "maybe"})
    with pytest.raises(ConfigError, match="unknown guard"):
        base.without("politeness")
    assert base.fingerprint() != base.without("stall_bounce").fingerprint()
