"""Benchmark: `run_sql` latency on the default world, against a same-run floor.

The floor is the same query on a plain read-only DuckDB connection to a byte copy of the
agent database, fetching the same 201 rows: no guard, no cursor per call, no deadline, no
JSON conversion. Ours and the floor alternate call by call, so machine noise hits both.
The queries are the kind an agent sends for the label world's cases (catalog lookups,
contract terms, statement analytics, reconciliation checks).

Goal (issue 8): the median `run_sql` call on the default world takes at most 5 ms.
Exits 1 when it is missed.

    uv run python bench/sql_tool.py [--repeats 30] [--warehouse var/warehouse.duckdb]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import duckdb

from eval_pipeline import world_stages
from eval_pipeline.lanes.agent_db import build_agent_world_db
from eval_pipeline.lanes.sql_tool import ROW_LIMIT, AgentSql
from eval_pipeline.warehouse import connect
from eval_pipeline.world import get_world_plugin
from eval_pipeline.world.label import load_label_config

GOAL_MEDIAN_MS = 5.0

QUERIES: dict[str, str] = {
    "isrc of a track": (
        "SELECT t.isrc, t.title, r.title AS release FROM tracks AS t "
        "JOIN releases AS r ON r.release_id = t.release_id "
        "WHERE r.release_id = 'REL-0144' AND t.title = 'Velvet Hours'"
    ),
    "tracks on a release": (
        "SELECT count(*) AS tracks FROM world.tracks WHERE release_id = 'REL-0153'"
    ),
    "release date": (
        "SELECT release_id, title, original_release_date FROM releases "
        "WHERE release_id = 'REL-0067'"
    ),
    "find an artist": (
        "SELECT artist_id, name, cross_collateralized FROM artists WHERE name ILIKE '%brandt%'"
    ),
    "rate in force": (
        "SELECT c.contract_id, c.kind, c.effective_date, r.channel, r.rate_ppm "
        "FROM contracts AS c JOIN contract_rates AS r ON r.contract_id = c.contract_id "
        "WHERE (c.contract_id = 'CON-0025' OR c.amends_contract_id = 'CON-0025') "
        "AND r.channel = 'streaming' AND c.effective_date <= DATE '2024-09-30' "
        "ORDER BY c.effective_date DESC"
    ),
    "escalator threshold": (
        "SELECT channel, rate_ppm, escalator_units, escalated_rate_ppm FROM contract_rates "
        "WHERE contract_id = 'CON-0112' AND channel = 'streaming'"
    ),
    "search clauses": (
        "SELECT contract_id, clause_number, heading FROM contract_clauses "
        "WHERE body ILIKE '%audit%' ORDER BY contract_id, clause_number LIMIT 20"
    ),
    "units by channel": (
        "SELECT channel, sum(units) AS units FROM statement_lines "
        "WHERE distributor_id = 'DST-01' AND period = '2025-07' GROUP BY channel ORDER BY 1"
    ),
    "statement total": (
        "SELECT statement_id, currency, sum(amount_minor) AS total, count(*) AS lines "
        "FROM statement_lines WHERE statement_id = 'STM-DST-01-2025-01' GROUP BY ALL"
    ),
    "one statement line": ("SELECT * FROM statement_lines WHERE line_id = 30570"),
    "duplicate lines in a statement": (
        "SELECT isrc, territory, outlet, units, amount_minor, count(*) AS copies "
        "FROM statement_lines WHERE statement_id = 'STM-DST-01-2025-02' "
        "GROUP BY ALL HAVING count(*) > 1 ORDER BY copies DESC LIMIT 50"
    ),
    "unknown isrcs": (
        "SELECT l.line_id, l.isrc FROM statement_lines AS l "
        "LEFT JOIN tracks AS t ON t.isrc = l.isrc "
        "WHERE l.statement_id = 'STM-DST-01-2025-02' AND t.isrc IS NULL"
    ),
    "earnings by artist": (
        "WITH lines AS (SELECT isrc, sum(amount_minor) AS amount FROM statement_lines "
        "WHERE period = '2025-03' AND currency = 'USD' GROUP BY isrc) "
        "SELECT r.artist_id, sum(lines.amount) AS amount FROM lines "
        "JOIN tracks AS t ON t.isrc = lines.isrc JOIN releases AS r USING (release_id) "
        "GROUP BY r.artist_id ORDER BY amount DESC LIMIT 10"
    ),
    "fx rate": (
        "SELECT period, currency, usd_per_unit_micro FROM fx_rates "
        "WHERE currency = 'EUR' ORDER BY period"
    ),
}


def default_warehouse(folder: Path) -> Path:
    """The default label world and its answer key, loaded the way the pipeline does."""
    plugin = get_world_plugin("label")
    world = plugin.generate(seed=load_label_config().seed, scale=1.0)
    path = folder / "warehouse.duckdb"
    conn = connect(path)
    try:
        world_stages.store_world(conn, world)
        world_stages.store_answer_key(conn, plugin.answer_key(world))
    finally:
        conn.close()
    return path


def measure(tool: AgentSql, plain: duckdb.DuckDBPyConnection, repeats: int) -> dict[str, dict]:
    results: dict[str, dict] = {}
    for name, query in QUERIES.items():
        ours: list[float] = []
        floor: list[float] = []
        guard: list[float] = []
        rows = 0
        for round_ in range(repeats + 3):
            started = time.perf_counter()
            plain.execute(query).fetchmany(ROW_LIMIT + 1)
            floor_ms = (time.perf_counter() - started) * 1000
            started = time.perf_counter()
            result = tool.run(query)
            ours_ms = (time.perf_counter() - started) * 1000
            started = time.perf_counter()
            tool.guard.check(query)
            guard_ms = (time.perf_counter() - started) * 1000
            if round_ >= 3:  # the first rounds warm caches
                ours.append(ours_ms)
                floor.append(floor_ms)
                guard.append(guard_ms)
            rows = result.row_count
        results[name] = {"ours": ours, "floor": floor, "guard": guard, "rows": rows}
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument(
        "--warehouse", type=Path, help="an existing warehouse (default: build the default world)"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder_name:
        folder = Path(folder_name)
        if args.warehouse:
            warehouse = args.warehouse
        else:
            started = time.perf_counter()
            warehouse = default_warehouse(folder)
            print(f"default world warehouse built in {time.perf_counter() - started:.1f} s")
        started = time.perf_counter()
        agent_db = build_agent_world_db(warehouse, folder / "agent_world")
        build_s = time.perf_counter() - started
        size_mb = os.path.getsize(agent_db) / 1e6
        print(f"agent world database: built in {build_s:.2f} s, {size_mb:.1f} MB")
        # DuckDB will not open one file twice in a process with two configurations, so
        # the floor reads a byte copy of the same database.
        floor_db = folder / "floor" / agent_db.name
        floor_db.parent.mkdir()
        shutil.copy(agent_db, floor_db)
        with AgentSql(agent_db) as tool, duckdb.connect(str(floor_db), read_only=True) as plain:
            results = measure(tool, plain, args.repeats)
    print(f"\nrun_sql vs floor, median of {args.repeats} calls each (ms)")
    print(f"{'query':<32} {'rows':>5} {'run_sql':>8} {'floor':>7} {'ratio':>6} {'guard':>6}")
    for name, figures in results.items():
        ours = statistics.median(figures["ours"])
        floor = statistics.median(figures["floor"])
        print(
            f"{name:<32} {figures['rows']:>5} {ours:>8.2f} {floor:>7.2f} {ours / floor:>6.2f} "
            f"{statistics.median(figures['guard']):>6.2f}"
        )
    all_ours = [ms for figures in results.values() for ms in figures["ours"]]
    all_floor = [ms for figures in results.values() for ms in figures["floor"]]
    all_guard = [ms for figures in results.values() for ms in figures["guard"]]
    median_ours = statistics.median(all_ours)
    median_floor = statistics.median(all_floor)
    print(
        f"\nall calls: run_sql median {median_ours:.2f} ms, floor {median_floor:.2f} ms, "
        f"ratio {median_ours / median_floor:.2f}; guard alone {statistics.median(all_guard):.2f}"
        f" ms; run_sql p90 {statistics.quantiles(all_ours, n=10)[-1]:.2f} ms, "
        f"p95 {statistics.quantiles(all_ours, n=20)[-1]:.2f} ms"
    )
    met = median_ours <= GOAL_MEDIAN_MS
    print(
        f"goal: median run_sql <= {GOAL_MEDIAN_MS:g} ms on the default world: "
        f"{'met' if met else 'MISSED'}"
    )
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
