"""The one exception hierarchy of eval_pipeline.

Every error a user can meet derives from :class:`EvalPipelineError` and says what is
wrong and where. Domain packages subclass these in their own modules; nothing catches an
error to turn it into a default value.
"""

from __future__ import annotations


class EvalPipelineError(Exception):
    """Base of every error raised on purpose by eval_pipeline."""


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
