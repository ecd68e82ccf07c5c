"""The label world's tool surface, as JSON schemas: what both lanes offer a model.

The product lane executes these later (read tools over the `world` schema, the royalty
engine as calculator, a dry-run sink for payout batches); the model lane only offers them
and scores the first call. Names here are a contract with the suite's expected calls.
"""

from __future__ import annotations

from eval_pipeline.cases.case import SQL_TOOL
from eval_pipeline.providers.types import ToolSpec

RUN_SQL = SQL_TOOL
FIND_ARTIST = "find_artist"
GET_CLAUSE = "get_clause"
SEARCH_CLAUSES = "search_clauses"
CALCULATE_ROYALTIES = "calculate_royalties"
SUBMIT_PAYOUT_BATCH = "submit_payout_batch"


_PERIOD = {"type": "string", "pattern": r"^\d{4}-\d{2}$", "description": "YYYY-MM"}

LABEL_TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec(
        name=RUN_SQL,
        description=(
            "Run one read-only SELECT over the label's tables in schema `world` "
            "(artists, contracts, contract_rates, contract_clauses, label_policies, "
            "recoupment_accounts, advances, expenses, releases, tracks, distributors, "
            "fx_rates, statements, statement_lines). label_policies is the label's rulebook: "
            "how royalties, recoupment and reconciliation are computed. Returns at most 200 "
            "rows."
        ),
        input_schema={
            "type": "object",
            "properties": {"query": {"type": "string"}},
            "required": ["query"],
            "additionalProperties": False,
        },
    ),
    ToolSpec(
        name=FIND_ARTIST,
        description="Find artists whose name matches; returns ids, names and contracts.",
        input_schema={
            "type": "object",
            "properties": {"name": {"type": "string"}},
            "required": ["name"],
            "additionalProperties": False,
        },
    ),
    ToolSpec(
        name=GET_CLAUSE,
        description="Read one numbered clause of a contract.",
        input_schema={
            "type": "object",
            "properties": {
                "contract_id": {"type": "string"},
                "clause_number": {"type": "integer", "minimum": 1},
            },
            "required": ["contract_id", "clause_number"],
            "additionalProperties": False,
        },
    ),
    ToolSpec(
        name=SEARCH_CLAUSES,
        description="Full-text search over contract clauses, optionally within one contract.",
        input_schema={
            "type": "object",
            "properties": {"query": {"type": "string"}, "contract_id": {"type": "string"}},
            "required": ["query"],
            "additionalProperties": False,
        },
    ),
    ToolSpec(
        name=CALCULATE_ROYALTIES,
        description=(
            "The royalty engine, applying the label's rulebook: an artist's ledger for a "
            "period (gross royalty, recouped, net payable, each recoupment account's "
            "balances, and the terms and escalators applied per contract and channel), or, "
            "when `isrc` is given, that track's royalty per channel (optionally one "
            "`channel`). Amounts are exact decimals in USD."
        ),
        input_schema={
            "type": "object",
            "properties": {
                "artist_id": {"type": "string"},
                "period": _PERIOD,
                "isrc": {"type": "string"},
                "channel": {
                    "type": "string",
                    "enum": ["streaming", "download", "physical", "sync"],
                },
            },
            "required": ["artist_id", "period"],
            "additionalProperties": False,
        },
    ),
    ToolSpec(
        name=SUBMIT_PAYOUT_BATCH,
        description="Submit one payout batch for a period: a list of artist ids and amounts.",
        input_schema={
            "type": "object",
            "properties": {
                "period": _PERIOD,
                "payouts": {
                    "type": "array",
                    "minItems": 1,
                    "items": {
                        "type": "object",
                        "properties": {
                            "artist_id": {"type": "string"},
                            "amount": {"type": "string", "pattern": r"^\d+\.\d{2}$"},
                        },
                        "required": ["artist_id", "amount"],
                        "additionalProperties": False,
                    },
                },
            },
            "required": ["period", "payouts"],
            "additionalProperties": False,
        },
    ),
)
