"""A night's sweep at a real model's latency: lane partitions in parallel through Dagster's
run queue, against the ideal for the configured concurrency and against the serial path.

The simulated provider answers every request after a fixed delay (`EVALP_SIM_LATENCY_MS`,
default 1 s here). One main job builds a small world and its fixtures; then, interleaved,
each in a fresh copy of that state:

- ours: `evalp sweep --models M --seeds S`, the command a user runs: its partitions go to
  Dagster's run queue (one backfill per provider), the daemon starts them within the queue's
  limits, the runs share the provider's `max_in_flight` (one pool of slots on this machine);
  then the results job.
- serial: the path before the run queue: the lanes job in process, one partition after
  another, then the results job.

The ideal for ours is every call's latency spread over the calls in flight across all runs
(the provider's `max_in_flight`, or less when its runs at once cannot fill it), plus the
serial floor (the case with the most
turns, each a call, one after the other). Goals: ours <= 1.5 x the ideal, serial >= 4 x ours,
and the projection of 20 models x 10 seeds at 5 s a call, with the shipped hosted-model
configs' limits, <= 8 hours. Exits 1 on a missed goal; the last line is a summary.

    uv run python bench/sweep_scale.py [--models a,b,c,d] [--seeds 0,1] [--latency-ms 1000]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

from bench_home import MAIN_JOB, environment, make_home, run

IDEAL_GOAL = 1.5
SERIAL_GOAL = 4.0
PROJECTION_GOAL_H = 8.0
PROJECTED_MODELS, PROJECTED_SEEDS, PROJECTED_LATENCY_S = 20, 10, 5.0
HOSTED = ("claude-sonnet-4-5", "gpt-4.1")
"""The shipped hosted-model configs; the projection splits the 20 models evenly over their
providers."""
SMALL_WORLD_CONFIG = "plugin: label\nseed: 12\nscale: 0.05\n"
SERIAL = """
import sys, dagster as dg
from eval_pipeline.definitions import defs
from eval_pipeline.dagster_client.launch import QUIET
models, seeds = sys.argv[1].split(","), sys.argv[2].split(",")
with dg.DagsterInstance.get() as instance:
    instance.add_dynamic_partitions("models", [m for m in models
        if m not in instance.get_dynamic_partitions("models")])
    lanes = defs.resolve_job_def("lanes")
    for model in models:
        for seed in seeds:
            key = str(dg.MultiPartitionKey({"model": model, "seed": seed}))
            r = lanes.execute_in_process(instance=instance, partition_key=key,
                                         run_config=QUIET, raise_on_error=False)
            if not r.success:
                raise SystemExit(f"lanes {key} failed")
    r = defs.resolve_job_def("results").execute_in_process(instance=instance,
                                                           run_config=QUIET, raise_on_error=False)
    raise SystemExit(0 if r.success else 1)
