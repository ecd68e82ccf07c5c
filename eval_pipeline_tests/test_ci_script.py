"""`.ci/run`: what CI runs on a clean clone. Issue 25, finding 10: it ran `./dev test` alone,
which deselects the slow tests, so they (the README's results table, the crash tests, the
Postgres queued runs, the UI) never ran anywhere automatically."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FAKE_DEV = """#!/usr/bin/env bash
# records each call's arguments, one call a line; `test` exits with $FAKE_TEST_RC and
# `lint` with $FAKE_LINT_RC
# one write a line: lint and the tests run at once
echo "$(printf '%q ' "$@")" >> "$(dirname "$0")/calls"
if [ "$1" = test ]; then exit "${FAKE_TEST_RC:-0}"; fi
if [ "$1" = lint ]; then echo "lint says: $FAKE_LINT_RC"; exit "${FAKE_LINT_RC:-0}"; fi
"""


def run_ci(tmp_path: Path, test_rc: int = 0, lint_rc: int = 0) -> tuple[int, list[list[str]], str]:
    """`.ci/run` in a copy of the repo whose `./dev` only records what it is asked (and
    PATH shims for the OS packages it would otherwise install)."""
    repo, shims = tmp_path / "repo", tmp_path / "bin"
    (repo / ".ci").mkdir(parents=True)
    shims.mkdir()
    shutil.copy(ROOT / ".ci" / "run", repo / ".ci" / "run")
    (repo / "dev").write_text(FAKE_DEV)
    (repo / "dev").chmod(0o755)
    for tool in ("pg_ctl", "initdb", "chromium"):
        (shims / tool).write_text("#!/bin/sh\n")
        (shims / tool).chmod(0o755)
    env = {
        **os.environ,
        "PATH": f"{shims}:{os.environ['PATH']}",
        "FAKE_TEST_RC": str(test_rc),
        "FAKE_LINT_RC": str(lint_rc),
    }
    done = subprocess.run(
        ["bash", str(repo / ".ci" / "run")], env=env, capture_output=True, text=True, timeout=60
    )
    calls = [shlex.split(line) for line in (repo / "calls").read_text().splitlines()]
    return done.returncode, calls, done.stdout + done.stderr


def test_ci_runs_every_test_slow_ones_first(tmp_path: Path) -> None:
    rc, calls, _ = run_ci(tmp_path)
    assert rc == 0
    assert calls[0] == ["setup"]  # synced once, before the checks run side by side
    assert sorted(call[0] for call in calls) == ["lint", "mutate", "setup", "test"]
    tests = [call[1:] for call in calls if call[0] == "test"]
    assert len(tests) == 1, calls
    # what that selects, on two files holding slow and fast tests
    files = ["eval_pipeline_tests/world/test_oracle.py", "eval_pipeline_tests/test_ui.py"]
    listed = subprocess.run(
        [str(ROOT / ".venv" / "bin" / "pytest"), "--collect-only", "-q", *tests[0], *files],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
        check=True,
    ).stdout.splitlines()
    ids = [line for line in listed if "::" in line]
    slow = [  # in the order of the files given
        *(f"eval_pipeline_tests/world/test_oracle.py::{ORACLE}[{seed}]" for seed in (2, 3, 4, 5)),
        "eval_pipeline_tests/test_ui.py::test_evalp_ui_serves_dagster_and_mlflow_and_stops_on_sigterm",
    ]
    assert ids[: len(slow)] == slow  # every slow test, and before the rest
    assert f"eval_pipeline_tests/world/test_oracle.py::{ORACLE}[1]" in ids
    assert not any("deselected" in line for line in listed), listed[-1]


ORACLE = "test_oracle_agrees_with_the_suites_of_other_seeds"


@pytest.mark.parametrize("rc", [1, 5])  # 5: pytest collected no tests
def test_a_failing_or_empty_test_run_fails_ci(tmp_path: Path, rc: int) -> None:
    assert run_ci(tmp_path, test_rc=rc)[0] == rc


def test_a_failing_lint_beside_passing_tests_fails_ci_and_shows_its_output(
    tmp_path: Path,
) -> None:
    rc, calls, output = run_ci(tmp_path, lint_rc=3)
    assert rc == 3
    assert ["mutate", "smoke", "--quiet"] not in calls  # the smoke runs after a clean lint
    assert any(call[0] == "test" for call in calls)
    assert "lint says: 3" in output
    assert "ci: lint, types or the mutation smoke failed (exit 3)" in output
