"""The judge asked in the lane step, not while the warehouse's writer slot is held (issue 26,
found by bench/sweep_scale.py: every partition's warehouse step waited on another's judge
calls): verdicts journaled beside the lane's records, reused across the model's seeds, and
stored for scoring so the scores step asks nothing that was ruled on."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from eval_pipeline.scoring.grading import JudgeItems, Partition, grade_partition
from eval_pipeline.scoring.judge import verdict_key
from eval_pipeline.scoring.score import JudgeVerdict
from eval_pipeline.scoring.verdict_journal import (
    VERDICTS_JOURNAL,
    journaled,
    judge_lane_replies,
    store_journaled_verdicts,
)
from eval_pipeline_tests.scoring.test_grading import Asker, cases, judge, never, run, warehouse

REPLY = "ABSTAIN: §3 is the term clause"


def test_a_reply_is_judged_once_in_the_lane_step_and_the_scores_step_asks_nothing(
    tmp_path: Path,
) -> None:
    known = cases()
    runs = [run("premise", REPLY), run("money", "ANSWER: $368.41")]
    seed0, seed1 = tmp_path / "lanes" / "0", tmp_path / "lanes" / "1"
    seed0.mkdir(parents=True)
    seed1.mkdir(parents=True)
    asker = Asker()
    assert judge_lane_replies(seed0, [seed1], runs, known, judge(), asker, "judge-a") == 1
    assert [list(items) for items in asker.asked] == [
        [verdict_key(judge(), known["premise"], REPLY)]
    ]
    # the same run again, and the same reply in another seed: no new call; the other
    # seed's journal holds the verdict too (its own warehouse step reads only its own)
    assert judge_lane_replies(seed0, [seed1], runs, known, judge(), never, "judge-a") == 0
    assert judge_lane_replies(seed1, [seed0], runs, known, judge(), never, "judge-b") == 0
    assert set(journaled([seed1])) == set(journaled([seed0])) != set()
    assert journaled([seed1])[verdict_key(judge(), known["premise"], REPLY)].judge_run_id == (
        "judge-a"
    )

    con = warehouse(tmp_path, runs)
    assert store_journaled_verdicts(con, seed1, judge(), known, tmp_path / "runs") == 1
    graded = grade_partition(
        con, Partition(lane="product", model="m", seed=0), known, judge(), never
    )
    assert (graded.judge_asked, graded.judge_reused) == (0, 1)
    assert {s.case_id: s.judged for s in graded.scores}["premise"] == 1.0


def test_a_failed_judge_call_is_not_journaled_and_is_left_to_the_scores_step(
    tmp_path: Path,
) -> None:
    known = cases()
    runs = [run("premise", REPLY)]

    def failing(items: JudgeItems) -> Mapping[str, JudgeVerdict]:
        return {k: JudgeVerdict(passed=None, reason="judge call drop", failed=True) for k in items}

    assert judge_lane_replies(tmp_path, [], runs, known, judge(), failing, "judge-a") == 1
    assert journaled([tmp_path]) == {}
    con = warehouse(tmp_path, runs)
    assert store_journaled_verdicts(con, tmp_path, judge(), known, tmp_path / "runs") == 0
    asker = Asker()
    graded = grade_partition(
        con, Partition(lane="product", model="m", seed=0), known, judge(), asker
    )
    assert graded.judge_asked == 1 and len(asker.asked) == 1


def test_a_verdict_under_another_rubric_is_not_stored_for_the_current_judge(
    tmp_path: Path,
) -> None:
    known = cases()
    runs = [run("premise", REPLY)]
    assert judge_lane_replies(tmp_path, [], runs, known, judge(), Asker(), "judge-a") == 1
    changed = judge().model_copy(update={"rubric_hash": "r2"})
    con = warehouse(tmp_path, runs)
    assert store_journaled_verdicts(con, tmp_path, changed, known, tmp_path / "runs") == 0
    assert (tmp_path / VERDICTS_JOURNAL).stat().st_size > 0
