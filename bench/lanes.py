"""Both lanes of one partition on the default world, the way a lane run executes them: the
lanes job's lane-run assets in a Dagster run of their own (a fresh process each, in process
on the run's instance), the simulated provider at zero latency, each lane at its configured
concurrency (`LaneSettings.concurrency` cases at once), its tools over the agent database.

Each round (a seed of its own, so every case runs) measures, interleaved:
- the product lane alone and the model lane alone: cases per second from the case journal
  (first case started to last case ended), tool calls and the time inside each tool from
  the trace journal;
- the floor of the `run_sql` calls the product lane made: the same queries again, one at a
  time, through the tool on an idle machine (`alone`) and on a plain read-only DuckDB
  connection (`floor`), so the tail the agent met reads against what the queries cost.

Goals (issue 29): the product lane >= 15 cases/s; `run_sql` p95 as the agent met it
<= 20 ms. Exits 1 when a goal is missed; the last line is a one-line summary of ratios.

    uv run python bench/lanes.py [--model sim-strong] [--rounds 3]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from bench_home import MAIN_JOB, environment, make_home, run

PRODUCT_GOAL_CASES_S = 15.0
SQL_P95_GOAL_MS = 20.0
LANE_RUN = """
import sys, dagster as dg
from eval_pipeline.definitions import defs
from eval_pipeline.dagster_client.launch import QUIET
asset, model, seed = sys.argv[1:4]
with dg.DagsterInstance.get() as instance:
    if model not in instance.get_dynamic_partitions("models"):
        instance.add_dynamic_partitions("models", [model])
    result = defs.resolve_job_def("lanes").execute_in_process(
        instance=instance, partition_key=str(dg.MultiPartitionKey({"model": model, "seed": seed})),
        asset_selection=[dg.AssetKey(asset)], run_config=QUIET, raise_on_error=False)
    raise SystemExit(0 if result.success else 1)
"""


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


@dataclass(frozen=True)
class LaneFigures:
    """A lane partition's cases, wall time and tool calls, from its journals."""

    cases: int
    wall_s: float
    tools: dict[str, list[float]]
    """Milliseconds of each call, by tool."""
    queries: list[str]
    """The `run_sql` queries, in the order the agent sent them."""

    @property
    def cases_per_s(self) -> float:
        return self.cases / self.wall_s


def lane_figures(folder: Path) -> LaneFigures:
    """A lane partition's figures: wall time from the first case started to the last ended."""
    from eval_pipeline.journal import read_records
    from eval_pipeline.lane_records import CaseRun, TraceEvent
    from eval_pipeline.lanes.partition_runs import CASES_JOURNAL, TRACES_JOURNAL

    runs = list(read_records(folder / CASES_JOURNAL, CaseRun))
    starts = [datetime.fromisoformat(run.started_at).timestamp() for run in runs]
    ends = [start + run.elapsed_ms / 1000 for start, run in zip(starts, runs, strict=True)]
    wall = max(ends) - min(starts)
    tools: dict[str, list[float]] = {}
    queries: list[str] = []
    for event in read_records(folder / TRACES_JOURNAL, TraceEvent):
        if event.kind == "tool_result" and event.tool and "elapsed_ms" in event.data:
            tools.setdefault(event.tool, []).append(float(event.data["elapsed_ms"]))
        if event.kind == "tool_call" and event.tool == "run_sql":
            queries.append(str(event.data["arguments"]["query"]))
    return LaneFigures(cases=len(runs), wall_s=wall, tools=tools, queries=queries)


