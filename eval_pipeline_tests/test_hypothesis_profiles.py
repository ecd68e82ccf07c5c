"""The property tests' randomness: fixed in CI, exploring (with a replay database) locally."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from eval_pipeline_tests.conftest import hypothesis_profile

ROOT = Path(__file__).resolve().parents[1]

# Draws as a property test of the suite makes them: the shared conftest loaded first, then a
# test module with its own @settings (which inherit the profile's other settings).
DRAWS = """
import json, sys
import eval_pipeline_tests.conftest
from hypothesis import given, settings, strategies as st
from hypothesis.database import DirectoryBasedExampleDatabase
from eval_pipeline_tests.scoring import test_aggregate

seen = []

@settings(max_examples=40)
@given(st.integers())
def draws(n):
    seen.append(n)

draws()
inner = test_aggregate.test_a_summary_does_not_depend_on_the_order_rows_are_read_in
used = inner._hypothesis_internal_use_settings
database = settings.default.database
print(json.dumps({"draws": seen, "derandomize": used.derandomize,
                  "database": str(database.path)
                  if isinstance(database, DirectoryBasedExampleDatabase) else repr(database)}))
"""


@pytest.mark.parametrize(
    ("value", "profile"),
    [(None, "dev"), ("", "dev"), ("false", "dev"), ("0", "dev"), ("true", "ci"), ("1", "ci")],
)
def test_the_ci_profile_is_chosen_by_the_ci_variable(value: str | None, profile: str) -> None:
    assert hypothesis_profile({} if value is None else {"CI": value}) == profile


def _draws(tmp_path: Path, ci: bool) -> dict[str, object]:
    env = {key: value for key, value in os.environ.items() if key != "CI"}
    env["PYTHONPATH"] = str(ROOT)
    if ci:
        env["CI"] = "true"
    done = subprocess.run(
        [sys.executable, "-c", DRAWS],
        cwd=tmp_path,  # the dev profile's database (.hypothesis/) lands here
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    result: dict[str, object] = json.loads(done.stdout.splitlines()[-1])
    return result


def test_ci_draws_the_same_examples_every_run_and_a_local_run_explores(tmp_path: Path) -> None:
    first, second = _draws(tmp_path, ci=True), _draws(tmp_path, ci=True)
    assert first["draws"] == second["draws"]
    assert first["derandomize"] is True  # a test's own @settings keeps the profile's
    assert first["database"] == "None"  # nothing replayed that a clean clone lacks
    local = _draws(tmp_path, ci=False)
    assert local["derandomize"] is False
    assert local["database"] == str(tmp_path / ".hypothesis" / "examples")
    assert local["draws"] != first["draws"]  # 40 integers drawn alike by chance: never
