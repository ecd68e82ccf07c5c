"""State on disk that is broken under `evalp`: a warehouse DuckDB cannot open, a read-only
var/, a disk that fills up. Each ends in one line naming the file or folder and what to
do, the right exit code, no traceback, and nothing half-written left visible. (A deleted
MLflow store: eval_pipeline_tests/experiments/test_lost_store.py.)"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import dagster as dg
import duckdb
import pytest

from eval_pipeline import paths
from eval_pipeline.errors import NoSpaceError, StateError
from eval_pipeline.warehouse import connect, write_tables
from eval_pipeline_tests.demo_helpers import ONE_MODEL_SWEEP, small_world_env


def evalp(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "eval_pipeline.cli", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def error_line(completed: subprocess.CompletedProcess[str], code: int, *named: str) -> str:
    """The run's one `error:` line (progress lines may stand beside it on stderr), after
    checking the exit code, that there is no traceback, and that it names `named`."""
    assert completed.returncode == code, (completed.returncode, completed.stderr)
    assert "Traceback" not in completed.stderr, completed.stderr
    errors = [line for line in completed.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1, completed.stderr
    for word in named:
        assert word in errors[0], (word, errors[0])
    return errors[0]


def dagster_runs(home: Path) -> int:
    with dg.DagsterInstance.from_config(str(home / "dagster_home")) as instance:
        return len(instance.get_run_records())


def env_at(home: Path) -> dict[str, str]:
    """The environment that makes `home` the project's state (as conftest's `point_at`)."""
    return {
        **os.environ,
        "EVALP_HOME": str(home),
        "EVALP_WAREHOUSE": str(home / "warehouse.duckdb"),
        "EVALP_FIXTURES_ROOT": str(home / "fixtures"),
        "DAGSTER_HOME": str(home / "dagster_home"),
    }


def truncated_warehouse(path: Path) -> bytes:
    """A real warehouse file cut to a third of its length (a copy interrupted, a disk
    error): DuckDB refuses to open it."""
    with duckdb.connect(str(path)) as conn:
        conn.execute("CREATE TABLE t AS SELECT range AS x FROM range(200000)")
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 3])
    return path.read_bytes()


@pytest.mark.parametrize("damage", ["truncated", "not a database"])
def test_a_warehouse_duckdb_cannot_open_is_named_with_what_to_do(
    isolated_state: Path, damage: str
) -> None:
    warehouse = paths.warehouse_path()
    if damage == "truncated":
        before = truncated_warehouse(warehouse)
    else:
        before = b"not a database, " * 512
        warehouse.write_bytes(before)
    (paths.runs_dir() / "run-left-by-a-killed-demo").mkdir(parents=True)
    completed = evalp(["demo"], dict(os.environ))
    line = error_line(
        completed, 2, str(warehouse), "move it aside or delete it", str(paths.runs_dir())
    )
    assert "not a readable DuckDB database" in line
    assert warehouse.read_bytes() == before  # kept for the user to look at
    assert dagster_runs(isolated_state) == 0  # refused before any run started


def test_connect_names_a_damaged_file(isolated_state: Path) -> None:
    warehouse = isolated_state / "w.duckdb"
    truncated_warehouse(warehouse)
    for read_only in (False, True):
        with pytest.raises(StateError, match="move it aside or delete it"):
            connect(warehouse, read_only=read_only)


@pytest.fixture
def mount_point(tmp_path: Path) -> Iterator[Path]:
    """A folder to mount a small tmpfs on (unmounted after the test); skips where this
    process may not mount."""
    point = tmp_path / "mnt"
    point.mkdir()
    yield point
    subprocess.run(["umount", str(point)], capture_output=True, check=False)


def mount_tmpfs(point: Path, size: str, *options: str) -> None:
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", ",".join([f"size={size}", *options]), "tmpfs", str(point)],
        capture_output=True,
        text=True,
        check=False,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")


def remount(point: Path, *options: str) -> None:
    subprocess.run(["mount", "-o", ",".join(["remount", *options]), str(point)], check=True)


@pytest.mark.parametrize("state", ["a fresh var/", "a var/ a demo used"])
def test_a_read_only_var_is_named_with_what_to_do(mount_point: Path, state: str) -> None:
    """A var/ on a read-only file system (a read-only mount; root ignores file modes, so a
    chmod would not show it here)."""
    mount_tmpfs(mount_point, "8m")
    home = mount_point / "var"
    home.mkdir()
    env = env_at(home)
    if state == "a var/ a demo used":
        prepared = subprocess.run(
            [
                sys.executable,
                "-c",
                "from eval_pipeline import paths; paths.prepared_dagster_home()",
            ],
            env=env,
            check=True,
        )
        assert prepared.returncode == 0
        (home / "demo.lock").write_text("")
    remount(mount_point, "ro")
    completed = evalp(["demo"], env)
    line = error_line(completed, 2, str(home), "Read-only file system", "writable")
    assert "EVALP_HOME" in line


def test_a_failed_commit_raises_its_own_cause_and_leaves_nothing(
    mount_point: Path,
) -> None:
    """The disk fills while DuckDB writes its log at COMMIT: the error names the file and
    the want of space (not "cannot rollback - no transaction is active"), and the schema
    holds none of the tables (the transaction rolled back; what was there stays)."""
    import polars as pl

    mount_tmpfs(mount_point, "3m")
    warehouse = mount_point / "warehouse.duckdb"
    conn = connect(warehouse)
    try:
        write_tables(conn, "world", {"kept": pl.DataFrame({"x": range(10)})})
        # 50k short rows: they fit in DuckDB's memory, and its log of them does not fit
        # on the disk at COMMIT (measured: the failure needs this middle size).
        big = pl.DataFrame({"x": [str(i) * 3 for i in range(50_000)]})
        with pytest.raises(NoSpaceError, match=f"no space left on the disk holding {warehouse}"):
            write_tables(conn, "truth", {"b": big, "c": pl.DataFrame({"y": range(50_000)})})
        tables = conn.execute(
            "SELECT table_schema, table_name FROM information_schema.tables ORDER BY 1, 2"
        ).fetchall()
    finally:
        conn.close()
    assert tables == [("meta", "warehouse_created"), ("world", "kept")]


@pytest.mark.slow  # the main job on the default world until its disk fills: about a minute
def test_a_full_disk_under_the_demo_is_named_and_no_stage_is_half_visible(
    mount_point: Path,
) -> None:
    """The default world's demo on a 20 MB disk: the stage whose write did not fit fails
    naming the disk (exit 1: a failed run), and what Dagster records as materialized is
    what the warehouse holds: the failed stage left no table, the ones before it all."""
    mount_tmpfs(mount_point, "20m")
    home = mount_point / "var"
    home.mkdir()
    env = env_at(home)
    completed = evalp(["demo"], env)
    error_line(completed, 1, "no space left on the disk holding", str(home), "EVALP_HOME")
    with dg.DagsterInstance.from_config(str(home / "dagster_home")) as instance:
        materialized = {
            key.to_user_string()
            for key in instance.get_asset_keys()
            if instance.get_latest_materialization_event(key) is not None
        }
    with duckdb.connect(str(home / "warehouse.duckdb"), read_only=True) as conn:
        schemas = {
            schema
            for (schema,) in conn.execute(
                "SELECT DISTINCT table_schema FROM information_schema.tables"
            ).fetchall()
        }
    assert "fixtures" not in materialized  # the disk filled before the suite was frozen
    assert ("world" in materialized) == ("world" in schemas)
    assert ("answer_key" in materialized) == ("truth" in schemas)


def sweep_run_id(stdout: str) -> str:
    found = re.search(r"sweep run ([0-9a-f]{32}) with", stdout)
    assert found is not None, stdout
    return found.group(1)


def store_has(home: Path, run_id: str, env: dict[str, str]) -> bool:
    """Asked in a new process: this one's MLflow client would still hold a deleted store's
    file open."""
    asked = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from eval_pipeline.tracking.mlflow_store import default_store, has_run, "
            "open_client; print(has_run(open_client(default_store()), sys.argv[1]))",
            run_id,
        ],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return asked.stdout.strip() == "True"


@pytest.mark.slow  # three small-world demos: about 4 minutes on 2 busy cores
def test_a_lost_mlflow_store_or_warehouse_is_rebuilt_not_reported_up_to_date(
    isolated_state: Path,
) -> None:
    """After a demo, var/mlflow/ deleted: the next demo logs the sweep again from the
    warehouse (and prints a run the store holds), instead of "up to date" and a run id that
    leads nowhere. Then the warehouse deleted: the next demo rebuilds it from the world's
    seed and the kept call journals, instead of "up to date" and a missing table."""
    env = small_world_env(isolated_state, ONE_MODEL_SWEEP)
    first = evalp(["demo"], env)
    assert first.returncode == 0, first.stderr
    headline = first.stdout[first.stdout.index("Headline") :].split("\n\n")[0]

    shutil.rmtree(isolated_state / "mlflow")
    second = evalp(["demo"], env)
    assert second.returncode == 0, second.stderr
    skipped = re.search(r"up to date, not run again \(\d+\): (.*?); their latest", second.stdout)
    assert skipped is not None and "main job" in skipped.group(1), second.stdout
    assert "results" not in skipped.group(1)  # the sweep logged again, and its report
    assert store_has(isolated_state, sweep_run_id(second.stdout), env)

    paths.warehouse_path().unlink()
    third = evalp(["demo"], env)
    assert third.returncode == 0, third.stderr
    assert "up to date, not run again" not in third.stdout
    assert third.stdout[third.stdout.index("Headline") :].split("\n\n")[0] == headline
    assert store_has(isolated_state, sweep_run_id(third.stdout), env)
