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
    Only at exit: freezing a live process would make its later full collections run far
    more often (Python 3.11 schedules them by the size of the unfrozen old generation).
    Idempotent: one registration however often it is called."""
    atexit.unregister(gc.freeze)
    atexit.register(gc.freeze)
