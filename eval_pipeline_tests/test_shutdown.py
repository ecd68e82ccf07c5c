"""The project's processes exit without Python's shutdown collecting over their imports, and
freeze nothing while they run."""

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
try:
    main()
finally:
    print("frozen while running:", gc.get_freeze_count() > 0)
"""
)
DEFINITIONS = (
    PROBE
    + """
from eval_pipeline.definitions import defs
import polars, duckdb  # what a run's step imports after the definitions
print("frozen while running:", gc.get_freeze_count() > 0)
"""
)


def _output(script: str, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", script, *args], capture_output=True, text=True, timeout=120
    )
    return done.stdout + done.stderr


@pytest.mark.parametrize("args", [["--help"], ["world", "--scale", "99"]], ids=["ok", "error"])
def test_evalp_leaves_its_imports_out_of_the_shutdowns_collections(args: list[str]) -> None:
    """Python's shutdown runs full collections over every object alive; after a command
    that imported Dagster and MLflow that took 1-2 s of CPU at the end of each `evalp`
    call. The heap is frozen by then (an exit by error included), and not before."""
    output = _output(EVALP, *args)
    assert "frozen while running: False" in output, output
    assert "frozen at shutdown: True" in output, output


def test_a_process_that_loads_the_definitions_exits_the_same_way() -> None:
    """Each run's worker and the code servers (the daemon's, the webserver's, a backfill's)
    load the definitions."""
    output = _output(DEFINITIONS)
    assert "frozen while running: False" in output, output
    assert "frozen at shutdown: True" in output, output
