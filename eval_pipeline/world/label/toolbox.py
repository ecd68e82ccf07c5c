"""The label world's tools as the product lane executes them, over the frozen world only
(the pipeline's :class:`Toolbox` reads and checks the arguments and times each call).

Every tool reads the world-only agent database (:mod:`eval_pipeline.lanes.agent_db`), never
the warehouse: ``run_sql`` through the guarded :class:`AgentSql`; the other read tools
through plain parameterised queries on the same file; ``calculate_royalties`` by running
the royalty engine once a toolbox over the world tables (the engine that computed the
answer key, but over the world tables, not the key). ``submit_payout_batch`` is the only
write: a dry-run sink that validates and records the request and answers with a synthetic success.

Every failure an agent can cause (a refused or failing query, an unknown artist, a period
outside the ledger) comes back as an error result the model can read and recover from.

Results are compact JSON text with money as exact decimal strings (USD, six places for
royalties and balances, two for net payable and payout amounts).
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
from collections.abc import Callable, Mapping, Sequence
from decimal import Decimal
from pathlib import Path
from typing import Any

import polars as pl

from eval_pipeline.lanes.agent_db import open_agent_world_db
from eval_pipeline.lanes.errors import SqlToolError
from eval_pipeline.lanes.sql_tool import AgentSql
from eval_pipeline.lanes.toolbox import (
    Toolbox,
    ToolNotFoundError,
    ToolOutcome,
    tool_error,
    tool_json,
)
from eval_pipeline.locks import flocked
from eval_pipeline.providers.types import ToolSpec
from eval_pipeline.warehouse import fetch_frame
from eval_pipeline.world.label import engine, tools
from eval_pipeline.world.label.clauses import percent
from eval_pipeline.world.label.distributors import PERIODS
from eval_pipeline.world.label.truth import ARTIST_LEDGER_KEYS, ARTIST_LEDGER_TABLES, compute_truth

MAX_MATCHES = 20


class LabelToolbox(Toolbox):
    """Executes the label world's tools for one lane run (thread-safe: one cursor a call)."""

    def __init__(self, agent_db: Path, specs: Sequence[ToolSpec] | None = None) -> None:
        super().__init__(specs or tools.LABEL_TOOLS)
        self.sql = AgentSql(agent_db)
        self._conn = open_agent_world_db(agent_db)
        self._agent_db = agent_db
        self._by_artist: dict[str, dict[str, pl.DataFrame]] | None = None

    def close(self) -> None:
        self.sql.close()
        self._conn.close()

    # -- dispatch -------------------------------------------------------------------------

    def dispatch(self, name: str, arguments: dict[str, Any]) -> ToolOutcome:
        if name == tools.RUN_SQL:
            return self._run_sql(arguments)
        if name == tools.SUBMIT_PAYOUT_BATCH:
            return self._submit(arguments)
        handler = {
            tools.FIND_ARTIST: self._find_artist,
            tools.GET_CLAUSE: self._get_clause,
            tools.SEARCH_CLAUSES: self._search_clauses,
            tools.CALCULATE_ROYALTIES: self._calculate,
        }[name]
        return ToolOutcome(
            name=name, arguments=arguments, text=tool_json(handler(arguments)), is_error=False
        )

    # -- read tools -------------------------------------------------------------------------

    def _query(self, sql: str, *params: object) -> list[dict[str, Any]]:
        cursor = self._conn.cursor()
        try:
            result = cursor.execute(sql, list(params))
            columns = [c[0] for c in result.description or []]
            return [dict(zip(columns, row, strict=True)) for row in result.fetchall()]
        finally:
            cursor.close()

    def _run_sql(self, arguments: dict[str, Any]) -> ToolOutcome:
        try:
            result = self.sql.run(str(arguments["query"]))
        except SqlToolError as error:
            kind = {
                "SqlRefusedError": "sql_refused",
                "SqlTimeoutError": "sql_timeout",
                "SqlLimitError": "sql_limit",
            }.get(type(error).__name__, "sql_error")
            return tool_error(tools.RUN_SQL, arguments, kind, error.reason)
        body = {
            "columns": list(result.columns),
            "rows": [list(row) for row in result.rows],
            "row_count": result.row_count,
            "truncated": result.truncated,
        }
        return ToolOutcome(
            name=tools.RUN_SQL, arguments=arguments, text=tool_json(body), is_error=False
        )

    def _find_artist(self, arguments: dict[str, Any]) -> dict[str, Any]:
        name = str(arguments["name"]).strip()
        artists = self._query(
            """
            SELECT artist_id, name, CAST(cross_collateralized AS BOOLEAN) AS cross_collateralized
            FROM artists
            WHERE lower(name) LIKE '%' || lower(?) || '%'
            ORDER BY lower(name) <> lower(?), artist_id
            LIMIT ?
            """,
            name,
            name,
            MAX_MATCHES,
        )
        for artist in artists:
            artist["contracts"] = self._query(
                """
                SELECT contract_id, kind, CAST(effective_date AS VARCHAR) AS effective_date,
                       CAST(term_end_date AS VARCHAR) AS term_end_date, recoupment_account_id
                FROM contracts WHERE artist_id = ? ORDER BY contract_id
                """,
                artist["artist_id"],
            )
        return {"query": name, "matches": artists}

    def _get_clause(self, arguments: dict[str, Any]) -> dict[str, Any]:
        contract_id, number = str(arguments["contract_id"]), int(arguments["clause_number"])
        rows = self._query(
            "SELECT clause_number, heading, body FROM contract_clauses WHERE contract_id = ? "
            "ORDER BY clause_number",
            contract_id,
        )
        if not rows:
            raise ToolNotFoundError(f"no contract {contract_id!r}")
        for row in rows:
            if row["clause_number"] == number:
                return {"contract_id": contract_id, **row}
        raise ToolNotFoundError(
            f"contract {contract_id} has no clause {number}; its clauses are numbered "
            f"1-{rows[-1]['clause_number']}"
        )

    def _search_clauses(self, arguments: dict[str, Any]) -> dict[str, Any]:
        query = str(arguments["query"]).strip()
        contract_id = arguments.get("contract_id")
        rows = self._query(
            """
            SELECT contract_id, clause_number, heading, body FROM contract_clauses
            WHERE (lower(body) LIKE '%' || lower(?) || '%'
                   OR lower(heading) LIKE '%' || lower(?) || '%')
              AND (? IS NULL OR contract_id = ?)
            ORDER BY contract_id, clause_number LIMIT ?
            """,
            query,
            query,
            contract_id,
            contract_id,
            MAX_MATCHES,
        )
        return {"query": query, "matches": rows}

    # -- the calculator ---------------------------------------------------------------------

    def _world_table(self, name: str) -> pl.DataFrame:
        """One world table as polars frames read it (enum and categorical text as strings)."""
        cursor = self._conn.cursor()
        try:
            frame = fetch_frame(cursor, f'SELECT * FROM "{name}"')
        finally:
            cursor.close()
        text = [c for c, t in frame.schema.items() if isinstance(t, pl.Enum | pl.Categorical)]
        return frame.with_columns(pl.col(text).cast(pl.String))

    def _world_tables(self) -> dict[str, pl.DataFrame]:
        """Every world table (what the engine computes the ledgers from)."""
        cursor = self._conn.cursor()
        try:
            names = [t for (t,) in cursor.execute("SHOW TABLES").fetchall()]
        finally:
            cursor.close()
        return {name: self._world_table(name) for name in names}

    def _ledgers_by_artist(self) -> dict[str, dict[str, pl.DataFrame]]:
        """Each artist's rows of the calculator's ledgers (:func:`artist_part` of every
        artist at once), from ledgers computed once a world (:func:`calculator_ledgers`).
        Only the contracts are read when the ledgers are on disk already: every world table
        (half a million statement lines) was a quarter second of each run's first call,
        with the run's other calculator calls waiting on it."""
        with self._lock:
            if self._by_artist is None:
                self._by_artist = ledgers_by_artist(
                    calculator_ledgers(self._agent_db, self._world_tables),
                    self._world_table("contracts"),
                )
            return self._by_artist

    def _artist_ledgers(self, artist_id: str) -> dict[str, pl.DataFrame]:
        by_artist = self._ledgers_by_artist()
        if artist_id not in by_artist:
            raise ToolNotFoundError(
                f"no artist {artist_id!r}; find_artist looks artists up by name"
            )
        return by_artist[artist_id]

    def _calculate(self, arguments: dict[str, Any]) -> dict[str, Any]:
        artist_id, period = str(arguments["artist_id"]), str(arguments["period"])
        if period not in PERIODS:
            raise ToolNotFoundError(
                f"period {period} is outside the ledger ({PERIODS[0]} to {PERIODS[-1]})"
            )
        ledgers = self._artist_ledgers(artist_id)
        if "isrc" in arguments:
            return _track_result(
                ledgers, artist_id, period, str(arguments["isrc"]), arguments.get("channel")
            )
        return _artist_result(ledgers, artist_id, period)

    # -- the one write -----------------------------------------------------------------------

    def _submit(self, arguments: dict[str, Any]) -> ToolOutcome:
        """Dry run: validate, record, answer with a synthetic success; nothing changes."""
        period = str(arguments["period"])
        if period not in PERIODS:
            return tool_error(
                tools.SUBMIT_PAYOUT_BATCH,
                arguments,
                "not_found",
                f"period {period} is outside the ledger",
            )
        known = {r["artist_id"] for r in self._query("SELECT artist_id FROM artists")}
        unknown = sorted({str(p["artist_id"]) for p in arguments["payouts"]} - known)
        if unknown:
            return tool_error(
                tools.SUBMIT_PAYOUT_BATCH, arguments, "not_found", f"unknown artist ids {unknown}"
            )
        total = sum((Decimal(str(p["amount"])) for p in arguments["payouts"]), Decimal(0))
        batch_id = "DRYRUN-" + hashlib.sha256(tool_json(arguments).encode()).hexdigest()[:12]
        record = {"batch_id": batch_id, **arguments}
        self.record_write(record)
        body = {
            "batch_id": batch_id,
            "status": "accepted",
            "period": period,
            "payouts": len(arguments["payouts"]),
            "total": f"{total:.2f}",
        }
        return ToolOutcome(
            name=tools.SUBMIT_PAYOUT_BATCH,
            arguments=arguments,
            text=tool_json(body),
            is_error=False,
            write=record,
        )


