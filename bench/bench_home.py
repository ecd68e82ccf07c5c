"""What the benches that run the pipeline share: a home of their own (warehouse, fixtures,
Dagster instance, sweep config, optionally a smaller world) and its commands, run in
subprocesses and timed, a failed one ending the bench in one line."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

SMALL_WORLD = "small-world.yaml"
"""A home's world config, when it has one; without it the committed default world."""
MAIN_JOB = (
    "import dagster as dg; from eval_pipeline import paths; paths.prepared_dagster_home(); "
    "from eval_pipeline.definitions import defs; "
    "from eval_pipeline.dagster_client.launch import QUIET; "
    "r = defs.resolve_job_def('evaluation_pipeline').execute_in_process("
    "instance=dg.DagsterInstance.get(), raise_on_error=False, run_config=QUIET); "
    "raise SystemExit(0 if r.success else 1)"
)
"""The main job in process (`python -c MAIN_JOB`): world, answer key, fixtures, agent db."""


def make_home(
    home: Path, models: Sequence[str], seeds: Sequence[str | int], world: str | None = None
) -> Path:
    """`home` with a sweep config of `models` x `seeds` (the lanes' seed partitions come
    from it) and, given `world`, that world config."""
    home.mkdir(parents=True, exist_ok=True)
    (home / "sweep.yaml").write_text(
        f"name: bench\nmodels: [{', '.join(models)}]\nseeds: [{', '.join(map(str, seeds))}]\n"
    )
    if world is not None:
        (home / SMALL_WORLD).write_text(world)
    return home


def environment(home: Path, latency_ms: int = 0) -> dict[str, str]:
    """The environment that points every command at `home`, the simulated provider
    answering after `latency_ms`."""
    world = {"EVALP_WORLD_CONFIG": str(home / SMALL_WORLD)} if (home / SMALL_WORLD).exists() else {}
    return {
        **os.environ,
        "EVALP_HOME": str(home),
        "EVALP_WAREHOUSE": str(home / "warehouse.duckdb"),
        "EVALP_FIXTURES_ROOT": str(home / "fixtures"),
        "DAGSTER_HOME": str(home / "dagster_home"),
        "EVALP_SWEEP_CONFIG": str(home / "sweep.yaml"),
        "EVALP_SIM_LATENCY_MS": str(latency_ms),
        **world,
    }


def run(command: list[str], env: dict[str, str]) -> float:
    """Wall seconds of `command`; a failure prints its output's tail and ends the bench."""
    started = time.perf_counter()
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    took = time.perf_counter() - started
    if done.returncode != 0:
        print(done.stdout[-3000:], done.stderr[-3000:])
        raise SystemExit(f"summary: {' '.join(command[:5])} failed (exit {done.returncode})")
    return took
