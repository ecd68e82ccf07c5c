"""Both lanes over every case of the default fixture set, one model and seed, against the
simulated provider at zero latency.

Prints cases per second per lane, tool calls per second, and how each lane's wall time
splits (measured warm: the SDK import and client set-up are paid by one call before the
clock). Cases run one at a time, so wall = time inside model calls + time inside the tools
+ the harness (the loop, guards, argument repair, journals and traces):
- outside the provider = 1 - model calls / wall (the tools' own work included);
- harness overhead = harness / wall, the tools' work excluded: at zero provider latency the
  tools' DuckDB and polars work over 468k statement lines is the product doing its job,
  measured on its own by the `run_sql` median (and bench/sql_tool.py), not harness cost.
Goals: harness overhead <= 20% with sim-strong; `run_sql` median <= 5 ms on the default
world. Exits 1 when a goal is missed. The last line is a one-line summary of ratios.

    uv run python bench/lanes.py [--model sim-strong] [--seed 0] [--concurrency 1]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

OVERHEAD_GOAL = 0.20
SQL_MEDIAN_GOAL_MS = 5.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="sim-strong")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--concurrency", type=int, default=1)
    args = parser.parse_args()

    from eval_pipeline import world_stages
    from eval_pipeline.journal import read_records
    from eval_pipeline.lane_records import TraceEvent
    from eval_pipeline.lanes.agent_db import build_agent_world_db
    from eval_pipeline.lanes.runner import (
        TRACES_JOURNAL,
        LaneSettings,
        partition_dir,
        run_partition,
    )
    from eval_pipeline.providers.config import load_model_configs
    from eval_pipeline.providers.harness import CallSession, CallTag
    from eval_pipeline.providers.types import Message, ModelRequest
    from eval_pipeline.sim.process import running_sim
    from eval_pipeline.warehouse import connect
    from eval_pipeline.world.label import LabelWorld, load_label_config
    from eval_pipeline.world.label.toolbox import LabelToolbox

    config = load_model_configs()[args.model]
    work = Path(tempfile.mkdtemp(prefix="bench-lanes-"))
    seed = load_label_config().seed
    world = LabelWorld().generate(seed, 1.0)
    key = LabelWorld().answer_key(world)
    conn = connect(work / "warehouse.duckdb")
    world_stages.store_world(conn, world)
    conn.close()
    agent_db = build_agent_world_db(work / "warehouse.duckdb", work / "agent")
    fixture_set = world_stages.freeze_suite(world, key, work / "fixtures")

    results: dict[str, dict[str, float]] = {}
    with running_sim() as sim, LabelToolbox(agent_db) as toolbox:
        url = sim.anthropic_base_url if config.api == "anthropic_messages" else sim.openai_base_url
        for lane in ("model", "product"):

            async def go(lane: str = lane) -> tuple[float, float, int, int]:
                async with CallSession(
                    run_id=f"bench-{lane}",
                    journal_path=work / lane / "envelopes.jsonl",
                    base_urls={config.name: url},
                    api_keys={config.name: "sim"},
                ) as session:
                    # Warm: the SDK import and client set-up (seconds, once per process)
                    # are not the harness's per-case cost; the first call pays them.
                    await session.client(config).call(
                        ModelRequest(
                            messages=(Message(role="user", content="warm up"),), max_tokens=16
                        ),
                        CallTag(lane="warm-up", case_id="warm-up"),
                    )
                    session.envelopes.clear()
                    started = time.perf_counter()
                    summary = await run_partition(
                        lane=lane,  # type: ignore[arg-type]
                        config=config,
                        seed=args.seed,
                        fixture_set=fixture_set,
                        session=session,
                        settings=LaneSettings(lane=lane, concurrency=args.concurrency),  # type: ignore[arg-type]
                        toolbox=toolbox if lane == "product" else None,
                        folder=partition_dir(lane, config.name, args.seed, work / "lanes"),  # type: ignore[arg-type]
                    )
                    wall = time.perf_counter() - started
                    in_calls = sum(e.elapsed_ms for e in session.envelopes) / 1000
                    return wall, in_calls, summary.cases, summary.tool_calls

            wall, in_calls, cases, tool_calls = asyncio.run(go())
            in_tools = (
                sum(
                    float(event.data["elapsed_ms"])
                    for event in read_records(
                        partition_dir(lane, config.name, args.seed, work / "lanes")  # type: ignore[arg-type]
                        / TRACES_JOURNAL,
                        TraceEvent,
                    )
                    if event.kind == "tool_result"
                )
                / 1000
            )
            serial = args.concurrency == 1
            results[lane] = {
                "wall_s": wall,
                "in_calls_s": in_calls,
                "in_tools_s": in_tools,
                "cases": cases,
                "tool_calls": tool_calls,
                "cases_per_s": cases / wall,
                "tool_calls_per_s": tool_calls / wall,
                "outside": max(0.0, 1 - in_calls / wall) if serial else float("nan"),
                "overhead": max(0.0, 1 - (in_calls + in_tools) / wall) if serial else float("nan"),
            }
    sql_ms = [
        float(event.data["elapsed_ms"])
        for event in read_records(
            partition_dir("product", config.name, args.seed, work / "lanes") / TRACES_JOURNAL,
            TraceEvent,
        )
        if event.kind == "tool_result" and event.tool == "run_sql" and "elapsed_ms" in event.data
    ]
    sql_median = statistics.median(sql_ms) if sql_ms else float("nan")

    print(
        f"model {config.name} (simulated provider, zero latency), seed {args.seed}, default world"
    )
    for lane, r in results.items():
        print(
            f"  {lane:<8} {int(r['cases'])} cases in {r['wall_s']:.2f} s = "
            f"{r['cases_per_s']:.1f} cases/s; "
            f"{int(r['tool_calls'])} tool calls = {r['tool_calls_per_s']:.1f}/s"
        )
        harness = r["wall_s"] - r["in_calls_s"] - r["in_tools_s"]
        print(
            f"           wall {r['wall_s']:.2f} s = model calls {r['in_calls_s']:.2f} s + tools "
            f"{r['in_tools_s']:.2f} s + harness {harness:.2f} s; outside the provider "
            f"{100 * r['outside']:.1f}% of wall, harness overhead {100 * r['overhead']:.1f}%"
        )
    print(f"  run_sql as the agent met it: {len(sql_ms)} calls, median {sql_median:.2f} ms")
    overhead = results["product"]["overhead"]
    met_overhead = overhead <= OVERHEAD_GOAL
    met_sql = sql_median <= SQL_MEDIAN_GOAL_MS
    print(
        json.dumps(
            {
                "product_outside_provider": round(results["product"]["outside"], 3),
                "product_harness_overhead": round(overhead, 3),
                "overhead_goal": OVERHEAD_GOAL,
                "run_sql_median_ms": round(sql_median, 2),
                "run_sql_goal_ms": SQL_MEDIAN_GOAL_MS,
                "goals_met": met_overhead and met_sql,
            }
        )
    )
    return 0 if met_overhead and met_sql else 1


if __name__ == "__main__":
    sys.exit(main())
