"""Errors of the simulated provider."""

from __future__ import annotations

from eval_pipeline.errors import EvalPipelineError


class SimError(EvalPipelineError):
    """Base of every error raised on purpose by the simulated provider."""


class ProfileError(SimError):
    """A behaviour profile is registered twice, unknown, or given invalid options."""


class SimStartupError(SimError):
    """The simulated provider's server process did not start; the message holds its stderr."""


class SimAdminError(SimError):
    """An admin call to a running simulated provider failed (e.g. the bill could not be priced)."""


class SimRequestError(SimError):
    """A model request is malformed; the server answers it with a provider-shaped 400."""


class AgentAbstainError(SimError):
    """A simulated agent cannot answer from what the conversation holds (a tool error, a
    record that is not there, a question it does not recognise): it answers ``ABSTAIN:``
    with this reason instead of guessing. Raised and caught inside the agent profiles."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = " ".join(reason.split())
