"""Benchmark: `evalp regrade` end to end, and re-labelling N stored call envelopes, each
against a same-run floor.

The whole command (issue 29): a default-world state with lane partitions swept by `evalp
sweep` (the simulated provider at zero latency), then `evalp regrade` as a user runs it: the
re-label of every stored lane call, then Dagster's regrade job per partition through the
run queue (a daemon started for it), then what changed. Its floor is the data the command
reads and writes: every stored envelope, case run and case score read into polars from the
warehouse and the scores written back, in one process. Ours and the floor alternate round by
round. Goal: <= 3x the floor.

The re-label alone, at a million envelopes:

Re-labels the final envelopes of a generated warehouse (`bench/make_envelopes.py`, made
once and reused: `var/bench/envelopes-<n>-<seed>.duckdb`) with
`eval_pipeline.scoring.relabel.relabel_envelopes`, which writes the changed labels back and
grades every reply with an answer against its case (tier 1, counted). Its cases are the
committed fixture set's and the bench's JSON-answer cases (`make_envelopes.bench_cases`).
Before every repeat the stored (older) labels are restored, untimed, so each repeat does
the same work.

The floor reads the same rows and the same columns into polars with DuckDB and does
nothing with them: the envelopes' row id, lane, run and case, model, status and failure
cause, stored label columns and response JSON, and the case runs' run, case and fixture
set (the re-label joins the two to find each envelope's case). The re-label also reads one
request per fixture set, for the tools it offered; the floor does not. Each repeat runs
the floor and then the re-label, each on a fresh connection, so machine noise (the machine
is shared) hits both: the ratio is the median of the repeats' ratios, the times the
medians of the repeats' times.

Goal (issue 9): one million envelopes in at most 10 s, within 3x of the floor. Judged only
at n = 1,000,000. Exits 1 when a goal is missed; the last line sums up the ratios.

    uv run python bench/regrade.py [--n 1000000] [--repeats 3] [--seed 7]
        [--models sim-strong,sim-small --seeds 0,1] [--whole-only | --relabel-only]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import duckdb
from bench_home import MAIN_JOB, environment, make_home, run
from make_envelopes import DEFAULT_N, bench_cases_for, generate

from eval_pipeline.lane_records import CASE_RUNS
from eval_pipeline.paths import FIXTURES_DIR, var_dir
from eval_pipeline.scoring.relabel import RELABELLED_LANES, RelabelReport, relabel_envelopes
from eval_pipeline.warehouse.envelopes import TABLE

GOAL_SECONDS = 10.0
GOAL_RATIO = 3.0
WHOLE_GOAL_RATIO = 3.0
"""`evalp regrade` end to end within this multiple of its floor (issue 29)."""
WHOLE_FLOOR_TABLES = ("runs.call_envelopes", "runs.case_runs", "runs.case_scores")
SAVED = "bench_stored_labels"
LABEL_COLUMNS = ("label", "label_reason", "answer", "drop_cause")
FLOOR_COLUMNS = (
    "rowid",
    "lane",
    "model",
    "run_id",
    "case_id",
    "status",
    "failure_cause",
    *LABEL_COLUMNS,
    "response_json",
)


def prepare(db: Path, n: int, seed: int, regenerate: bool) -> None:
    """Generate the warehouse if missing and keep its stored labels aside once."""
    if regenerate or not db.exists():
        started = time.perf_counter()
        summary = generate(db, n, seed)
        print(
            f"generated {summary['envelopes']:,} envelopes in {time.perf_counter() - started:.0f} s"
        )
    with duckdb.connect(str(db)) as con:
        con.execute(
            f"CREATE TABLE IF NOT EXISTS {SAVED} AS "
            f"SELECT envelope_id, {', '.join(LABEL_COLUMNS)} FROM {TABLE}"
        )
        stored = con.execute(f"SELECT count(*) FROM {TABLE}").fetchone()
        if stored is None or stored[0] != n:
            raise SystemExit(f"regrade: {db} holds {stored} envelopes, not {n}; use --regenerate")


def restore(db: Path) -> None:
    with duckdb.connect(str(db)) as con:
        con.execute("SET enable_progress_bar = false")
        sets = ", ".join(f"{c} = s.{c}" for c in LABEL_COLUMNS)
        con.execute(
            f"UPDATE {TABLE} AS t SET {sets} FROM {SAVED} AS s WHERE t.envelope_id = s.envelope_id"
        )
        con.execute("CHECKPOINT")


def floor_once(db: Path) -> tuple[float, int]:
    lanes = ", ".join(f"'{lane}'" for lane in RELABELLED_LANES)
    with duckdb.connect(str(db)) as con:
        started = time.perf_counter()
        frame = con.execute(
            f"SELECT {', '.join(FLOOR_COLUMNS)} FROM {TABLE} WHERE final AND lane IN ({lanes})"
        ).pl()
        con.execute(f"SELECT run_id, case_id, fixture_id FROM {CASE_RUNS}").pl()
        return time.perf_counter() - started, frame.height


def relabel_once(db: Path) -> tuple[float, RelabelReport]:
    cases_for = bench_cases_for(FIXTURES_DIR)
    with duckdb.connect(str(db)) as con:
        started = time.perf_counter()
        report = relabel_envelopes(con, cases_for)
        return time.perf_counter() - started, report


def whole_floor(warehouse: Path) -> float:
    """Read every envelope, case run and case score, and write the scores back."""
    with duckdb.connect(str(warehouse)) as con:
        started = time.perf_counter()
        frames = {table: con.execute(f"SELECT * FROM {table}").pl() for table in WHOLE_FLOOR_TABLES}
        con.register("scores_frame", frames["runs.case_scores"])
        con.execute("CREATE OR REPLACE TABLE main.bench_scores AS SELECT * FROM scores_frame")
        con.execute("CHECKPOINT")
        took = time.perf_counter() - started
        con.execute("DROP TABLE main.bench_scores")
    return took


def measure_whole(args: argparse.Namespace) -> tuple[float, float, float]:
    """`evalp regrade` and its floor, alternating: (ours s, floor s, median ratio)."""
    home = make_home(
        Path(tempfile.mkdtemp(prefix="bench-regrade-")),
        args.models.split(","),
        args.seeds.split(","),
    )
    env = environment(home)
    evalp = [sys.executable, "-m", "eval_pipeline.cli"]
    run([sys.executable, "-c", MAIN_JOB], env)
    run([*evalp, "sweep", "--models", args.models, "--seeds", args.seeds], env)
    with duckdb.connect(str(home / "warehouse.duckdb"), read_only=True) as con:
        row = con.execute("SELECT count(*) FROM runs.call_envelopes").fetchone()
    envelopes = int(row[0]) if row else 0
    partitions = len(args.models.split(",")) * len(args.seeds.split(","))
    ours: list[float] = []
    floors: list[float] = []
    for repeat in range(1, args.repeats + 1):
        ours.append(run([*evalp, "regrade"], env))
        floors.append(whole_floor(home / "warehouse.duckdb"))
        print(
            f"repeat {repeat}: evalp regrade {ours[-1]:6.2f} s   floor {floors[-1]:6.2f} s   "
            f"ratio {ours[-1] / floors[-1]:7.1f}x",
            flush=True,
        )
    ratio = statistics.median(o / f for o, f in zip(ours, floors, strict=True))
    print(
        f"evalp regrade over {partitions} partitions ({envelopes:,} envelopes): "
        f"{statistics.median(ours):.2f} s, floor {statistics.median(floors):.3f} s, "
        f"{ratio:.1f}x (goal <= {WHOLE_GOAL_RATIO:g}x)\n"
    )
    return statistics.median(ours), statistics.median(floors), ratio


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=DEFAULT_N)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--db", type=Path, default=None)
    parser.add_argument("--regenerate", action="store_true")
    parser.add_argument("--models", default="sim-strong,sim-small")
    parser.add_argument("--seeds", default="0,1")
    only = parser.add_mutually_exclusive_group()
    only.add_argument("--whole-only", action="store_true")
    only.add_argument("--relabel-only", action="store_true")
    args = parser.parse_args(argv)
    if args.n < 1 or args.repeats < 1:
        print("regrade: --n and --repeats must be at least 1", file=sys.stderr)
        return 2
    whole_ratio: float | None = None
    if not args.relabel_only:
        _, _, whole_ratio = measure_whole(args)
    whole_missed = whole_ratio is not None and whole_ratio > WHOLE_GOAL_RATIO
    whole = "" if whole_ratio is None else f"evalp regrade/floor {whole_ratio:.1f}x; "
    if args.whole_only:
        print(f"summary: {whole}" + ("MISSED" if whole_missed else "goal met"))
        return 1 if whole_missed else 0
    db = args.db or var_dir() / "bench" / f"envelopes-{args.n}-{args.seed}.duckdb"
    prepare(db, args.n, args.seed, args.regenerate)

    ours: list[float] = []
    floors: list[float] = []
    report: RelabelReport | None = None
    rows = 0
    for repeat in range(1, args.repeats + 1):
        restore(db)
        floor_s, rows = floor_once(db)
        seconds, report = relabel_once(db)
        floors.append(floor_s)
        ours.append(seconds)
        print(
            f"repeat {repeat}: relabel {seconds:6.2f} s ({report.changed:,} changed)   "
            f"floor {floor_s:6.2f} s   ratio {seconds / floor_s:5.2f}x"
        )
    assert report is not None
    if report.relabelled + report.unmatched != rows:
        raise SystemExit(f"regrade: re-labelled {report.relabelled:,} of {rows:,} rows read")

    ours_s, floor_s = statistics.median(ours), statistics.median(floors)
    rate, floor_rate = rows / ours_s, rows / floor_s
    ratio = statistics.median(o / f for o, f in zip(ours, floors, strict=True))
    print(f"\nfinal envelopes re-labelled: {rows:,} (of {args.n:,} stored attempts)")
    print("transitions (old -> new label, envelopes changed of all):")
    for t in report.transitions[:12]:
        print(
            f"  {t.old or 'unlabelled':>10} -> {t.new or 'unlabelled':<10} "
            f"{t.changed:>9,} of {t.count:>9,}"
        )
    print("tier-1 grades of the replies with an answer, per lane and model:")
    for g in report.grades:
        print(
            f"  {g.lane:<8} {g.model:<22} right {g.right:>8,}  wrong {g.wrong:>8,}  "
            f"no answer {g.no_answer:>8,}"
        )
    print(f"\nrelabel: {ours_s:6.2f} s median of {args.repeats}  {rate:12,.0f} envelopes/s")
    print(f"floor:   {floor_s:6.2f} s median of {args.repeats}  {floor_rate:12,.0f} envelopes/s")
    code = 0
    if args.n != DEFAULT_N:
        print(f"goal (<= {GOAL_SECONDS:.0f} s and <= {GOAL_RATIO:.0f}x floor) is for {DEFAULT_N:,}")
    else:
        met = ours_s <= GOAL_SECONDS and ratio <= GOAL_RATIO
        print(
            f"goal <= {GOAL_SECONDS:.0f} s and <= {GOAL_RATIO:.0f}x floor: "
            + ("met" if met else f"MISSED ({ours_s:.2f} s, {ratio:.2f}x)")
        )
        code = 0 if met else 1
    missed = whole_missed or code != 0
    print(f"summary: {whole}relabel/floor {ratio:.2f}x; " + ("MISSED" if missed else "goals met"))
    return 1 if missed else 0


if __name__ == "__main__":
    raise SystemExit(main())
