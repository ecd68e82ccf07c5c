"""What MLflow tracking adds to a sweep: 3 models × 3 seeds × 2 lanes over every case of
the default fixture set, run and scored in this process against the simulated provider
(the sweep's wall, measured), then logged to a fresh embedded MLflow store (SQLite +
local artifacts) as one parent run and 18 nested runs with metrics per category and per
case.

Prints the sweep's wall, the tracking time (median of --repeats, each into a new store;
with and without opening the client, which a Dagster step pays once), and tracking's
share of the sweep. Goal: tracking adds at most 5% to the sweep. Exits 1 when missed. The
last line is a one-line summary of ratios.

    uv run python bench/tracking.py [--models sim-strong,sim-small,sim-strong-anthropic]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

GOAL_SHARE = 0.05


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default="sim-strong,sim-small,sim-strong-anthropic")
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    models = args.models.split(",")
    seeds = [int(s) for s in args.seeds.split(",")]

    from eval_pipeline import world_stages
    from eval_pipeline.experiments.isolated import run_and_score
    from eval_pipeline.journal import read_records
    from eval_pipeline.lane_records import LaneIdentity
    from eval_pipeline.lanes.agent_db import build_agent_world_db
    from eval_pipeline.lanes.partition_runs import IDENTITIES_JOURNAL, LaneSettings
    from eval_pipeline.project_configs import scan_model_configs
    from eval_pipeline.scoring.judge import load_judge
    from eval_pipeline.sim.sessions import session_for
    from eval_pipeline.tracking.mlflow_store import TrackingStore, open_client
    from eval_pipeline.tracking.provenance import code_version
    from eval_pipeline.tracking.sweep_runs import log_sweep
    from eval_pipeline.warehouse import connect
    from eval_pipeline.world.label import LabelWorld, load_label_config

    work = Path(tempfile.mkdtemp(prefix="bench-tracking-"))
    seed = load_label_config().seed
    world = LabelWorld().generate(seed, 1.0)
    key = LabelWorld().answer_key(world)
    conn = connect(work / "warehouse.duckdb")
    world_stages.store_world(conn, world)
    conn.close()
    agent_db = build_agent_world_db(work / "warehouse.duckdb", work / "agent")
    fixture_set = world_stages.freeze_suite(world, key, work / "fixtures")
    judge = load_judge()
    configs = scan_model_configs().require([*models, judge.model])
    configurations = [
        (f"{lane}-{model}", configs[model], LaneSettings(lane=lane))
        for model in models
        for lane in ("model", "product")
    ]

    with session_for(configs, run_id="bench-tracking", journal=work / "calls.jsonl") as session:

        async def sweep() -> list:  # type: ignore[type-arg]
            async with session:
                scored = await run_and_score(
                    configurations,
                    seeds=seeds,
                    fixture_set=fixture_set,
                    agent_db=agent_db,
                    session=session,
                    root=work / "lanes",
                    judge=judge,
                    judge_config=configs[judge.model],
                )
            return [score for pairs in scored.values() for score, _ in pairs]

        started = time.perf_counter()
        scores = asyncio.run(sweep())
        sweep_wall = time.perf_counter() - started

    identities = {
        identity.settings_hash: identity
        for path in (work / "lanes").rglob(IDENTITIES_JOURNAL)
        for identity in read_records(path, LaneIdentity)
    }
    code = code_version()
    import mlflow  # noqa: F401  (paid once per process, before the clock)

    log_only: list[float] = []
    with_client: list[float] = []
    metrics = 0
    for repeat in range(args.repeats):
        folder = work / f"mlflow-{repeat}"
        store = TrackingStore(
            uri=f"sqlite:///{folder / 'mlflow.db'}", artifact_root=(folder / "art").as_uri()
        )
        open_client(store)  # creates the schema: once per store, not per sweep
        opened = time.perf_counter()
        client = open_client(store)
        logging = time.perf_counter()
        logged = log_sweep(
            client,
            store,
            scores,
            identities,
            world=fixture_set.manifest.world,
            code=code,
            name=f"bench sweep {repeat}",
            tags={"bench": "tracking"},
        )
        done = time.perf_counter()
        log_only.append(done - logging)
        with_client.append(done - opened)
        metrics = logged.metrics
    log_median = statistics.median(log_only)
    client_median = statistics.median(with_client)
    share = client_median / sweep_wall
    print(
        f"sweep: {len(models)} models × {len(seeds)} seeds × 2 lanes × "
        f"{len(fixture_set.cases)} cases = {len(scores)} case runs in {sweep_wall:.1f} s "
        "(simulated provider, zero latency)"
    )
    print(
        f"tracking: {len(logged.nested)} nested runs, {metrics} metrics; log "
        f"{log_median:.2f} s (median of {args.repeats}: "
        + ", ".join(f"{t:.2f}" for t in log_only)
        + f"), with opening the client {client_median:.2f} s"
    )
    verdict = "met" if share <= GOAL_SHARE else "NOT met"
    print(
        f"summary: tracking/sweep {share:.3f} (log only {log_median / sweep_wall:.3f}); "
        f"goal <= {GOAL_SHARE:.2f} {verdict}"
    )
    return 0 if share <= GOAL_SHARE else 1


if __name__ == "__main__":
    sys.exit(main())
