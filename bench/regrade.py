"""Benchmark: re-labelling N stored call envelopes, against a same-run floor.

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
at n = 1,000,000; exits 1 when it is missed. The last line sums up the ratio.

    uv run python bench/regrade.py [--n 1000000] [--repeats 3] [--seed 7]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import duckdb
from make_envelopes import DEFAULT_N, bench_cases_for, generate

from eval_pipeline.lane_records import CASE_RUNS
from eval_pipeline.paths import FIXTURES_DIR, var_dir
from eval_pipeline.providers.envelope_store import TABLE
from eval_pipeline.scoring.relabel import RELABELLED_LANES, RelabelReport, relabel_envelopes

GOAL_SECONDS = 10.0
GOAL_RATIO = 3.0
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=DEFAULT_N)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--db", type=Path, default=None)
    parser.add_argument("--regenerate", action="store_true")
    args = parser.parse_args(argv)
    if args.n < 1 or args.repeats < 1:
        print("regrade: --n and --repeats must be at least 1", file=sys.stderr)
        return 2
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
    print(f"ratios: relabel/floor {ratio:.2f}x")
    return code


if __name__ == "__main__":
    raise SystemExit(main())
