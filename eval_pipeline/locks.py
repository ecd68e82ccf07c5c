"""Advisory locks between processes of this project (`flock`: released when the holder
dies, even by SIGKILL, so a crash never leaves a lock behind)."""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from eval_pipeline.errors import LockedError


@contextmanager
def flocked(path: Path, operation: int) -> Iterator[int]:
    """`path` (a file or a folder) opened read-only and flock-ed with `operation` for the
    block; yields the descriptor. The lock ends when the block does."""
    fd = os.open(path, os.O_RDONLY)
    try:
        fcntl.flock(fd, operation)
        yield fd
    finally:
        os.close(fd)


@contextmanager
def held_exclusively(path: Path, what: str) -> Iterator[None]:
    """Hold the lock file `path` (created if missing) for the block, or raise LockedError
    naming `what` and the process holding it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip() or "unknown"
            raise LockedError(
                f"{what} is already running (process {holder}, lock {path}); wait for it to finish"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield
    finally:
        os.close(fd)
