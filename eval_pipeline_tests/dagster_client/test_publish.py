"""`evalp publish --readme` writes only what a current sweep report holds: with no report it
is refused and the README is left as it was (the demo itself never edits the checkout; the
published path and a stale report: report/test_readme_results.py)."""

from __future__ import annotations

from pathlib import Path

from eval_pipeline.report.readme import END, START
from eval_pipeline_tests.test_cli import invoke


def test_publishing_with_no_sweep_report_is_refused_and_writes_nothing(
    isolated_state: Path,
) -> None:
    readme = isolated_state / "README.md"
    readme.write_text(f"# x\n{START}\nold table\n{END}\n")
    code, out, err = invoke("publish", "--readme", str(readme))
    assert code == 2, out + err
    assert "no sweep report" in err and "run `evalp demo`" in err, err
    assert readme.read_text() == f"# x\n{START}\nold table\n{END}\n"


def test_publish_says_what_to_publish_when_asked_for_nothing() -> None:
    code, _, err = invoke("publish")
    assert code == 2
    assert "--readme" in err
