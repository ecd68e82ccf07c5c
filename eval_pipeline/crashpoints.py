"""Named points where a crash test can kill the process for real (SIGKILL, no cleanup).

Crash safety is claimed for moments that are milliseconds wide (a staging folder written
but not yet renamed, an attempt sent but its reply not yet journaled); killing a process
after a delay rarely lands there. So the code marks those moments with
``crash_point("name")``, and a test starts the real command with
``EVALP_CRASH_AT=name`` (or ``name@N`` for the N-th time the point is reached in the
process): the process then SIGKILLs itself at that point. Unset, a point costs one
environment lookup.
"""

from __future__ import annotations

import os
import signal
from collections import Counter

CRASH_ENV = "EVALP_CRASH_AT"
_hits: Counter[str] = Counter()


def crash_point(name: str) -> None:
    """SIGKILL this process here if `EVALP_CRASH_AT` names this point (and hit count)."""
    spec = os.environ.get(CRASH_ENV)
    if not spec:
        return
    wanted, _, nth = spec.partition("@")
    if wanted != name:
        return
    _hits[name] += 1
    if _hits[name] == (int(nth) if nth else 1):
        os.kill(os.getpid(), signal.SIGKILL)
