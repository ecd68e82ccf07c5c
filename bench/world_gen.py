"""Benchmark: world + answer key + suite, loaded into DuckDB, at 1x and 10x scale.

Each measurement runs in a fresh subprocess (so peak RSS is that run's alone) and is
repeated; the median is printed beside a floor measured in the same run: a bare polars
generation of the same number of statement lines with a simplified ledger, loaded into
DuckDB. Ratios, not absolute times, are what compare across machines.

    uv run python bench/world_gen.py [--scales 1 10] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def run_pipeline(scale: float, warehouse: Path) -> dict[str, float]:
    """Ours: generate, answer key, suite, and load world + truth into DuckDB."""
    from eval_pipeline import stages
    from eval_pipeline.warehouse import connect
    from eval_pipeline.world import get_world_plugin

    started = time.perf_counter()
    plugin = get_world_plugin("label")
    world = plugin.generate(seed=20260101, scale=scale)
    generated = time.perf_counter()
    answer_key = plugin.answer_key(world)
    keyed = time.perf_counter()
    cases = plugin.build_suite(world, answer_key)
    suited = time.perf_counter()
    conn = connect(warehouse)
    stages.store_world(conn, world)
    stages.store_answer_key(conn, answer_key)
    conn.close()
    loaded = time.perf_counter()
    return {
        "lines": float(world.tables["statement_lines"].height),
        "cases": float(len(cases)),
        "generate_s": generated - started,
        "answer_key_s": keyed - generated,
        "suite_s": suited - keyed,
        "load_s": loaded - suited,
        "total_s": loaded - started,
    }


def run_floor(lines: int, warehouse: Path) -> dict[str, float]:
    """The floor: random lines in polars, a group-by ledger, both loaded into DuckDB."""
    import duckdb
    import polars as pl

    started = time.perf_counter()
    row = pl.int_range(0, lines, dtype=pl.Int64, eager=True)
    scrambled = (row * 2_654_435_761) % 4_294_967_291  # cheap pseudo-random, not a world
    frame = pl.DataFrame(
        {
            "line_id": row,
            "statement_id": scrambled % 72,
            "track": scrambled % 2_400,
            "units": scrambled % 5_000 + 1,
            "amount_minor": scrambled % 500_000 + 1,
        }
    ).with_columns(artist=pl.col("track") % 150, period=pl.col("statement_id") % 12)
    ledger = frame.group_by(["artist", "period"]).agg(
        gross=(pl.col("amount_minor") * 180_000 // 1_000_000).sum()
    )
    conn = duckdb.connect(str(warehouse))
    conn.register("lines_frame", frame.to_arrow())
    conn.register("ledger_frame", ledger.to_arrow())
    conn.execute("CREATE TABLE lines AS SELECT * FROM lines_frame")
    conn.execute("CREATE TABLE ledger AS SELECT * FROM ledger_frame")
    conn.close()
    return {"lines": float(lines), "total_s": time.perf_counter() - started}


def child(kind: str, scale: float, lines: int) -> None:
    import resource

    with tempfile.TemporaryDirectory() as folder:
        warehouse = Path(folder) / "bench.duckdb"
        result = run_pipeline(scale, warehouse) if kind == "ours" else run_floor(lines, warehouse)
    result["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps(result))


def measure(kind: str, scale: float, lines: int, repeats: int) -> dict[str, float]:
    runs = []
    for _ in range(repeats):
        output = subprocess.run(
            [sys.executable, __file__, "--child", kind, str(scale), str(lines)],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        runs.append(json.loads(output.strip().splitlines()[-1]))
    return {key: statistics.median(run[key] for run in runs) for key in runs[0]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scales", type=float, nargs="+", default=[1.0, 10.0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child[0], float(args.child[1]), int(args.child[2]))
        return
    print(f"world_gen benchmark: median of {args.repeats} fresh processes per row")
    header = (
        f"{'scale':>5} {'lines':>10} {'ours s':>8} {'floor s':>8} {'ours/floor':>10} "
        f"{'lines/s':>11} {'peak MB':>8}  breakdown (gen/key/suite/load s)"
    )
    print(header)
    base_total = None
    for scale in args.scales:
        ours = measure("ours", scale, 0, args.repeats)
        floor = measure("floor", scale, int(ours["lines"]), args.repeats)
        base_total = base_total or ours["total_s"] / scale
        print(
            f"{scale:>5g} {int(ours['lines']):>10,} {ours['total_s']:>8.2f} "
            f"{floor['total_s']:>8.2f} {ours['total_s'] / floor['total_s']:>10.2f} "
            f"{ours['lines'] / ours['total_s']:>11,.0f} {ours['peak_rss_mb']:>8.0f}  "
            f"{ours['generate_s']:.2f}/{ours['answer_key_s']:.2f}/{ours['suite_s']:.2f}/"
            f"{ours['load_s']:.2f}  (time per unit scale vs 1x: "
            f"{ours['total_s'] / scale / base_total:.2f})"
        )
    print("goals on 2 cores: 1x <= 1.5 s, 10x <= 15 s (linear), peak at 10x <= 2048 MB")


if __name__ == "__main__":
    main()
