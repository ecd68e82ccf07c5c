"""A quick exit for the project's processes: `evalp` and every Dagster process that loads
the definitions (each run's worker, and the code servers the daemon, the webserver and
`dagster job backfill` start; those three load them through a code server, not
themselves)."""

from __future__ import annotations

import atexit
import gc


def skip_shutdown_collections() -> None:
    """Freeze the heap when the process exits. Exit handlers run last registered first, so
    the freeze runs after those registered later than this call (the libraries a command
    imports afterwards: MLflow's, polars') and before those registered earlier; either
    way every handler runs, only the shutdown's collections skip what is frozen.

    Python's shutdown runs full collections over every object alive, and after imports of
    Dagster, MLflow, polars and pandas that took 1-2 s of CPU per process here, spent on
    objects that die with the process anyway. Frozen objects are skipped by collections.
    Only at exit: in a live process, Python 3.11 schedules a full collection once the old
    generation has grown by a quarter of its unfrozen size, which a freeze sets to
    nothing, so full collections would come far more often (tried on the demo: no time
    saved that its noise could show). One registration however often it is called (the
    last call's place in the order)."""
    atexit.unregister(gc.freeze)
    atexit.register(gc.freeze)
