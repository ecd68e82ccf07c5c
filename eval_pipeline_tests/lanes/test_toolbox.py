"""The product lane's tools over the world-only database: results, errors, the dry-run sink."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import polars as pl
import pytest

from eval_pipeline.lanes.toolbox import MAX_ARGUMENT_BYTES
from eval_pipeline.warehouse import connect, read_table
from eval_pipeline.world.label import tools
from eval_pipeline.world.label.toolbox import LabelToolbox


@pytest.fixture(scope="module")
def toolbox(agent_db: Path) -> Iterator[LabelToolbox]:
    with LabelToolbox(agent_db) as box:
        yield box


def call(box: LabelToolbox, tool: str, **arguments: object) -> dict[str, object]:
    outcome = box.execute(tool, json.dumps(arguments))
    body: dict[str, object] = json.loads(outcome.text)
    body["_error"] = outcome.is_error
    body["_kind"] = outcome.error_kind
    return body


def test_calculator_agrees_with_the_answer_key(
    toolbox: LabelToolbox, small_warehouse: Path
) -> None:
    """The calculator runs the engine on the world tables alone: the same numbers as the key."""
    conn = connect(small_warehouse, read_only=True)
    try:
        ledger = read_table(conn, "truth", "artist_ledger")
    finally:
        conn.close()
    rows = ledger.filter(pl.col("gross_micro") > 0).sort(["artist_id", "period"]).head(4)
    for row in rows.iter_rows(named=True):
        body = call(
            toolbox, tools.CALCULATE_ROYALTIES, artist_id=row["artist_id"], period=row["period"]
        )
        assert body["net_payable"] == f"{row['net_payable_cents'] / 100:.2f}"
        assert body["gross_royalty"] == f"{row['gross_micro'] / 1_000_000:.6f}"


def test_read_tools(toolbox: LabelToolbox) -> None:
    found = call(toolbox, tools.FIND_ARTIST, name="the")
    assert found["matches"] and all("contracts" in m for m in found["matches"])  # type: ignore[union-attr]
    clause = call(toolbox, tools.GET_CLAUSE, contract_id="CON-0001", clause_number=1)
    assert clause["heading"] and not clause["_error"]
    sql = call(toolbox, tools.RUN_SQL, query="SELECT policy_id FROM label_policies ORDER BY 1")
    assert sql["rows"][0] == ["F1"] and sql["row_count"] == 16  # type: ignore[index]


@pytest.mark.parametrize(
    ("name", "raw", "kind"),
    [
        ("delete_everything", "{}", "unknown_tool"),
        (tools.GET_CLAUSE, "{not json", "bad_arguments"),
        (tools.GET_CLAUSE, '["CON-0001", 1]', "bad_arguments"),
        (tools.GET_CLAUSE, '{"contract_id": "CON-0001"}', "bad_arguments"),
        (tools.GET_CLAUSE, '{"contract_id": "CON-0001", "clause_number": 99}', "not_found"),
        (tools.CALCULATE_ROYALTIES, '{"artist_id": "ART-9999", "period": "2025-01"}', "not_found"),
        (tools.CALCULATE_ROYALTIES, '{"artist_id": "ART-0001", "period": "2024-12"}', "not_found"),
        (tools.RUN_SQL, '{"query": "SELECT * FROM truth.artist_ledger"}', "sql_refused"),
        (tools.RUN_SQL, '{"query": "SELECT nope FROM artists"}', "sql_error"),
        (
            tools.SUBMIT_PAYOUT_BATCH,
            '{"period": "2025-01", "payouts": [{"artist_id": "ART-9999", "amount": "1.00"}]}',
            "not_found",
        ),
    ],
)
def test_every_failure_is_an_error_result_the_model_can_read(
    toolbox: LabelToolbox, name: str, raw: str, kind: str
) -> None:
    outcome = toolbox.execute(name, raw)
    assert outcome.is_error and outcome.error_kind == kind
    assert "error" in json.loads(outcome.text)


def test_ten_megabytes_of_arguments_are_refused_unread(toolbox: LabelToolbox) -> None:
    raw = json.dumps({"query": "SELECT 1 -- " + "x" * 10_000_000})
    outcome = toolbox.execute(tools.RUN_SQL, raw)
    assert outcome.is_error and outcome.error_kind == "bad_arguments"
    assert str(MAX_ARGUMENT_BYTES) in outcome.text


def test_the_only_write_is_a_dry_run_that_changes_nothing(toolbox: LabelToolbox) -> None:
    before = call(toolbox, tools.RUN_SQL, query="SELECT count(*) FROM artists")["rows"]
    batch = {"period": "2025-03", "payouts": [{"artist_id": "ART-0001", "amount": "12.30"}]}
    outcome = toolbox.execute(tools.SUBMIT_PAYOUT_BATCH, json.dumps(batch))
    assert not outcome.is_error and json.loads(outcome.text)["status"] == "accepted"
    assert outcome.write is not None and outcome.write["payouts"] == batch["payouts"]
    assert toolbox.writes[-1]["period"] == "2025-03"
    assert call(toolbox, tools.RUN_SQL, query="SELECT count(*) FROM artists")["rows"] == before
