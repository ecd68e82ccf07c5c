"""The sweep report reads the experiments' parity reports from disk; one written by older
code (a field it lacks) is listed as not shown, naming the file and how to refresh it,
instead of failing the whole report (found running the demo after the report gained the
arms' provider)."""

from __future__ import annotations

from pathlib import Path

from eval_pipeline import paths
from eval_pipeline.defs.report_assets import parity_reports_for


def test_a_parity_report_of_older_code_is_listed_not_shown_and_the_rest_is_read(
    isolated_state: Path,
) -> None:
    folder = paths.var_dir() / "reports" / "experiments"
    folder.mkdir(parents=True)
    (folder / "old-experiment.json").write_text('{"experiment_id": "old-experiment"}')
    found, unreadable = parity_reports_for("fx-any")
    assert found == []
    (line,) = unreadable
    assert "old-experiment.json" in line and "re-materialize experiments/old-experiment" in line
