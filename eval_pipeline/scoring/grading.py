"""Grading a partition: its stored records to stored scores, and re-grading a whole sweep.

One path for both: the lane's rows are read from the warehouse, scored with the current
readers and checks, and written back in place of the partition's previous scores. The
judge is asked only for replies it has no stored verdict on (a new reply, a changed
rubric); with nothing changed, grading calls no model at all.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Callable, Collection, Mapping, Sequence
from pathlib import Path
from types import MappingProxyType

import duckdb

from eval_pipeline.cases.case import Case
from eval_pipeline.cases.frozen import load_fixtures
from eval_pipeline.lane_records import CASE_OUTCOMES, CaseRun
from eval_pipeline.project_configs import scan_model_configs
from eval_pipeline.providers.envelope import JOURNAL_NAME
from eval_pipeline.records import FrozenRecord
from eval_pipeline.scoring.judge import (
    Judge,
    judge_in_session,
    load_judge,
    store_verdicts,
    stored_verdicts,
    verdict_key,
)
from eval_pipeline.scoring.score import CaseScore, JudgeVerdict
from eval_pipeline.scoring.score_tables import (
    PartitionInputs,
    read_partition,
    read_scores,
    score_partition,
    write_scores,
)
from eval_pipeline.sim.process import SIM_REQUEST_LOG, running_sim
from eval_pipeline.sim.sessions import session_for
from eval_pipeline.warehouse import connect, has_table
from eval_pipeline.warehouse.envelopes import load_journal

JudgeItems = Mapping[str, tuple[Case, str | None]]
JudgeAsker = Callable[[JudgeItems], Mapping[str, JudgeVerdict]]
"""Asks the judge about replies (keyed by `verdict_key`); called only when some are new."""


class Partition(FrozenRecord):
    lane: str
    model: str
    seed: int

    @property
    def key(self) -> str:
        return f"{self.lane}/{self.model}|{self.seed}"


class GradedPartition(FrozenRecord):
    partition: Partition
    scores: tuple[CaseScore, ...]
    judge_asked: int
    judge_reused: int

    @property
    def digest(self) -> str:
        """What the scores say, as one SHA-256: the scores asset's data version, so what
        reads them is stale exactly when a score, a status or a label moved (a regrade that
        reproduced them changes nothing downstream)."""
        rows = sorted((s.model_dump(mode="json") for s in self.scores), key=lambda r: r["case_id"])
        return hashlib.sha256(json.dumps(rows, sort_keys=True).encode("utf-8")).hexdigest()


def judged_replies(judge: Judge, cases: Mapping[str, Case], runs: Sequence[CaseRun]) -> JudgeItems:
    """The replies the judge must rule on: completed product-lane runs of judged cases."""
    return {
        verdict_key(judge, cases[run.case_id], run.final_text): (
            cases[run.case_id],
            run.final_text,
        )
        for run in runs
        if run.lane == "product"
        and run.status == "completed"
        and run.case_id in cases
        and "judged" in cases[run.case_id].tiers
    }


def grade_partition(
    con: duckdb.DuckDBPyConnection,
    partition: Partition,
    cases: Mapping[str, Case],
    judge: Judge,
    ask: JudgeAsker | None,
) -> GradedPartition:
    """Score one partition from the warehouse and replace its rows in `runs.case_scores`.

    Without `ask`, a reply the judge never ruled on is a judge error (‡), not a guess."""
    inputs = read_partition(con, partition.lane, partition.model, partition.seed)
    items = judged_replies(judge, cases, inputs.runs)
    verdicts = dict(stored_verdicts(con, list(items)))
    missing = {key: item for key, item in items.items() if key not in verdicts}
    reused = len(items) - len(missing)
    if missing and ask is not None:
        fresh = ask(missing)
        store_verdicts(con, judge, {key: case for key, (case, _) in missing.items()}, fresh)
        verdicts.update(fresh)
    by_case = _verdicts_by_case(inputs, cases, judge, verdicts)
    scores = score_partition(inputs, cases, by_case)
    write_scores(con, partition.lane, partition.model, partition.seed, scores)
    return GradedPartition(
        partition=partition,
        scores=tuple(scores),
        judge_asked=len(missing) if ask is not None else 0,
        judge_reused=reused,
    )


def _verdicts_by_case(
    inputs: PartitionInputs,
    cases: Mapping[str, Case],
    judge: Judge,
    verdicts: Mapping[str, JudgeVerdict],
) -> dict[str, JudgeVerdict]:
    return {
        run.case_id: verdicts[key]
        for run in inputs.runs
        if run.case_id in cases
        and (key := verdict_key(judge, cases[run.case_id], run.final_text)) in verdicts
    }


def rescore_stored(
    con: duckdb.DuckDBPyConnection, partition: Partition, cases: Mapping[str, Case], judge: Judge
) -> tuple[PartitionInputs, list[CaseScore]]:
    """A partition re-scored from what is stored, writing nothing (the audit's path): a
    reply the judge never ruled on is a judge error (‡), never a guess or a new call."""
    inputs = read_partition(con, partition.lane, partition.model, partition.seed)
    items = judged_replies(judge, cases, inputs.runs)
    verdicts = dict(stored_verdicts(con, list(items)))
    by_case = _verdicts_by_case(inputs, cases, judge, verdicts)
    return inputs, score_partition(inputs, cases, by_case)


def stored_partitions(con: duckdb.DuckDBPyConnection) -> list[Partition]:
    """Every (lane, model, seed) with lane records in the warehouse."""
    if not has_table(con, CASE_OUTCOMES):
        return []
    rows = con.execute(
        f"SELECT DISTINCT lane, model, seed FROM {CASE_OUTCOMES} ORDER BY lane, model, seed"
    ).fetchall()
    return [Partition(lane=lane, model=model, seed=seed) for lane, model, seed in rows]


def partition_fixture_id(con: duckdb.DuckDBPyConnection, partition: Partition) -> str:
    """The fixture set the partition's latest records ran on."""
    row = con.execute(
        f"SELECT fixture_id FROM {CASE_OUTCOMES} WHERE lane = ? AND model = ? AND seed = ? "
        "ORDER BY started_at DESC LIMIT 1",
        [partition.lane, partition.model, partition.seed],
    ).fetchone()
    if row is None:
        raise LookupError(f"no lane records for {partition.key}")
    return str(row[0])


class ScoreChange(FrozenRecord):
    """One case whose stored score a re-grade changed, and what changed it."""

    partition: str
    case_id: str
    old: str
    new: str
    responsible: str


def _shown(score: CaseScore | None) -> str:
    if score is None:
        return "not scored before"
    if score.score is None:
        return score.status
    return f"{score.score:g}"


def explain_change(case: Case, old: CaseScore | None, new: CaseScore) -> str | None:
    """Which reader, check or verdict moved the case; None when nothing did."""
    if old is None:
        return "newly scored"
    reasons = []
    if old.status != new.status:
        reasons.append(f"status {old.status} -> {new.status}")
    if old.exact != new.exact or old.answer != new.answer:
        reasons.append(f"tier 1 reader ({case.answer_kind}): {new.reason.split(';')[0]}")
    if set(old.failed_checks) != set(new.failed_checks):
        gained = sorted(set(new.failed_checks) - set(old.failed_checks))
        lost = sorted(set(old.failed_checks) - set(new.failed_checks))
        reasons.append(
            "tier 2 checks"
            + (f" now failing {', '.join(gained)}" if gained else "")
            + (f" now passing {', '.join(lost)}" if lost else "")
        )
    elif old.trace != new.trace:
        reasons.append("tier 2 checks")
    if old.judged != new.judged:
        reasons.append("tier 3 judge verdict")
    if old.label != new.label:
        reasons.append(f"label {old.label} -> {new.label}")
    if old.security_violation != new.security_violation:
        reasons.append("security violation " + ("found" if new.security_violation else "cleared"))
    if not reasons and old.score == new.score:
        return None
    return "; ".join(reasons) or "score"


def previous_scores(con: duckdb.DuckDBPyConnection) -> dict[tuple[str, str, int, str], CaseScore]:
    return {(s.lane, s.model, s.seed, s.case_id): s for s in read_scores(con)}


def score_changes(
    before: Mapping[tuple[str, str, int, str], CaseScore],
    after: Sequence[CaseScore],
    cases_for: Callable[[str], Mapping[str, Case]],
    rescored: Collection[tuple[str, str, int]],
) -> tuple[list[ScoreChange], list[str]]:
    """What re-scoring the `rescored` (lane, model, seed) partitions changed: each case
    whose score moved and what moved it, and the scores stored before in them that the
    re-scoring did not reproduce (their case is no longer among its partition's latest
    records, or the partition's records are gone)."""
    changes = []
    cases_of = functools.cache(cases_for)  # a fixture set is read once, not once per case
    for new in after:
        old = before.get((new.lane, new.model, new.seed, new.case_id))
        why = explain_change(cases_of(new.fixture_id)[new.case_id], old, new)
        if why is not None:
            changes.append(
                ScoreChange(
                    partition=Partition(lane=new.lane, model=new.model, seed=new.seed).key,
                    case_id=new.case_id,
                    old=_shown(old),
                    new=_shown(new),
                    responsible=why,
                )
            )
    seen = {(s.lane, s.model, s.seed, s.case_id) for s in after}
    dropped = sorted(
        f"{k[0]}/{k[1]}|{k[2]} {k[3]}" for k in before if k not in seen and k[:3] in rescored
    )
    return changes, dropped


class RegradeReport(FrozenRecord):
    partitions: tuple[GradedPartition, ...]
    changes: tuple[ScoreChange, ...]
    dropped: tuple[str, ...]
    """Scores stored before that the re-grade did not reproduce (their case is no longer
    among its partition's latest records)."""

    @property
    def judge_asked(self) -> int:
        return sum(p.judge_asked for p in self.partitions)

    @property
    def scored(self) -> int:
        return sum(len(p.scores) for p in self.partitions)


def regrade(
    con: duckdb.DuckDBPyConnection,
    cases_for: Callable[[str], Mapping[str, Case]],
    judge: Judge,
    ask: JudgeAsker | None,
) -> RegradeReport:
    """Re-score every stored partition with the current scorers; report what changed.

    `cases_for(fixture_id)` gives a fixture set's cases by id."""
    before = previous_scores(con)
    cases_for = functools.cache(cases_for)  # each fixture set read once, for both uses
    graded = [
        grade_partition(con, partition, cases_for(partition_fixture_id(con, partition)), judge, ask)
        for partition in stored_partitions(con)
    ]
    after = [s for p in graded for s in p.scores]
    changes, dropped = score_changes(before, after, cases_for, {k[:3] for k in before})
    return RegradeReport(partitions=tuple(graded), changes=tuple(changes), dropped=tuple(dropped))


def cases_under(root: Path) -> Callable[[str], Mapping[str, Case]]:
    """`cases_for` over the fixture sets under `root` (each set loaded and verified once)."""

    @functools.cache
    def cases_for(fixture_id: str) -> Mapping[str, Case]:
        fixture_set = load_fixtures(root / fixture_id)
        return MappingProxyType({case.case_id: case for case in fixture_set.cases})

    return cases_for


def judge_asker(judge: Judge, run_id: str, runs_root: Path) -> JudgeAsker:
    """Ask `judge` in a session of its own (journal and, for the simulated provider, its
    request log under runs_root/run_id); nothing starts until there is something to ask."""

    def ask(items: JudgeItems) -> Mapping[str, JudgeVerdict]:
        config = scan_model_configs().require([judge.model])[judge.model]
        run_dir = runs_root / run_id
        with session_for(
            {judge.model: config},
            run_id=run_id,
            journal=run_dir / JOURNAL_NAME,
            start_sim=lambda: running_sim(request_log=run_dir / SIM_REQUEST_LOG),
        ) as session:
            return judge_in_session(session, config, judge, items)

    return ask


def regrade_warehouse(
    warehouse: Path, fixtures_root: Path, runs_root: Path, run_id: str, judge: Judge | None = None
) -> RegradeReport:
    """`evalp regrade`: every stored partition re-scored in place; the judge's calls (only
    for replies it never ruled on) journaled under runs_root/run_id and loaded."""
    judge = judge or load_judge()
    con = connect(warehouse)
    try:
        report = regrade(
            con, cases_under(fixtures_root), judge, judge_asker(judge, run_id, runs_root)
        )
        journal = runs_root / run_id / JOURNAL_NAME
        if journal.exists():
            load_journal(journal, con)
    finally:
        con.close()
    return report