CALCULATOR_DIR = "calculator"
"""Beside the agent database (whose folder is the world's): the calculator's ledgers, in a
folder named for the label world's source version, so an edited engine computes afresh."""
DONE = "complete"


def calculator_ledgers(
    agent_db: Path, world: Callable[[], Mapping[str, pl.DataFrame]]
) -> dict[str, pl.DataFrame]:
    """The ledgers the calculator reads (:data:`ARTIST_LEDGER_TABLES`) for the world in
    `agent_db`, computed once a world and engine version: the first lane run to need them
    computes them from the world tables (`world()`, never the answer key) under a lock on the agent
    database's folder and keeps them beside it; every other run, at once or later, reads
    them. They are deterministic, and the engine's run was most of a product lane's tools."""
    from eval_pipeline.source_versions import plugin_source_version

    folder = agent_db.parent / f"{CALCULATOR_DIR}-{plugin_source_version(__name__)}"

    def read() -> dict[str, pl.DataFrame]:
        return {name: pl.read_parquet(folder / f"{name}.parquet") for name in ARTIST_LEDGER_TABLES}

    if (folder / DONE).is_file():
        return read()
    with flocked(agent_db.parent, fcntl.LOCK_EX):
        if (folder / DONE).is_file():  # another run computed them while this one waited
            return read()
        ledgers = compute_truth(world(), None)
        staging = folder.with_name(f".{folder.name}-{os.getpid()}")
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir()
        for name in ARTIST_LEDGER_TABLES:
            ledgers[name].write_parquet(staging / f"{name}.parquet")
        (staging / DONE).write_text("")
        shutil.rmtree(folder, ignore_errors=True)  # one a killed run left half-written
        staging.rename(folder)
        return {name: ledgers[name] for name in ARTIST_LEDGER_TABLES}


