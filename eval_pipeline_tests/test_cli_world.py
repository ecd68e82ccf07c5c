"""`evalp demo --world examples/arith/world.yaml`, as the README's "Evaluate your own cases"
says (issue 27, item 2): both lanes, scores, gate, MLflow and the report on a five-case
dataset with one tool, run by simulated agents that know no world; the report lists the
example's categories and none of the label world's, and every number in it re-derives."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from eval_pipeline import paths
from eval_pipeline.world.label.versions import CATEGORIES as LABEL_CATEGORIES
from eval_pipeline_tests.demo_helpers import run_evalp

EXAMPLE = paths.PROJECT_ROOT / "examples" / "arith"


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_the_arith_example_runs_the_whole_pipeline_on_its_own_cases(isolated_state: Path) -> None:
    import os

    env = dict(os.environ)
    demo = run_evalp(["demo", "--world", str(EXAMPLE / "world.yaml")], env, timeout_s=800)
    assert demo.returncode in (0, 1), demo.stderr[-3000:]
    out = demo.stdout
    assert re.search(r"^\s+product\s+sim-tool-user\s+60\.0\b", out, re.M), out[-3000:]
    assert re.search(r"^\s+product\s+sim-no-tools\s+20\.0\b", out, re.M), out[-3000:]
    assert "fixtures     id=fx-" in out and "cases=5 core=2" in out
    assert "sim-tool-user: PASSES" in out
    assert "sim-no-tools: FAILS (core_subset_passes" in out

    report = isolated_state / "reports" / "sweep" / "report.md"
    text = report.read_text(encoding="utf-8")
    for category in ("addition", "multiplication", "reasoning"):
        assert f"| {category} |" in text
    assert not [c for c in LABEL_CATEGORIES if f"| {c} |" in text]
    assert "times-twelve" in text  # the failing case, listed with why it failed

    audit = run_evalp(["--world", str(EXAMPLE / "world.yaml"), "audit", str(report)], env)
    assert audit.returncode == 0, audit.stdout[-2000:] + audit.stderr[-2000:]
    assert "all re-derived exactly" in audit.stdout

    # The example's folder is left as it was committed (state went to EVALP_HOME).
    status = subprocess.run(
        ["git", "status", "--porcelain", "--", str(EXAMPLE)],
        cwd=paths.PROJECT_ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    assert status.stdout == ""
