"""A quick exit for the project's processes: `evalp` and every Dagster process that loads
the definitions (the daemon, `dagster job backfill`, each run's worker, the webserver)."""

from __future__ import annotations

import atexit
import gc


def skip_shutdown_collections() -> None:
    """Freeze the heap when the process exits, after the exit handlers registered before
    this call (the libraries imported later register theirs later, so those run first).

    Python's shutdown runs full collections over every object alive, and after imports of
    Dagster, MLflow, polars and pandas that took 1-2 s of CPU per process here, spent on
    objects that die with the process anyway. Frozen objects are skipped by collections.
    Only at exit: in a live process, Python 3.11 schedules a full collection once the old
    generation has grown by a quarter of its unfrozen size, which a freeze sets to
    nothing, so full collections would come far more often (tried on the demo: no time
    saved that its noise could show). Idempotent: one registration however often it is
    called."""
    atexit.unregister(gc.freeze)
    atexit.register(gc.freeze)