def replay(agent_db: Path, queries: list[str]) -> tuple[list[float], list[float]]:
    """Each query through the tool alone, then on a plain connection (the floor), in turn."""
    import duckdb

    from eval_pipeline.lanes.errors import SqlToolError
    from eval_pipeline.lanes.sql_tool import ROW_LIMIT, AgentSql

    alone: list[float] = []
    floor: list[float] = []
    with AgentSql(agent_db) as sql, duckdb.connect(str(agent_db), read_only=True) as plain:
        for query in queries:
            started = time.perf_counter()
            with contextlib.suppress(SqlToolError):  # a refused query is answered too
                sql.run(query)
            alone.append((time.perf_counter() - started) * 1000)
            started = time.perf_counter()
            with contextlib.suppress(duckdb.Error):
                plain.execute(query).fetchmany(ROW_LIMIT + 1)
            floor.append((time.perf_counter() - started) * 1000)
    return alone, floor


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="sim-strong")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()

    from eval_pipeline.lanes.partition_runs import LaneSettings, partition_dir

    seeds = list(range(args.rounds))
    home = make_home(Path(tempfile.mkdtemp(prefix="bench-lanes-")), [args.model], seeds)
    env = environment(home)
    run([sys.executable, "-c", MAIN_JOB], env)  # the default world, its fixtures, agent database
    (agent_db,) = (home / "agent_world").glob("*/*.duckdb")

    product: list[float] = []
    model: list[float] = []
    met: list[float] = []
    alone: list[float] = []
    floor: list[float] = []
    tool_ms: dict[str, list[float]] = {}
    for seed in seeds:
        figures: dict[str, LaneFigures] = {}
        for lane in ("product", "model"):
            run([sys.executable, "-c", LANE_RUN, f"{lane}_lane_runs", args.model, str(seed)], env)
            figures[lane] = lane_figures(partition_dir(lane, args.model, seed, home / "lanes"))
        product.append(figures["product"].cases_per_s)
        model.append(figures["model"].cases_per_s)
        tools = figures["product"].tools
        for tool, values in tools.items():
            tool_ms.setdefault(tool, []).extend(values)
        met.extend(tools.get("run_sql", []))
        round_alone, round_floor = replay(agent_db, figures["product"].queries)
        alone.extend(round_alone)
        floor.extend(round_floor)
        round_met = percentile(tools.get("run_sql", [0.0]), 0.95)
        print(
            f"round {seed}: product lane {product[-1]:.1f} cases/s, model lane "
            f"{model[-1]:.1f} cases/s; run_sql p95 met {round_met:.1f} ms, alone "
            f"{percentile(round_alone, 0.95):.1f} ms, floor {percentile(round_floor, 0.95):.1f} ms",
            flush=True,
        )

    concurrency = LaneSettings.model_fields["concurrency"].default
    print(
        f"model {args.model} (simulated provider, zero latency), default world, {concurrency} "
        f"cases at once per lane, {args.rounds} rounds (medians):"
    )
    for tool, values in sorted(tool_ms.items()):
        print(
            f"  {tool:<20} {len(values):>4} calls, {sum(values) / 1000:6.2f} s in all, median "
            f"{statistics.median(values):6.1f} ms, p95 {percentile(values, 0.95):6.1f} ms, "
            f"max {max(values):7.1f} ms"
        )
    product_s, model_s = statistics.median(product), statistics.median(model)
    sql_p95 = percentile(met, 0.95)
    alone_p95, floor_p95 = percentile(alone, 0.95), percentile(floor, 0.95)
    print(
        f"  run_sql p95: as the agent met it {sql_p95:.1f} ms = {sql_p95 / alone_p95:.1f} x "
        f"the same queries alone through the tool ({alone_p95:.1f} ms) = "
        f"{sql_p95 / floor_p95:.1f} x a plain DuckDB connection ({floor_p95:.1f} ms)"
    )
    missed = [
        name
        for name, ok in (
            ("product lane cases/s", product_s >= PRODUCT_GOAL_CASES_S),
            ("run_sql p95", sql_p95 <= SQL_P95_GOAL_MS),
        )
        if not ok
    ]
    print(
        json.dumps(
            {
                "product_cases_per_s": round(product_s, 1),
                "model_cases_per_s": round(model_s, 1),
                "run_sql_p95_ms": round(sql_p95, 1),
                "run_sql_p95_alone_ms": round(alone_p95, 1),
                "run_sql_p95_floor_ms": round(floor_p95, 1),
            }
        )
    )
    print(
        f"summary: product lane {product_s:.1f} cases/s = {product_s / PRODUCT_GOAL_CASES_S:.2f} x "
        f"the goal ({product_s / model_s:.2f} x the model lane); run_sql p95 {sql_p95:.1f} ms = "
        f"{sql_p95 / SQL_P95_GOAL_MS:.2f} x the goal, {sql_p95 / floor_p95:.1f} x its floor"
        + (f"; MISSED: {', '.join(missed)}" if missed else "; all goals met")
    )
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
