"""Errors of the lanes; all derive from :class:`EvalPipelineError`.

The `run_sql` errors carry a `reason` written for the agent that sent the query: the lane
turns each into a tool error result the model can read and act on, so a reason names what
was wrong with the query and what is allowed, and never echoes data from outside `world`.
"""

from __future__ import annotations

from eval_pipeline.errors import EvalPipelineError


class LaneError(EvalPipelineError):
    """Base of every error raised by eval_pipeline.lanes."""


class AgentWorldDbError(LaneError):
    """The agent's world-only database could not be built or opened as expected."""


class SqlToolError(LaneError):
    """A `run_sql` call failed; `reason` is the text to hand back to the agent."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(reason)


class SqlRefusedError(SqlToolError):
    """The guard refused the query before anything ran."""


class SqlExecutionError(SqlToolError):
    """The query passed the guard but DuckDB rejected it or failed while running it."""


class SqlTimeoutError(SqlToolError):
    """The query ran past its time limit and was interrupted."""


class SqlLimitError(SqlToolError):
    """The query needed more than the tool allows of something other than time: memory
    (the worker's hard cap) or the size of its result."""
