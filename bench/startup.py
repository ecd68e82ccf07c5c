"""Benchmark: what starting up costs a user, against Dagster's own import.

Times, in fresh processes of the project's environment (bytecode compiled, as `./dev
setup` installs it), what a user starts most:

- `import eval_pipeline.definitions` (every run's worker and code server loads it),
  timed from the process's start to its last statement, against `import dagster` alone
  timed the same way, the floor no Dagster code location can go under;
- `evalp --help` (the command's start), against `import click`, the floor of a click CLI;
- the shutdown of a process that loaded the definitions and what the heaviest commands
  and run steps import (MLflow, polars, DuckDB, pandas): the seconds from its last
  statement to its end, against a process that imported the same libraries without the
  definitions (Python's own shutdown, which collects over everything imported).

Ours and its floor alternate round by round, so the machine's noise hits both; each figure
is the median over the rounds. Goal (issue 29): the definitions import in at most 1.5 s on
a quiet machine; `evalp --help` within 2x of its floor (the commands import what they run
inside themselves); the shutdown at most half its floor (`eval_pipeline.shutdown`). Exits 1
on a missed goal; the last line sums up the ratios.

    uv run python bench/startup.py [--rounds 7]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

DEFINITIONS_GOAL_S = 1.5
HELP_GOAL_RATIO = 2.0
SHUTDOWN_GOAL_RATIO = 0.5

DEFINITIONS: tuple[str, str] = ("import eval_pipeline.definitions", "import dagster")
"""Timed to their last statement: the import alone (the definitions' process also exits
faster, which is the shutdown row's, not the import's)."""
HELP: tuple[list[str], list[str]] = (["-m", "eval_pipeline.cli", "--help"], ["-c", "import click"])
"""Timed whole: what a user waits for."""
HEAVY = "import mlflow, polars, duckdb, pandas"
SHUTDOWN: tuple[str, str] = (
    f"import eval_pipeline.definitions; {HEAVY}",
    f"import dagster; {HEAVY}",
)
"""What ends with its shutdown timed: ours (the definitions loaded) and its floor."""


def timed(arguments: list[str]) -> float:
    """Wall seconds of a fresh interpreter running `arguments`; fails in one line."""
    started = time.perf_counter()
    done = subprocess.run([sys.executable, *arguments], capture_output=True, text=True)
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise SystemExit(f"summary: python {' '.join(arguments)} failed: {last}")
    return elapsed


def to_last_statement_and_end(imports: str) -> tuple[float, float]:
    """A fresh process running `imports`: seconds from its start to its last statement, and
    from there to its end (wall clock, shared with the child); fails in one line."""
    script = f"{imports}\nimport time\nprint(repr(time.time()))"
    started = time.time()
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    ended = time.time()
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise SystemExit(f"summary: python -c {imports!r} failed: {last}")
    last_statement = float(done.stdout.strip().splitlines()[-1])
    return last_statement - started, ended - last_statement


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    for imports in (*DEFINITIONS, *SHUTDOWN):  # warm the file cache and bytecode, untimed
        to_last_statement_and_end(imports)
    timed(HELP[0])
    timed(HELP[1])
    times: dict[str, tuple[list[float], list[float]]] = {
        name: ([], []) for name in ("definitions", "evalp --help", "shutdown")
    }
    for _ in range(args.rounds):
        for side, imports in enumerate(DEFINITIONS):
            times["definitions"][side].append(to_last_statement_and_end(imports)[0])
        for side, arguments in enumerate(HELP):
            times["evalp --help"][side].append(timed(arguments))
        for side, imports in enumerate(SHUTDOWN):
            times["shutdown"][side].append(to_last_statement_and_end(imports)[1])
    medians = {
        name: (statistics.median(ours), statistics.median(floor))
        for name, (ours, floor) in times.items()
    }
    for name, (ours, floor) in medians.items():
        print(f"{name:<14} {ours:6.3f} s   floor {floor:6.3f} s   {ours / floor:5.2f} x")
    tail, tail_floor = medians["shutdown"]
    ratio = tail / tail_floor
    definitions, dagster = medians["definitions"]
    helped, click = medians["evalp --help"]
    missed = (
        definitions > DEFINITIONS_GOAL_S
        or helped / click > HELP_GOAL_RATIO
        or ratio > SHUTDOWN_GOAL_RATIO
    )
    print(
        f"summary: definitions {definitions:.2f} s (goal <= {DEFINITIONS_GOAL_S} s), "
        f"{definitions / dagster:.2f} x import dagster, {definitions - dagster:+.2f} s above it; "
        f"evalp --help {helped / click:.2f} x import click (goal <= {HELP_GOAL_RATIO:g} x); "
        f"shutdown {ratio:.2f} x its floor (goal <= {SHUTDOWN_GOAL_RATIO:g} x); "
        + ("MISSED" if missed else "goals met")
    )
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
