"""The judge asked before the warehouse: a partition's product-lane replies judged in the
lane step, their verdicts journaled beside the lane's records, and stored where scoring
looks for them by the warehouse step.

Judging in the scores step held the warehouse's one writer slot for as long as the judge
took: every partition of a night waited on every other's judge calls (a second each on the
simulated provider, seconds to minutes on a hosted judge, a timeout's worth when it hangs).
The lane step holds no pool, so its judge calls overlap other runs' work like the lanes'
own; the scores step finds every verdict stored and asks only for what is still missing (a
judge call that failed, a rubric changed since).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import duckdb

from eval_pipeline.cases.case import Case
from eval_pipeline.journal import Journal, read_records
from eval_pipeline.lane_records import CaseRun
from eval_pipeline.providers.envelope import JOURNAL_NAME
from eval_pipeline.records import FrozenRecord
from eval_pipeline.scoring.grading import JudgeAsker, judged_replies
from eval_pipeline.scoring.judge import Judge, store_verdicts
from eval_pipeline.scoring.score import JudgeVerdict
from eval_pipeline.warehouse.envelopes import load_journal

VERDICTS_JOURNAL = "judge-verdicts.jsonl"


class JournaledVerdict(FrozenRecord):
    """One verdict as the lane step journaled it: its key (judge, rubric, case, reply), and
    the judge run whose call journal holds the call behind it."""

    key: str
    case_id: str
    judge_model: str
    rubric_hash: str
    verdict: JudgeVerdict
    judge_run_id: str


def _usable(verdict: JudgeVerdict) -> bool:
    return not verdict.failed and verdict.passed is not None


def journaled(folders: Iterable[Path]) -> dict[str, JournaledVerdict]:
    """The usable verdicts journaled in `folders`, by key (a torn last line is skipped)."""
    return {
        record.key: record
        for folder in folders
        for record in read_records(folder / VERDICTS_JOURNAL, JournaledVerdict)
        if _usable(record.verdict)
    }


def judge_lane_replies(
    folder: Path,
    siblings: Sequence[Path],
    runs: Sequence[CaseRun],
    cases: Mapping[str, Case],
    judge: Judge,
    ask: JudgeAsker,
    judge_run_id: str,
) -> int:
    """Ask the judge about the lane's judged replies that no verdict journal of `folder` or
    `siblings` (the model's other seeds: a reply repeated across seeds is judged once)
    holds yet. `folder`'s journal ends up holding a verdict for every judged reply the
    judge ruled on (one found in a sibling's is copied: the warehouse step reads only its
    own partition's). Returns how many were asked."""
    items = judged_replies(judge, cases, runs)
    here = journaled([folder])
    elsewhere = journaled(siblings)
    copied = [elsewhere[key] for key in items if key not in here and key in elsewhere]
    missing = {key: item for key, item in items.items() if key not in here and key not in elsewhere}
    fresh = ask(missing) if missing else {}
    if not copied and not fresh:
        return 0
    with Journal[JournaledVerdict](folder / VERDICTS_JOURNAL) as journal:
        for record in copied:
            journal.append(record)
        for key, verdict in fresh.items():
            if _usable(verdict):  # a failed call is asked again by the scores step
                journal.append(
                    JournaledVerdict(
                        key=key,
                        case_id=missing[key][0].case_id,
                        judge_model=judge.model,
                        rubric_hash=judge.rubric_hash,
                        verdict=verdict,
                        judge_run_id=judge_run_id,
                    )
                )
    return len(missing)


def store_journaled_verdicts(
    con: duckdb.DuckDBPyConnection,
    folder: Path,
    judge: Judge,
    cases: Mapping[str, Case],
    runs_root: Path,
) -> int:
    """The current judge's verdicts journaled in `folder`, stored in `runs.judge_verdicts`,
    and the call journals of the judge runs behind them loaded (each once: loading is
    idempotent). Returns how many verdicts were stored."""
    current = {
        key: record
        for key, record in journaled([folder]).items()
        if (record.judge_model, record.rubric_hash) == (judge.model, judge.rubric_hash)
        and record.case_id in cases
    }
    store_verdicts(
        con,
        judge,
        {key: cases[record.case_id] for key, record in current.items()},
        {key: record.verdict for key, record in current.items()},
    )
    for run_id in sorted({record.judge_run_id for record in current.values()}):
        journal = runs_root / run_id / JOURNAL_NAME
        if journal.exists():
            load_journal(journal, con)
    return len(current)
