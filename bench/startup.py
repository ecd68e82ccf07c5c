"""Benchmark: what starting up costs a user, against Dagster's own import.

Times, in fresh processes of the project's environment (bytecode compiled, as `./dev
setup` installs it), what a user starts most:

- `import eval_pipeline.definitions` (every Dagster process loads it: the webserver, the
  daemon, each run's worker), against `import dagster` alone, the floor no Dagster code
  location can go under;
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

PAIRS: dict[str, tuple[list[str], list[str]]] = {
    "definitions": (
        ["-c", "import eval_pipeline.definitions"],
        ["-c", "import dagster"],
    ),
    "evalp --help": (
        ["-m", "eval_pipeline.cli", "--help"],
        ["-c", "import click"],
    ),
}


def timed(arguments: list[str]) -> float:
    """Wall seconds of a fresh interpreter running `arguments`; fails in one line."""
    started = time.perf_counter()
    done = subprocess.run([sys.executable, *arguments], capture_output=True, text=True)
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise SystemExit(f"summary: python {' '.join(arguments)} failed: {last}")
    return elapsed


HEAVY = "import mlflow, polars, duckdb, pandas"
SHUTDOWN: tuple[str, str] = (
    f"import eval_pipeline.definitions; {HEAVY}",
    f"import dagster; {HEAVY}",
)
"""What ends with its shutdown timed: ours (the definitions loaded) and its floor."""


def shutdown_tail(imports: str) -> float:
    """Seconds from a fresh process's last statement to its end (wall clock, shared)."""
    script = f"{imports}\nimport time\nprint(repr(time.time()), flush=True)"
    process = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None
    last_statement = float(process.stdout.readline())
    process.wait()
    ended = time.time()
    if process.returncode != 0:
        raise SystemExit(f"summary: python -c {imports!r} failed (exit {process.returncode})")
    return ended - last_statement


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    for ours, floor in PAIRS.values():  # warm the OS file cache and the bytecode, untimed
        timed(ours)
        timed(floor)
    times: dict[str, tuple[list[float], list[float]]] = {name: ([], []) for name in PAIRS}
    tails: tuple[list[float], list[float]] = ([], [])
    for _ in range(args.rounds):
        for name, (ours, floor) in PAIRS.items():
            times[name][0].append(timed(ours))
            times[name][1].append(timed(floor))
        tails[0].append(shutdown_tail(SHUTDOWN[0]))
        tails[1].append(shutdown_tail(SHUTDOWN[1]))
    medians = {
        name: (statistics.median(ours), statistics.median(floor))
        for name, (ours, floor) in times.items()
    }
    for name, (ours, floor) in medians.items():
        print(f"{name:<14} {ours:6.3f} s   floor {floor:6.3f} s   {ours / floor:5.2f} x")
    tail, tail_floor = statistics.median(tails[0]), statistics.median(tails[1])
    ratio = tail / tail_floor
    print(f"{'shutdown':<14} {tail:6.3f} s   floor {tail_floor:6.3f} s   {ratio:5.2f} x")
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
