"""The one exception hierarchy of eval_pipeline.

Every error a user can meet derives from :class:`EvalPipelineError` and says what is
wrong and where. Domain packages subclass these in their own modules; nothing catches an
error to turn it into a default value.
"""

from __future__ import annotations


class EvalPipelineError(Exception):
    """Base of every error raised on purpose by eval_pipeline."""

    exit_code = 2
    """What `evalp` exits with when this error ends a command: 2, something to fix before
    running again (an input, a config, the state on disk)."""


class ConfigError(EvalPipelineError):
    """A configuration file or value is invalid; the message names the file and field."""


class WorldError(EvalPipelineError):
    """A world could not be generated or does not hold what was asked of it."""


class FixtureError(EvalPipelineError):
    """A fixture set cannot be frozen or read where it was asked for."""


class FixtureIntegrityError(FixtureError):
    """A frozen fixture set is tampered, incomplete or does not match its world."""


class WarehouseError(EvalPipelineError):
    """The DuckDB warehouse is missing something a stage needs."""


class LockedError(EvalPipelineError):
    """Another process of this project holds what this command needs (a lock)."""


class StateError(EvalPipelineError):
    """The project's working state on disk (var/: the warehouse, the Dagster instance,
    the MLflow store, the run journals) cannot be opened, read or written: the message
    names the file or folder and what to do about it."""


class NoSpaceError(StateError):
    """The disk holding the project's state filled up while writing it."""

    exit_code = 1
    """A run that failed (the disk filled under it), not a mistake in what was asked."""


def state_os_error(error: OSError, path: object, doing: str = "write") -> StateError:
    """An OSError met on the project's state as a StateError naming `path` and the remedy
    for its cause (no space, no permission, a read-only file system), so a full disk or a
    read-only var/ reads as one line instead of a traceback."""
    import errno

    reason = error.strerror or str(error)
    if error.errno in (errno.ENOSPC, errno.EDQUOT):
        return NoSpaceError(
            f"no space left on the disk holding {path} (cannot {doing} it): free space there, "
            "or point EVALP_HOME at a folder on a larger disk, then run again"
        )
    if error.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return StateError(
            f"cannot {doing} {path}: {reason}; make it writable (or point EVALP_HOME at a "
            "writable folder), then run again"
        )
    return StateError(f"cannot {doing} {path}: {reason}")
