"""Crash test: `evalp fixtures freeze` and `evalp demo` killed (SIGKILL) at ten points each.

Each kill is real: the command runs as its own process and is killed either at a named
point (`EVALP_CRASH_AT`, where the process SIGKILLs itself: the moments milliseconds wide
that a delay would rarely hit) or after a delay. After the kills, one restart, then:
every fixture set verifies and no staging folder is left; no Dagster run is left in
progress; every journal is in the warehouse; every call the simulated provider billed is
in the warehouse; no simulated provider is left serving.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from pathlib import Path

import dagster as dg
import pytest

from eval_pipeline import paths
from eval_pipeline.cases.frozen import STAGING_PREFIX, fixture_set_dirs
from eval_pipeline_tests.demo_helpers import (
    ONE_MODEL_SWEEP,
    billed_calls_missing_from_warehouse,
    fixture_problems,
    in_progress_runs,
    journals_not_in_warehouse,
    run_evalp,
    run_statuses,
    small_world_env,
    wait_for_no_sim,
)

FREEZE_POINTS: list[tuple[str | None, float | None]] = [
    ("freeze.staging_created", None),
    ("freeze.file_written@1", None),  # cases written, manifest not yet
    ("freeze.file_written@2", None),  # both written, not renamed
    ("freeze.renamed", None),
    (None, 0.4),  # start-up
    (None, 0.7),
    (None, 0.9),  # world generation
    (None, 1.1),
    (None, 1.3),  # answer key, suite
    (None, 1.5),
]
DEMO_POINTS: list[tuple[str | None, float | None]] = [
    ("demo.locked", None),  # before the start-up recovery
    ("demo.recovered", None),  # after it, before the run
    ("freeze.staging_created", None),  # inside the fixtures step
    ("freeze.renamed", None),
    ("harness.sending@5", None),  # calls in flight, journaled as such
    ("harness.sending@30", None),
    ("harness.landed@20", None),
    ("harness.before_load", None),  # every call landed, journal not loaded
    (None, 5.0),  # somewhere in the run: which step depends on the machine's load
    (None, 8.0),
]


def _freeze(env: dict[str, str], root: Path, seed: int, **kill: object) -> int:
    done = run_evalp(
        ["fixtures", "freeze", "--seed", str(seed), "--out", str(root)],
        env,
        **kill,  # type: ignore[arg-type]
    )
    assert done.returncode in (0, -9), done.stderr
    return done.returncode


def _check_fixtures(env: dict[str, str], root: Path) -> None:
    assert fixture_problems(root) == []
    verified = run_evalp(["fixtures", "verify"], {**env, "EVALP_FIXTURES_ROOT": str(root)})
    assert verified.returncode == 0, verified.stderr
    assert len(verified.stdout.splitlines()) == len(fixture_set_dirs(root))


def test_a_killed_freeze_leaves_nothing_after_one_restart(isolated_state: Path) -> None:
    """The fast representative: killed between writing and renaming, then restarted."""
    env = small_world_env(isolated_state)
    root = isolated_state / "frozen"
    assert _freeze(env, root, 12, crash_at="freeze.file_written@2") == -9
    assert [p for p in root.iterdir() if p.name.startswith(STAGING_PREFIX)], "a leftover"
    assert fixture_set_dirs(root) == []
    assert _freeze(env, root, 12) == 0
    assert len(fixture_set_dirs(root)) == 1
    _check_fixtures(env, root)


@pytest.mark.slow
def test_fixtures_freeze_killed_at_ten_points(isolated_state: Path) -> None:
    env = small_world_env(isolated_state)
    root = isolated_state / "frozen"
    codes = []
    for seed, (point, delay) in enumerate(FREEZE_POINTS, start=1):
        # A seed per kill: a new fixture id each time, so each kill meets a fresh freeze.
        codes.append(_freeze(env, root, seed, crash_at=point, kill_after_s=delay))
    assert codes[:4] == [-9] * 4, codes
    assert codes.count(-9) >= 7, f"most kills must land before the freeze ends: {codes}"
    assert _freeze(env, root, len(FREEZE_POINTS)) == 0  # one restart
    _check_fixtures(env, root)


def _statuses_of_runs_created_after(moment: float) -> Counter[str]:
    """The statuses of the Dagster runs created after `moment` (a Unix time)."""
    with dg.DagsterInstance.get() as instance:
        return Counter(
            record.dagster_run.status.value
            for record in instance.get_run_records()
            if record.create_timestamp.timestamp() >= moment
        )


def _unused_config_with_a_typo(home: Path) -> Path:
    models = home / "models"
    models.mkdir()
    for source in (paths.CONFIGS_DIR / "models").glob("*.yaml"):
        text = source.read_text()
        if source.name == "claude-sonnet-4-5.yaml":
            text = text.replace("timeout_s:", "timout_s:", 1)
        (models / source.name).write_text(text)
    return models


@pytest.mark.slow
@pytest.mark.timeout(900)  # eleven small-world demos: 150 s alone, 300 s beside two CI workers
def test_evalp_demo_killed_at_ten_points(isolated_state: Path) -> None:
    env = {
        **small_world_env(isolated_state, ONE_MODEL_SWEEP),
        "EVALP_MODELS_DIR": str(_unused_config_with_a_typo(isolated_state)),
    }
    codes = []
    for point, delay in DEMO_POINTS:
        done = run_evalp(["demo"], env, crash_at=point, kill_after_s=delay)
        # -9: the demo's own process was killed (its main job runs in it); 1: the point was
        # reached first in a lane run's worker process, which was killed, and the demo
        # named the run that failed.
        assert done.returncode in (0, 1, -9), done.stderr
        if done.returncode == 1:
            assert "its worker process ended before the run did" in done.stderr, done.stderr
        codes.append(done.returncode)
    assert set(codes[:8]) <= {-9, 1} and codes[:4] == [-9] * 4, codes

    restart_began = time.time()
    restarted = run_evalp(["demo"], env)  # one restart
    assert restarted.returncode == 0, restarted.stderr
    assert "skipped invalid model config" in restarted.stderr
    assert "claude-sonnet-4-5.yaml" in restarted.stderr

    assert wait_for_no_sim(str(isolated_state)) == [], "no simulated provider left serving"
    assert in_progress_runs() == []
    statuses = run_statuses()
    assert set(statuses) <= {"SUCCESS", "FAILURE"}, statuses
    # A demo is several Dagster runs (the main job, the lane partitions, the results): a
    # kill in a later one leaves the earlier ones successful, so count the restart's own.
    after = _statuses_of_runs_created_after(restart_began)
    assert set(after) == {"SUCCESS"} and after["SUCCESS"] >= 1, (after, statuses)
    assert statuses["FAILURE"] >= 6, "the six named kills inside a run left a failed run"
    assert journals_not_in_warehouse() == []
    assert billed_calls_missing_from_warehouse() == {}
    logs = sorted(paths.runs_dir().glob("*/sim-requests.jsonl"))
    billed = sum(
        1 for log in logs for line in log.read_text().splitlines() if json.loads(line)["bill"]
    )
    assert billed > 0, "the kills after sending left billed calls to account for"
    _check_fixtures(env, paths.fixtures_root())
