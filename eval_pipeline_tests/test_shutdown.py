"""The project's processes exit without Python's shutdown collecting over their imports."""

from __future__ import annotations

import subprocess
import sys

import pytest

PROBE = """
import atexit, gc, sys
# Registered before the code under test, so it runs after that code's exit handlers, as the
# interpreter's shutdown does: what it finds is what the shutdown's collections find.
atexit.register(lambda: print("frozen at shutdown:", gc.get_freeze_count() > 0))
"""
EVALP = (
    PROBE
    + """
from eval_pipeline.cli import main
sys.argv = ["evalp", *sys.argv[1:]]
main()
"""
)
DAGSTER_PROCESS = (
    PROBE
    + """
from eval_pipeline.definitions import defs
"""
)


def _shutdown_output(script: str, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", script, *args], capture_output=True, text=True, timeout=120
    )
    return done.stdout + done.stderr


@pytest.mark.parametrize("args", [["--help"], ["world", "--scale", "99"]], ids=["ok", "error"])
def test_evalp_leaves_its_imports_out_of_the_shutdowns_collections(args: list[str]) -> None:
    """Python's shutdown runs full collections over every object alive; after a command
    that imported Dagster and MLflow that took 1-2 s of CPU at the end of each `evalp`
    call. The heap is frozen by then (an exit by error included), so they skip it."""
    assert "frozen at shutdown: True" in _shutdown_output(EVALP, *args)


def test_a_process_that_loads_the_definitions_exits_the_same_way() -> None:
    """The daemon, `dagster job backfill` and every run's worker load the definitions."""
    assert "frozen at shutdown: True" in _shutdown_output(DAGSTER_PROCESS)