"""


PROC_STAT = Path("/proc/stat")


def cpu_ticks() -> tuple[int, int] | None:
    """(all, idle) CPU ticks of the machine since boot (Linux), to tell a CPU-bound run:
    at 1 s a call, 128 calls in flight on 2 cores are the CPU's limit, not Dagster's."""
    if not PROC_STAT.exists():
        return None
    ticks = [int(field) for field in PROC_STAT.read_text().split("\n", 1)[0].split()[1:]]
    return sum(ticks), ticks[3] + ticks[4]


def busy_between(before: tuple[int, int] | None, after: tuple[int, int] | None) -> str:
    if before is None or after is None or after[0] == before[0]:
        return "machine busy: unknown (no /proc/stat)"
    share = 1 - (after[1] - before[1]) / (after[0] - before[0])
    return f"machine busy {share:.0%} of {os.cpu_count()} CPUs"


def fresh_copy(base: Path, into: Path) -> Path:
    """The prepared state (world, fixtures, Dagster instance after the main job) copied to a
    new home: every measurement starts with no lane run done."""
    shutil.copytree(base, into, symlinks=True)
    return into


def calls_and_floor(home: Path) -> tuple[int, int]:
    """The lane calls sent to the simulated provider (each took the latency once), and the
    most calls one case made in one lane (its turns, one after another)."""
    import duckdb

    calls = sum(
        len(log.read_text(encoding="utf-8").splitlines())
        for log in (home / "runs").glob("*-lane-*/sim-requests.jsonl")
    )
    with duckdb.connect(str(home / "warehouse.duckdb"), read_only=True) as conn:
        row = conn.execute(
            "select max(n) from (select count(*) as n from runs.call_envelopes "
            "where lane in ('model', 'product') group by run_id, case_id)"
        ).fetchone()
    return calls, int(row[0] or 0) if row else 0


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument(
        "--models",
        default="sim-strong,sim-small,sim-hesitant,sim-strong-anthropic,sim-small-anthropic",
    )
    parser.add_argument("--seeds", default="0,1,2,3")
    parser.add_argument("--latency-ms", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args()
    models, seeds = args.models.split(","), args.seeds.split(",")
    partitions = len(models) * len(seeds)
    latency_s = args.latency_ms / 1000

    root = Path(tempfile.mkdtemp(prefix="bench-sweep-"))
    base = make_home(root / "base", models, seeds, SMALL_WORLD_CONFIG)
    python = sys.executable
    run([python, "-c", MAIN_JOB], environment(base, 0))

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from eval_pipeline.lanes.partition_runs import LaneSettings
    from eval_pipeline.project_configs import scan_model_configs
    from eval_pipeline.providers.run_limits import runs_at_once

    configs = scan_model_configs().configs
    # a lane run's two lanes each run this many cases at once, one call in flight each
    calls_per_run = 2 * LaneSettings.model_fields["concurrency"].default

    def provider_in_flight(provider: str, names: list[str], partitions: int) -> int:
        """Calls in flight across the runs at once against `provider`: its runs at once (no
        more than its partitions), each with as many calls as its cases allow, within the
        config's `max_in_flight` (the runs of this machine share it as one pool)."""
        runs = min(runs_at_once(provider), partitions)
        return min(min(configs[name].max_in_flight for name in names), runs * calls_per_run)

    providers = {configs[m].provider for m in models}
    in_flight = sum(
        provider_in_flight(
            p,
            [m for m in models if configs[m].provider == p],
            sum(len(seeds) for m in models if configs[m].provider == p),
        )
        for p in providers
    )

    ours: list[float] = []
    serial: list[float] = []
    ideals: list[float] = []
    calls_per_partition: list[float] = []
    evalp = [
        python,
        "-m",
        "eval_pipeline.cli",
        "sweep",
        "--models",
        args.models,
        "--seeds",
        args.seeds,
    ]
    for round_ in range(args.rounds):
        home = fresh_copy(base, root / f"ours-{round_}")
        ticks = cpu_ticks()
        ours.append(run(evalp, environment(home, args.latency_ms)))
        busy = busy_between(ticks, cpu_ticks())
        calls, floor = calls_and_floor(home)
        ideals.append(calls * latency_s / in_flight + floor * latency_s)
        calls_per_partition.append(calls / partitions)
        print(
            f"round {round_}: ours {ours[-1]:.1f} s for {partitions} partitions, {calls} calls "
            f"({in_flight} in flight across the runs; serial floor {floor} turns); ideal "
            f"{ideals[-1]:.1f} s; {busy}",
            flush=True,
        )
        home = fresh_copy(base, root / f"serial-{round_}")
        serial.append(
            run([python, "-c", SERIAL, args.models, args.seeds], environment(home, args.latency_ms))
        )
        print(f"round {round_}: serial {serial[-1]:.1f} s", flush=True)

    ours_s, serial_s, ideal_s = (statistics.median(v) for v in (ours, serial, ideals))
    to_ideal = ours_s / ideal_s
    speedup = serial_s / ours_s
    # 20 models x 10 seeds at 5 s a call: the calls a partition made here, over the hosted
    # providers' calls in flight (their runs at once times each run's share), at the
    # efficiency measured here against the ideal.
    hosted = [configs[name] for name in HOSTED]
    hosted_in_flight = sum(
        provider_in_flight(c.provider, [c.name], PROJECTED_MODELS * PROJECTED_SEEDS) for c in hosted
    )
    projected_calls = PROJECTED_MODELS * PROJECTED_SEEDS * statistics.median(calls_per_partition)
    projected_h = projected_calls * PROJECTED_LATENCY_S / hosted_in_flight * to_ideal / 3600
    print(
        f"ours {ours_s:.1f} s, ideal {ideal_s:.1f} s: {to_ideal:.2f} x the ideal "
        f"(goal <= {IDEAL_GOAL})"
    )
    print(f"serial {serial_s:.1f} s: {speedup:.2f} x ours (goal >= {SERIAL_GOAL})")
    print(
        f"projected {PROJECTED_MODELS} models x {PROJECTED_SEEDS} seeds at "
        f"{PROJECTED_LATENCY_S:g} s a call over {', '.join(c.name for c in hosted)} "
        f"({hosted_in_flight} calls in flight): "
        f"{projected_calls:,.0f} calls, {projected_h:.1f} h (goal <= {PROJECTION_GOAL_H:g} h)"
    )
    missed = [
        name
        for name, ok in (
            ("ideal", to_ideal <= IDEAL_GOAL),
            ("serial", speedup >= SERIAL_GOAL),
            ("projection", projected_h <= PROJECTION_GOAL_H),
        )
        if not ok
    ]
    print(
        f"summary: {partitions} partitions at {args.latency_ms} ms a call: {to_ideal:.2f} x ideal, "
        f"{speedup:.2f} x faster than serial, projected {projected_h:.1f} h"
        + (f"; MISSED: {', '.join(missed)}" if missed else "; all goals met")
    )
    print(json.dumps({"ours_s": ours, "serial_s": serial, "ideal_s": ideals}))
    shutil.rmtree(root, ignore_errors=True)
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
