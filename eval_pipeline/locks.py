"""Advisory locks between processes of this project (`flock`: released when the holder
dies, even by SIGKILL, so a crash never leaves a lock behind)."""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

from eval_pipeline.errors import LockedError, state_os_error
from eval_pipeline.paths import var_dir


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
    naming what holds it (its `what`, recorded in the file) and its process."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as error:  # a read-only var/: said here, before anything else is tried
        raise state_os_error(error, path.parent) from error
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            recorded = os.pread(fd, 200, 0).decode("utf-8", "replace").strip().split(" ", 1)
            holder = recorded[0] or "unknown"
            holding = recorded[1] if len(recorded) > 1 else what
            wait = "" if holding == what else f" before {what}"
            raise LockedError(
                f"{holding} is already running (process {holder}, lock {path}); wait for it "
                f"to finish{wait}"
            ) from None
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()} {what}\n".encode(), 0)
        except OSError as error:  # a full disk
            raise state_os_error(error, path) from error
        yield
    finally:
        os.close(fd)


PROJECT_LOCK = "demo.lock"
"""Held by every command that writes the project's state under var/ (the warehouse, the
Dagster instance): `evalp demo`, `evalp regrade`."""


def project_lock(what: str) -> AbstractContextManager[None]:
    return held_exclusively(var_dir() / PROJECT_LOCK, what)
