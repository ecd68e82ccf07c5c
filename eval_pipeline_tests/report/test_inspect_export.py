"""The sweep in Inspect AI's log format, read back with Inspect's own reader."""

from __future__ import annotations

from pathlib import Path

import pytest
from inspect_ai.log import read_eval_log

from eval_pipeline.report.inspect_export import ExportError, eval_log, export_inspect
from eval_pipeline.report.transcript import read_transcripts
from eval_pipeline_tests.cases.committed import committed_fixture_set
from eval_pipeline_tests.report.test_transcript import CASE, stored


def test_a_case_run_becomes_a_sample_with_its_messages_score_and_usage(tmp_path: Path) -> None:
    con, score = stored(tmp_path)
    transcripts = read_transcripts(con, {CASE.case_id: CASE}, [score])  # type: ignore[arg-type]
    log = eval_log("product", "m", "simulated", committed_fixture_set(), transcripts)
    path = tmp_path / "log.eval"
    from inspect_ai.log import write_eval_log

    write_eval_log(log, path, format="eval")
    back = read_eval_log(str(path))
    assert back.eval.model == "simulated/m" and back.eval.task == "evalp/product_lane"
    assert back.samples is not None
    [sample] = back.samples
    assert (sample.id, sample.epoch, sample.target) == (CASE.case_id, 1, "368.41")
    assert [m.role for m in sample.messages] == ["user", "assistant", "tool"]
    assistant, tool = sample.messages[1], sample.messages[2]
    assert assistant.tool_calls is not None  # type: ignore[union-attr]
    [call] = assistant.tool_calls  # type: ignore[union-attr]
    assert call.function == "calculate_royalties" and tool.function == "calculate_royalties"  # type: ignore[union-attr]
    assert sample.scores is not None
    assert sample.scores["evalp_case_score"].value == 0.0
    assert sample.scores["evalp_case_score"].answer == "1"
    assert sample.output.completion == "ANSWER: $1.00"
    assert sample.metadata["seed"] == 0 and sample.metadata["status"] == "scored"


def test_a_never_heard_case_is_a_sample_without_a_score(tmp_path: Path) -> None:
    con, score = stored(tmp_path)
    unheard = score.model_copy(update={"status": "infra_error", "score": None})
    transcripts = read_transcripts(con, {CASE.case_id: CASE}, [unheard])  # type: ignore[arg-type]
    log = eval_log("product", "m", "simulated", committed_fixture_set(), transcripts)
    assert log.samples is not None and not log.samples[0].scores
    assert log.results is not None
    assert log.results.scores[0].unscored_samples == 1


def test_nothing_stored_is_one_error_naming_the_fixture_set(tmp_path: Path) -> None:
    con, _ = stored(tmp_path)
    with pytest.raises(ExportError, match=r"no scores of fixture set fx-\S+ to export"):
        export_inspect(con, committed_fixture_set(), [], {}, tmp_path / "out")  # type: ignore[arg-type]
