"""Grading and re-grading partitions from a warehouse built inside each test: which
replies go to the judge, that a verdict is asked once and reused, what a re-grade reports
as changed and why, and what it drops (docs/scoring.md, "Commands")."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from types import MappingProxyType

import duckdb
import pytest

from eval_pipeline import paths
from eval_pipeline.cases.case import TRACE_SQL_CLEAN, Case
from eval_pipeline.journal import Journal
from eval_pipeline.lane_records import CaseRun, TraceEvent
from eval_pipeline.lanes.lane_tables import ensure_lane_tables, load_partition_records
from eval_pipeline.lanes.partition_runs import CASES_JOURNAL, TRACES_JOURNAL
from eval_pipeline.providers.envelope import JOURNAL_NAME, EnvelopeJournal
from eval_pipeline.scoring.grading import (
    JudgeItems,
    Partition,
    RegradeReport,
    cases_under,
    explain_change,
    grade_partition,
    judge_asker,
    judged_replies,
    partition_fixture_id,
    regrade,
    regrade_warehouse,
    rescore_stored,
    score_changes,
    stored_partitions,
)
from eval_pipeline.scoring.judge import Judge, load_judge, stored_verdicts, verdict_key
from eval_pipeline.scoring.score import CaseScore, JudgeVerdict, score_case
from eval_pipeline.scoring.score_tables import read_scores, write_scores
from eval_pipeline.sim.process import SIM_REQUEST_LOG
from eval_pipeline.sim.profiles.judge_profile import judge_reply
from eval_pipeline.warehouse.envelopes import ensure_envelope_table
from eval_pipeline_tests.cases.committed import committed_fixture_set
from eval_pipeline_tests.scoring.cases import make_case, make_run
from eval_pipeline_tests.scoring.test_relabel import envelope


def judge() -> Judge:
    return Judge(model="sim-judge", rubric_text="rubric", rubric_hash="r1", max_tokens=64)


def cases() -> dict[str, Case]:
    return {
        "money": make_case(case_id="money", tiers=("exact",)),
        "premise": make_case(
            case_id="premise",
            kind="abstain",
            expected="ABSTAIN",
            category="abstention",
            tiers=("exact", "judged"),
        ),
    }


def run(case_id: str, text: str | None, **fields: object) -> CaseRun:
    base = make_run(make_case(case_id=case_id), text)
    return base.model_copy(update={"case_id": case_id, **fields})


def warehouse(
    tmp_path: Path, runs: Sequence[CaseRun], events: Sequence[TraceEvent] = ()
) -> duckdb.DuckDBPyConnection:
    """The runs and events journaled and loaded as a lane partition loads them."""
    con = duckdb.connect(str(tmp_path / "warehouse.duckdb"))
    ensure_envelope_table(con)
    ensure_lane_tables(con)
    folder = tmp_path / f"partition-{len(list(tmp_path.iterdir()))}"
    with Journal[CaseRun](folder / CASES_JOURNAL) as journal:
        for item in runs:
            journal.append(item)
    with Journal[TraceEvent](folder / TRACES_JOURNAL) as journal:
        for event in events:
            journal.append(event)
    load_partition_records([folder], tmp_path / "runs", con)
    return con


class Asker:
    """A judge that passes every reply with ABSTAIN in it, counting what it was asked."""

    def __init__(self) -> None:
        self.asked: list[JudgeItems] = []

    def __call__(self, items: JudgeItems) -> Mapping[str, JudgeVerdict]:
        self.asked.append(dict(items))
        return {
            key: JudgeVerdict(passed="ABSTAIN" in (reply or ""), reason="ruled", call_id="j")
            for key, (_, reply) in items.items()
        }


def never(items: JudgeItems) -> Mapping[str, JudgeVerdict]:
    raise AssertionError(f"the judge was asked about {len(items)} replies")


def test_a_partitions_key_names_lane_model_and_seed() -> None:
    assert Partition(lane="product", model="sim-strong", seed=2).key == "product/sim-strong|2"


def test_only_completed_product_runs_of_judged_cases_go_to_the_judge() -> None:
    known = cases()
    runs = [
        run("premise", "ABSTAIN: no such clause"),
        run("premise", "ABSTAIN: model lane", lane="model"),
        run("premise", None, status="infra_error", end_reason="call_failed"),
        run("money", "ANSWER: $368.41"),
        run("unknown", "ANSWER: 1"),
    ]
    key = verdict_key(judge(), known["premise"], "ABSTAIN: no such clause")
    assert judged_replies(judge(), known, runs) == {
        key: (known["premise"], "ABSTAIN: no such clause")
    }


def test_a_verdict_is_asked_once_stored_and_reused(tmp_path: Path) -> None:
    known = cases()
    con = warehouse(
        tmp_path,
        [run("premise", "ABSTAIN: §3 is the term clause"), run("money", "ANSWER: $368.41")],
    )
    partition = Partition(lane="product", model="m", seed=0)
    asker = Asker()
    first = grade_partition(con, partition, known, judge(), asker)
    assert (first.judge_asked, first.judge_reused, len(asker.asked)) == (1, 0, 1)
    assert [list(items) for items in asker.asked] == [
        [verdict_key(judge(), known["premise"], "ABSTAIN: §3 is the term clause")]
    ]
    by_case = {s.case_id: s for s in first.scores}
    assert (by_case["premise"].judged, by_case["premise"].score) == (1.0, 1.0)
    assert by_case["money"].score == 1.0
    assert read_scores(con) == sorted(first.scores, key=lambda s: s.case_id)
    again = grade_partition(con, partition, known, judge(), never)
    assert (again.judge_asked, again.judge_reused) == (0, 1)
    assert again.scores == first.scores and again.partition == partition


def test_without_an_asker_a_reply_never_ruled_on_is_a_judge_error(tmp_path: Path) -> None:
    con = warehouse(tmp_path, [run("premise", "ABSTAIN: no")])
    graded = grade_partition(
        con, Partition(lane="product", model="m", seed=0), cases(), judge(), None
    )
    assert (graded.judge_asked, graded.judge_reused) == (0, 0)
    (score,) = graded.scores
    assert (score.status, score.score, score.reason) == ("judge_error", None, "judge: no verdict")
    assert read_scores(con) == [score]


def test_a_failed_judge_call_is_not_stored_and_is_asked_again(tmp_path: Path) -> None:
    con = warehouse(tmp_path, [run("premise", "ABSTAIN: no")])
    partition = Partition(lane="product", model="m", seed=0)

    def failing(items: JudgeItems) -> Mapping[str, JudgeVerdict]:
        return {k: JudgeVerdict(passed=None, reason="judge call drop", failed=True) for k in items}

    graded = grade_partition(con, partition, cases(), judge(), failing)
    assert graded.scores[0].status == "judge_error" and graded.judge_asked == 1
    asker = Asker()
    assert grade_partition(con, partition, cases(), judge(), asker).judge_asked == 1
    assert len(asker.asked) == 1


def test_rescoring_what_is_stored_writes_nothing_and_asks_no_one(tmp_path: Path) -> None:
    known = cases()
    con = warehouse(tmp_path, [run("premise", "ABSTAIN: no"), run("money", "ANSWER: $1")])
    partition = Partition(lane="product", model="m", seed=0)
    inputs, scores = rescore_stored(con, partition, known, judge())
    assert [r.case_id for r in inputs.runs] == [s.case_id for s in scores]
    assert {s.case_id: s.status for s in scores} == {"premise": "judge_error", "money": "scored"}
    assert read_scores(con) == []
    grade_partition(con, partition, known, judge(), Asker())
    _, rescored = rescore_stored(con, partition, known, judge())
    assert {s.case_id: s.judged for s in rescored} == {"premise": 1.0, "money": None}


def test_the_stored_partitions_in_order_and_each_ones_latest_fixture_set(tmp_path: Path) -> None:
    con = duckdb.connect(str(tmp_path / "empty.duckdb"))
    assert stored_partitions(con) == []
    con.close()
    con = warehouse(
        tmp_path,
        [
            run("money", "x", seed=1, fixture_id="fx-old", started_at="2026-01-01T00:00:00"),
            run(
                "money",
                "x",
                seed=1,
                fixture_id="fx-new",
                settings_hash="s2",
                started_at="2026-02-01T00:00:00",
            ),
            run("money", "x", lane="model", seed=3),
            run("money", "x", seed=0, model="a"),
        ],
    )
    assert [p.key for p in stored_partitions(con)] == ["model/m|3", "product/a|0", "product/m|1"]
    assert partition_fixture_id(con, Partition(lane="product", model="m", seed=1)) == "fx-new"
    with pytest.raises(LookupError, match=r"^no lane records for product/m\|5$"):
        partition_fixture_id(con, Partition(lane="product", model="m", seed=5))


def scored(case: Case, text: str, **update: object) -> CaseScore:
    return score_case(case, make_run(case, text), []).model_copy(update=update)


MONEY = make_case(case_id="money", tiers=("exact", "trace"), checks=(TRACE_SQL_CLEAN,))


@pytest.mark.parametrize(
    ("old", "new", "why"),
    [
        (None, {}, "newly scored"),
        ({}, {}, None),
        ({"status": "infra_error", "score": None}, {}, "status infra_error -> scored"),
        ({"exact": 0.0, "score": 0.0}, {}, "tier 1 reader (money): right"),
        ({"answer": "368.4"}, {}, "tier 1 reader (money): right"),
        (
            {},
            {"exact": 0.0, "score": 0.0, "reason": "read 1, expected 368.41; trace: x"},
            "tier 1 reader (money): read 1, expected 368.41",
        ),
        (
            {"failed_checks": ("a", "b")},
            {"failed_checks": ("b", "c", "d")},
            "tier 2 checks now failing c, d now passing a",
        ),
        ({}, {"failed_checks": ("b",)}, "tier 2 checks now failing b"),
        ({"failed_checks": ("b", "a")}, {}, "tier 2 checks now passing a, b"),
        ({"failed_checks": ("a", "b")}, {"failed_checks": ("b", "a")}, None),
        ({"trace": 0.0}, {}, "tier 2 checks"),
        ({"judged": 0.0}, {}, "tier 3 judge verdict"),
        ({"label": "schema"}, {}, "label schema -> right"),
        ({}, {"security_violation": True}, "security violation found"),
        ({"security_violation": True}, {}, "security violation cleared"),
        ({"score": 0.5}, {}, "score"),
        (
            {"status": "judge_error", "judged": None, "score": None, "label": "drop"},
            {"judged": 1.0},
            "status judge_error -> scored; tier 3 judge verdict; label drop -> right",
        ),
    ],
)
def test_a_change_is_explained_by_what_moved_it(
    old: dict[str, object] | None, new: dict[str, object], why: str | None
) -> None:
    text = "ANSWER: $368.41"
    before = None if old is None else scored(MONEY, text, **old)
    assert explain_change(MONEY, before, scored(MONEY, text, **new)) == why


def test_score_changes_show_old_and_new_scores_per_case() -> None:
    partition = Partition(lane="product", model="m", seed=0)
    other = make_case(case_id="other", tiers=("exact",))
    new = (
        scored(MONEY, "ANSWER: $368.41"),
        scored(other, "ANSWER: $1"),
        scored(other, "ANSWER: $1", case_id="third", status="infra_error", score=None),
        scored(other, "ANSWER: $1", case_id="same"),
    )
    before = {
        ("product", "m", 0, "money"): scored(MONEY, "ANSWER: $368.41", score=0.25),
        ("product", "m", 0, "third"): scored(other, "ANSWER: $1", case_id="third"),
        ("product", "m", 0, "same"): scored(other, "ANSWER: $1", case_id="same"),
        ("product", "m", 1, "other"): scored(other, "ANSWER: $368.41"),
    }
    known = {"money": MONEY, "other": other, "third": other, "same": other}
    changes, dropped = score_changes(
        before, new, lambda _: known, {(partition.lane, partition.model, partition.seed)}
    )
    assert [(c.partition, c.case_id, c.old, c.new, c.responsible) for c in changes] == [
        ("product/m|0", "money", "0.25", "1", "score"),
        ("product/m|0", "other", "not scored before", "0", "newly scored"),
        ("product/m|0", "third", "0", "infra_error", "status scored -> infra_error"),
    ]
    # a partition not re-scored keeps its scores; one re-scored without a case drops it
    assert dropped == []
    _, dropped = score_changes(
        before, new, lambda _: known, {("product", "m", 0), ("product", "m", 1)}
    )
    assert dropped == ["product/m|1 other"]


def test_a_regrade_rescores_every_partition_and_names_what_changed_and_what_it_dropped(
    tmp_path: Path,
) -> None:
    known = cases()
    con = warehouse(
        tmp_path,
        [
            run("money", "ANSWER: $368.41", fixture_id="fx-a"),
            run("premise", "ABSTAIN: no", fixture_id="fx-a"),
            run("money", "ANSWER: $1", lane="model", fixture_id="fx-b"),
        ],
    )
    stale = scored(known["money"], "ANSWER: $368.41", score=0.0, exact=0.0)
    gone = scored(known["money"], "ANSWER: $368.41", case_id="gone")
    write_scores(con, "product", "m", 0, [stale, gone])
    asked_for: list[str] = []

    def cases_for(fixture_id: str) -> Mapping[str, Case]:
        asked_for.append(fixture_id)
        return known

    asker = Asker()
    report = regrade(con, cases_for, judge(), asker)
    assert asked_for == ["fx-b", "fx-a"]  # model/m|0, then product/m|0
    assert [p.partition.key for p in report.partitions] == ["model/m|0", "product/m|0"]
    assert (report.scored, report.judge_asked, len(asker.asked)) == (3, 1, 1)
    assert report.dropped == ("product/m|0 gone",)
    changes = sorted(report.changes, key=lambda c: (c.partition, c.case_id))
    assert [(c.partition, c.case_id, c.old, c.new) for c in changes] == [
        ("model/m|0", "money", "not scored before", "0"),
        ("product/m|0", "money", "0", "1"),
        ("product/m|0", "premise", "not scored before", "1"),
    ]
    assert changes[1].responsible == "tier 1 reader (money): right"
    again = regrade(con, cases_for, judge(), never)
    assert (again.changes, again.dropped, again.judge_asked) == ((), (), 0)
    assert isinstance(again, RegradeReport)


def test_stored_verdicts_are_keyed_by_the_reply(tmp_path: Path) -> None:
    con = warehouse(tmp_path, [run("premise", "ABSTAIN: no")])
    grade_partition(con, Partition(lane="product", model="m", seed=0), cases(), judge(), Asker())
    key = verdict_key(judge(), cases()["premise"], "ABSTAIN: no")
    other = verdict_key(judge(), cases()["premise"], "ABSTAIN: yes")
    assert set(stored_verdicts(con, [key, other])) == {key}


def test_cases_under_loads_each_fixture_set_once_read_only() -> None:
    fixtures = committed_fixture_set()
    cases_for = cases_under(paths.FIXTURES_DIR)
    first = cases_for(fixtures.fixture_id)
    assert isinstance(first, MappingProxyType)
    assert dict(first) == {case.case_id: case for case in fixtures.cases}
    assert cases_for(fixtures.fixture_id) is first


def test_the_judge_is_asked_in_a_session_of_its_own_journaled_under_its_run(
    tmp_path: Path,
) -> None:
    pinned = load_judge()
    premise = cases()["premise"]
    decline = "§3 is the term clause, not an audit provision, so the premise does not hold.\n"
    replies = {
        "declines": decline + "ABSTAIN: §3 is not about audits",
        "repairs": "The audit clause is §5: 30 days' notice.\nANSWER: 30",
    }
    items = {verdict_key(pinned, premise, text): (premise, text) for text in replies.values()}
    verdicts = judge_asker(pinned, "regrade-1", tmp_path / "runs")(items)
    assert {key: v.passed for key, v in verdicts.items()} == {
        key: judge_reply(text)[0] for key, (_, text) in items.items()
    }
    assert sorted(v.passed for v in verdicts.values()) == [False, True]
    run_dir = tmp_path / "runs" / "regrade-1"
    assert (run_dir / JOURNAL_NAME).stat().st_size > 0
    assert len((run_dir / SIM_REQUEST_LOG).read_text("utf-8").splitlines()) == 2


def test_evalp_regrade_rescores_the_warehouse_and_loads_the_judges_journal(
    tmp_path: Path,
) -> None:
    fixtures = committed_fixture_set()
    unjudged = next(c for c in fixtures.cases if "judged" not in c.tiers)
    con = warehouse(tmp_path, [run(unjudged.case_id, "ANSWER: 1", fixture_id=fixtures.fixture_id)])
    con.close()
    runs_root = tmp_path / "runs"
    journaled = envelope(lane="judge", case=unjudged, response=None, run_id="regrade-1")
    with EnvelopeJournal(runs_root / "regrade-1" / JOURNAL_NAME) as journal:
        journal.append(journaled)
    report = regrade_warehouse(
        tmp_path / "warehouse.duckdb", paths.FIXTURES_DIR, runs_root, "regrade-1", judge()
    )
    assert [(c.case_id, c.responsible) for c in report.changes] == [
        (unjudged.case_id, "newly scored")
    ]
    with duckdb.connect(str(tmp_path / "warehouse.duckdb"), read_only=True) as stored:
        assert [s.case_id for s in read_scores(stored)] == [unjudged.case_id]
        envelopes = stored.execute("SELECT envelope_id FROM runs.call_envelopes").fetchall()
    assert envelopes == [(journaled.envelope_id,)]
    empty = tmp_path / "empty"
    empty.mkdir()
    con = warehouse(empty, [])
    con.close()
    quiet = regrade_warehouse(empty / "warehouse.duckdb", paths.FIXTURES_DIR, runs_root, "r2")
    assert (quiet.partitions, quiet.changes, quiet.dropped) == ((), (), ())


def test_evalp_regrade_asks_the_judge_it_was_given_in_a_session_journaled_under_its_run(
    tmp_path: Path,
) -> None:
    """A reply the given judge never ruled on is asked through the simulated provider under
    runs_root/run_id; the verdict is stored under that judge's rubric, and its journal is
    loaded into the warehouse."""
    fixtures = committed_fixture_set()
    judged = next(c for c in fixtures.cases if "judged" in c.tiers)
    reply = "The clause the question names is not in the contract.\nABSTAIN: no such clause"
    con = warehouse(tmp_path, [run(judged.case_id, reply, fixture_id=fixtures.fixture_id)])
    con.close()
    given = load_judge().model_copy(update={"rubric_hash": "given-rubric"})
    runs_root = tmp_path / "runs"
    report = regrade_warehouse(
        tmp_path / "warehouse.duckdb", paths.FIXTURES_DIR, runs_root, "regrade-j", given
    )
    assert report.judge_asked == 1
    run_dir = runs_root / "regrade-j"
    assert len((run_dir / SIM_REQUEST_LOG).read_text("utf-8").splitlines()) == 1
    with duckdb.connect(str(tmp_path / "warehouse.duckdb"), read_only=True) as stored:
        rubrics = stored.execute("SELECT rubric_hash FROM runs.judge_verdicts").fetchall()
        loaded = stored.execute(
            "SELECT count(*) FROM runs.call_envelopes WHERE run_id = 'regrade-j'"
        ).fetchone()
    assert rubrics == [("given-rubric",)]
    assert loaded is not None and loaded[0] >= 1