def ledgers_by_artist(
    ledgers: Mapping[str, pl.DataFrame], contracts: pl.DataFrame
) -> dict[str, dict[str, pl.DataFrame]]:
    """:func:`artist_part` for every artist of `contracts` at once (the same rows, in the
    same order), so a calculator call looks its artist up instead of filtering the world."""
    owner = contracts.select("contract_id", pl.col("artist_id").alias("_owner"))
    artists = contracts["artist_id"].unique(maintain_order=True).to_list()
    split: dict[str, dict[str, pl.DataFrame]] = {artist: {} for artist in artists}
    for name, key in ARTIST_LEDGER_KEYS.items():
        table = ledgers[name]
        keyed = (
            table.with_columns(_owner=pl.col("artist_id"))
            if key == "artist_id"
            else table.join(owner, on="contract_id", how="left", maintain_order="left")
        )
        parts = keyed.partition_by("_owner", as_dict=True, include_key=True, maintain_order=True)
        for artist in artists:
            part = parts.get((artist,))
            split[artist][name] = table.clear() if part is None else part.drop("_owner")
    return split


def _usd6(micro: int) -> str:
    return str(engine.micro_to_usd(micro))


def _artist_result(
    ledgers: Mapping[str, pl.DataFrame], artist_id: str, period: str
) -> dict[str, Any]:
    artist = ledgers["artist_ledger"].filter(pl.col("period") == period).row(0, named=True)
    accounts = ledgers["account_ledger"].filter(pl.col("period") == period).sort("account_id")
    terms = (
        ledgers["contract_terms"]
        .filter(pl.col("period") == period)
        .sort(["contract_id", "channel"])
    )
    return {
        "artist_id": artist_id,
        "period": period,
        "gross_royalty": _usd6(int(artist["gross_micro"])),
        "recouped": _usd6(int(artist["recouped_micro"])),
        "net_payable": str(engine.cents_to_usd(int(artist["net_payable_cents"]))),
        "accounts": [
            {
                "account_id": a["account_id"],
                "balance_before": _usd6(int(a["balance_before_micro"])),
                "charges": _usd6(int(a["charges_micro"])),
                "earnings": _usd6(int(a["earnings_micro"])),
                "recouped": _usd6(int(a["recouped_micro"])),
                "balance_after": _usd6(int(a["balance_after_micro"])),
                "payable": _usd6(int(a["payable_micro"])),
            }
            for a in accounts.iter_rows(named=True)
        ],
        "terms": [
            {
                "contract_id": t["contract_id"],
                "channel": t["channel"],
                "set_by": t["source_contract_id"],
                "rate": percent(int(t["rate_ppm"])),
                "escalator_units": t["escalator_units"],
                "escalated_rate": None
                if t["escalated_rate_ppm"] is None
                else percent(int(t["escalated_rate_ppm"])),
                "units_in_period": int(t["units_in_period"]),
                "rate_applied": percent(int(t["applied_rate_ppm"])),
            }
            for t in terms.iter_rows(named=True)
        ],
    }


def _track_result(
    ledgers: Mapping[str, pl.DataFrame], artist_id: str, period: str, isrc: str, channel: object
) -> dict[str, Any]:
    rows = ledgers["track_period_royalties"].filter(pl.col("isrc") == isrc)
    if rows.height == 0:
        raise ToolNotFoundError(
            f"track {isrc} earns nothing under artist {artist_id} in any period"
        )
    rows = rows.filter(pl.col("period") == period)
    if channel is not None:
        rows = rows.filter(pl.col("channel") == channel)
    return {
        "artist_id": artist_id,
        "isrc": isrc,
        "period": period,
        "channels": [
            {
                "channel": r["channel"],
                "units": int(r["units"]),
                "gross_usd": _usd6(int(r["gross_usd_micro"])),
                "rate_applied": percent(int(r["rate_ppm"])),
                "royalty": _usd6(int(r["royalty_micro"])),
            }
            for r in rows.sort("channel").iter_rows(named=True)
        ],
    }
