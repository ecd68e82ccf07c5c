"""Benchmark: what starting up costs a user, against Dagster's own import.

Times, in fresh processes of the project's environment (bytecode compiled, as `./dev
setup` installs it), what a user starts most:

- `import eval_pipeline.definitions` (every Dagster process loads it: the webserver, the
  daemon, each run's worker), against `import dagster` alone, the floor no Dagster code
  location can go under;
- `evalp --help` (the command's start), against `import click`, the floor of a click CLI.

Ours and its floor alternate round by round, so the machine's noise hits both; each figure
is the median over the rounds. Goal (issue 29): the definitions import in at most 1.5 s on
a quiet machine; `evalp --help` within 2x of its floor (the commands import what they run
inside themselves). Exits 1 on a missed goal; the last line sums up the ratios.

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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    for ours, floor in PAIRS.values():  # warm the OS file cache and the bytecode, untimed
        timed(ours)
        timed(floor)
    times: dict[str, tuple[list[float], list[float]]] = {name: ([], []) for name in PAIRS}
    for _ in range(args.rounds):
        for name, (ours, floor) in PAIRS.items():
            times[name][0].append(timed(ours))
            times[name][1].append(timed(floor))
    medians = {
        name: (statistics.median(ours), statistics.median(floor))
        for name, (ours, floor) in times.items()
    }
    for name, (ours, floor) in medians.items():
        print(f"{name:<14} {ours:6.3f} s   floor {floor:6.3f} s   {ours / floor:5.2f} x")
    definitions, dagster = medians["definitions"]
    helped, click = medians["evalp --help"]
    missed = definitions > DEFINITIONS_GOAL_S or helped / click > HELP_GOAL_RATIO
    print(
        f"summary: definitions {definitions:.2f} s (goal <= {DEFINITIONS_GOAL_S} s), "
        f"{definitions / dagster:.2f} x import dagster, {definitions - dagster:+.2f} s above it; "
        f"evalp --help {helped / click:.2f} x import click (goal <= {HELP_GOAL_RATIO:g} x); "
        + ("MISSED" if missed else "goals met")
    )
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
