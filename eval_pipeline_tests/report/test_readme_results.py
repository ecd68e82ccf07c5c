"""The quickstart's main job on a fresh checkout leaves `git status` clean, and the
README's results table is pinned through `evalp audit`, not by a copy of its numbers:
`evalp publish --readme` writes the table of that demo's report into a copy of the README,
and both that copy and the committed README re-derive exactly from its runs."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from eval_pipeline.paths import PROJECT_ROOT
from eval_pipeline.report.readme import END, START
from eval_pipeline_tests.demo_helpers import run_evalp

STATE_VARIABLES = ("EVALP_HOME", "EVALP_WAREHOUSE", "EVALP_FIXTURES_ROOT", "DAGSTER_HOME")
"""What points the project's state elsewhere: unset, the demo keeps it in the checkout's
ignored var/, as on a user's first run."""


def git(*args: str, cwd: Path) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True)
    return done.stdout


def fresh_checkout(into: Path) -> Path:
    """The working tree as a new repository of one commit: what a fresh clone of it holds
    (tracked and new files, nothing ignored), uncommitted edits included."""
    files = git("ls-files", "-z", "--cached", "--others", "--exclude-standard", cwd=PROJECT_ROOT)
    for name in filter(None, files.split("\0")):
        source = PROJECT_ROOT / name
        if source.is_file():
            (into / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, into / name)
    git("init", "-q", cwd=into)
    git("add", "-A", cwd=into)
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "fresh", cwd=into)
    return into


@pytest.mark.slow
@pytest.mark.timeout(1200)  # a default-world demo: 297 s in one CI run, past the 300 s default
def test_the_main_job_leaves_the_checkout_clean_and_the_published_table_audits(
    tmp_path: Path,
) -> None:
    checkout = fresh_checkout(tmp_path / "checkout")
    env = {k: v for k, v in os.environ.items() if k not in STATE_VARIABLES}
    env["PYTHONPATH"] = str(checkout)  # the checkout's own package, not the installed one
    demo = run_evalp(["demo"], env, timeout_s=900, cwd=checkout)
    assert demo.returncode == 0, demo.stderr[-3000:]
    assert "evalp publish --readme" in demo.stdout
    assert git("status", "--porcelain", "--ignored=no", cwd=checkout) == ""

    readme = tmp_path / "README.md"
    text = (PROJECT_ROOT / "README.md").read_text()
    start, end = text.index(START) + len(START), text.index(END)
    readme.write_text(text[:start] + "\n" + text[end:])  # the copy starts with no table
    published = run_evalp(["publish", "--readme", str(readme)], env, cwd=checkout)
    assert published.returncode == 0, published.stdout + published.stderr[-2000:]
    assert "results table updated" in published.stdout
    written = run_evalp(["audit", str(readme)], env, cwd=checkout)
    assert written.returncode == 0, written.stdout[-2000:] + written.stderr[-2000:]
    assert "36 referenced numbers, all re-derived exactly" in written.stdout
    committed = run_evalp(["audit", str(PROJECT_ROOT / "README.md")], env, cwd=checkout)
    assert committed.returncode == 0, committed.stdout[-2000:] + committed.stderr[-2000:]
    assert git("status", "--porcelain", cwd=checkout) == ""

    # A config the report depends on changed: its numbers are stale, and are not published.
    gate = checkout / "configs" / "gate.yaml"
    gate.write_text(gate.read_text().replace("core_required: 12", "core_required: 13"))
    stale = run_evalp(["publish", "--readme", str(readme)], env, cwd=checkout)
    assert stale.returncode == 2, stale.stdout + stale.stderr
    assert "is stale" in stale.stderr and "run `evalp demo`" in stale.stderr, stale.stderr
