"""Why a case failed: the stored transcript read back from a warehouse and shown as text and
as a report page, the tier that failed it, and `evalp show`'s errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from eval_pipeline.lane_records import TraceEvent
from eval_pipeline.report.sweep_report import build_sweep_report, failing_cases
from eval_pipeline.report.transcript import (
    MAX_SHOWN_CHARS,
    TranscriptError,
    read_transcripts,
    show_case,
    transcript_html,
    transcript_path,
    transcript_text,
)
from eval_pipeline.scoring.aggregate import summarize_scores
from eval_pipeline.scoring.score import CaseScore, failed, failing_tier, score_case
from eval_pipeline_tests.report.test_refs import PROVENANCE
from eval_pipeline_tests.scoring.cases import make_case, make_run
from eval_pipeline_tests.scoring.test_grading import warehouse

CASE = make_case(expected="368.41", case_id="royalty_math-001", tiers=("exact",))


def event(seq: int, kind: str, data: dict[str, object], tool: str | None = None) -> TraceEvent:
    return TraceEvent(
        event_id=f"run-1/{CASE.case_id}/1/{seq}",
        run_id="run-1",
        lane="product",
        model="m",
        seed=0,
        case_id=CASE.case_id,
        attempt=1,
        turn=0 if seq < 5 else 1,
        seq=seq,
        kind=kind,  # type: ignore[arg-type]
        tool=tool,
        data=data,
    )


EVENTS = [
    event(
        1,
        "model_reply",
        {
            "status": "ok",
            "label": None,
            "stop_kind": "tool_use",
            "text": None,
            "tool_calls": [{"name": "calculate_royalties", "arguments": '{"artist_id": "A"}'}],
        },
    ),
    event(
        2,
        "tool_call",
        {"raw_arguments": '{"artist_id": "A"}', "repairs": []},
        "calculate_royalties",
    ),
    event(
        3,
        "tool_result",
        {"is_error": False, "text": "x" * (MAX_SHOWN_CHARS + 10), "elapsed_ms": 4.2},
        "calculate_royalties",
    ),
    event(4, "guard", {"guard": "stall_bounce", "action": "bounced", "reply": "wait"}),
    event(5, "write", {"request": {"batch": 1}, "allowed": False}, "submit_payout_batch"),
    event(
        6, "final", {"status": "completed", "end_reason": "final_answer", "text": "ANSWER: $1.00"}
    ),
]


def stored(tmp_path: Path) -> tuple[object, CaseScore]:
    run = make_run(CASE, "ANSWER: $1.00")
    con = warehouse(tmp_path, [run], EVENTS)
    return con, score_case(CASE, run, EVENTS)


def test_a_failed_case_reads_back_with_every_step_and_the_expected_answer_beside_the_reply(
    tmp_path: Path,
) -> None:
    con, score = stored(tmp_path)
    assert failed(score) and failing_tier(score) == "exact"
    [transcript] = read_transcripts(con, {CASE.case_id: CASE}, [score])  # type: ignore[arg-type]
    text = transcript_text(transcript)
    assert text.splitlines()[0] == "royalty_math-001 (royalty_math) · m · product lane · seed 0"
    assert "failed at: exact" in text
    assert "expected (money): 368.41" in text and "read from the reply: 1\n" in text
    for shown in (
        "[turn 0 · model reply (ok, label –, stop tool_use)]",
        '→ calculate_royalties {"artist_id": "A"}',
        "[turn 0 · tool call calculate_royalties]",
        "[turn 0 · tool result calculate_royalties (4.2 ms)]",
        "… (10 more characters, not shown)",
        "[turn 0 · guard stall_bounce: bounced]",
        "[turn 1 · write by submit_payout_batch (dry run, never executed; NOT ALLOWED)]",
        "[turn 1 · final (completed, final_answer)]",
        "What is it?",
    ):
        assert shown in text, shown
    page = transcript_html(transcript, back="../../../report.html")
    assert "<a href='../../../report.html'>← report</a>" in page
    assert "<h2 class='failed'>outcome</h2>" in page and "368.41" in page


def test_the_tier_that_failed_names_trace_checks_and_never_heard_cases() -> None:
    base = score_case(CASE, make_run(CASE, "ANSWER: $368.41"), [])
    assert not failed(base)
    trace = base.model_copy(update={"trace": 0.0, "score": 0.0, "failed_checks": ("sql_clean",)})
    assert failing_tier(trace) == "trace: sql_clean"
    unheard = base.model_copy(update={"status": "infra_error", "score": None})
    assert failed(unheard) and failing_tier(unheard) == "never heard (‡ infra error)"
    stopped = base.model_copy(update={"status": "budget_stopped", "score": None})
    assert failing_tier(stopped) == "budget-stopped (†)"


def test_text_from_a_reply_cannot_inject_markup_into_the_page(tmp_path: Path) -> None:
    con, score = stored(tmp_path)
    [transcript] = read_transcripts(con, {CASE.case_id: CASE}, [score])  # type: ignore[arg-type]
    hostile = transcript.model_copy(
        update={"events": (event(6, "final", {"text": "<script>alert(1)</script>"}),)}
    )
    page = transcript_html(hostile)
    assert "<script>" not in page and "&lt;script&gt;" in page


def test_the_report_lists_failing_cases_with_a_link_per_failed_seed_to_its_page(
    tmp_path: Path,
) -> None:
    con, score = stored(tmp_path)
    transcripts = read_transcripts(con, {CASE.case_id: CASE}, [score])  # type: ignore[arg-type]
    summaries = summarize_scores([score])
    lines = failing_cases(summaries, transcripts)
    assert "### m, product lane: 1 of 1 cases" in lines
    row = next(line for line in lines if line.startswith("| royalty_math-001 |"))
    assert f"[0]({transcript_path(score)})" in row and "| exact | 368.41 | 1 |" in row
    report = build_sweep_report(
        summaries, {("product", "m"): ("h",)}, PROVENANCE, failing=transcripts
    )
    assert list(report.pages) == ["transcripts/product/m/royalty_math-001-seed0.html"]
    assert "royalty_math-001-seed0.html" in report.html


def test_show_names_what_is_missing_with_what_is_stored(tmp_path: Path) -> None:
    con, score = stored(tmp_path)
    cases = {CASE.case_id: CASE}
    [shown] = show_case(con, cases, [score], CASE.case_id, "m", "product")  # type: ignore[arg-type]
    assert shown.score == score
    with pytest.raises(
        TranscriptError,
        match=r"no case 'royalty_math-999' in the current "
        r"fixture set \(e\.g\. royalty_math-001\)",
    ):
        show_case(con, cases, [score], "royalty_math-999", "m", "product")  # type: ignore[arg-type]
    with pytest.raises(
        TranscriptError,
        match="no stored score of royalty_math-001 for other in the product lane; "
        "stored: m:product",
    ):
        show_case(con, cases, [score], CASE.case_id, "other", "product")  # type: ignore[arg-type]
