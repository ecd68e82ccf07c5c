"""The garbage collector's young-generation threshold while model calls are in flight.

Each call allocates a few hundred container objects (records, tasks, aiohttp's request and
response); at CPython's default threshold (700 allocations) a run of 2,560 calls at 256 in
flight spends about a tenth of the client's CPU in young collections, which stall every
call in flight. While any call session is open the threshold is raised (the older
generations' thresholds are kept), and restored when the last one closes. Cyclic garbage
is still collected, a few thousand allocations later.
"""

from __future__ import annotations

import gc
import threading

CALLS_YOUNG_THRESHOLD = 20_000
"""Allocations between young collections while calls are in flight (CPython's default: 700).
Measured at 256 in flight against the simulated provider: 0.65-0.69 -> 0.70-0.74 of the
ideal rate, 0.85-0.97 -> 0.82-0.85 ms of client CPU a call (`bench/harness_throughput.py`)."""


class YoungCollections:
    """Counts the open sessions; the first raises the threshold, the last restores it."""

    def __init__(self, threshold: int = CALLS_YOUNG_THRESHOLD) -> None:
        self.threshold = threshold
        self._lock = threading.Lock()
        self._open = 0
        self._saved: tuple[int, int, int] | None = None

    def enter(self) -> None:
        with self._lock:
            if self._open == 0:
                saved = gc.get_threshold()
                self._saved = saved
                # 0 means automatic collection is off: leave a caller's choice alone.
                if 0 < saved[0] < self.threshold:
                    gc.set_threshold(self.threshold, saved[1], saved[2])
            self._open += 1

    def exit(self) -> None:
        with self._lock:
            if self._open == 0:
                raise RuntimeError("young-collection threshold restored more often than raised")
            self._open -= 1
            if self._open == 0 and self._saved is not None:
                gc.set_threshold(*self._saved)
                self._saved = None


calls_in_flight = YoungCollections()
"""The process's one counter (the collector's thresholds are process-wide)."""
