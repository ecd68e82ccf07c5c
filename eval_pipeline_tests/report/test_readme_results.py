"""The README's results table is pinned through `evalp audit`, not by a copy of its numbers:
the demo on the default world, in a home of its own, writes the table into a copy of the
README, and both that copy and the committed README re-derive exactly from its runs."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from eval_pipeline.paths import PROJECT_ROOT
from eval_pipeline.report.readme import END, START
from eval_pipeline_tests.demo_helpers import run_evalp


@pytest.mark.slow
@pytest.mark.timeout(1200)  # a default-world demo: 297 s in one CI run, past the 300 s default
def test_the_readme_results_table_is_what_the_main_job_derives(isolated_state: Path) -> None:
    import os

    readme = isolated_state / "README.md"
    shutil.copy(PROJECT_ROOT / "README.md", readme)
    text = readme.read_text()
    start, end = text.index(START) + len(START), text.index(END)
    readme.write_text(text[:start] + "\n" + text[end:])  # the copy starts with no table
    env = {**os.environ, "EVALP_README": str(readme)}
    demo = run_evalp(["demo"], env, timeout_s=900)
    assert demo.returncode == 0, demo.stderr[-3000:]
    assert "results table updated" in demo.stdout
    written = run_evalp(["audit", str(readme)], env)
    assert written.returncode == 0, written.stdout[-2000:] + written.stderr[-2000:]
    assert "36 referenced numbers, all re-derived exactly" in written.stdout
    committed = run_evalp(["audit", str(PROJECT_ROOT / "README.md")], env)
    assert committed.returncode == 0, committed.stdout[-2000:] + committed.stderr[-2000:]
