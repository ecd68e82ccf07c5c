"""Errors of the model-call layer; all derive from :class:`EvalPipelineError`.

Each says what failed and with which model, day, key or file, so a user can act on it
without reading the code. None of them is caught to produce a default (a price is never a
silent zero, a replay miss is never a silent network call).
"""

from __future__ import annotations

from datetime import date

from eval_pipeline.errors import EvalPipelineError


class ProviderError(EvalPipelineError):
    """Base of every error raised by eval_pipeline.providers."""


class PriceError(ProviderError):
    """A cost could not be metered: no price is ever guessed or taken as zero."""


class UnknownModelPriceError(PriceError):
    """The price book has no entry for the model."""

    def __init__(self, model: str, known: list[str], source: str) -> None:
        self.model = model
        super().__init__(
            f"no prices for model {model!r} in {source}; known models: {', '.join(known)}"
        )


class UncoveredDatePriceError(PriceError):
    """The model is priced, but no tier covers the call's date."""

    def __init__(self, model: str, day: date, tiers: list[str], source: str) -> None:
        self.model = model
        self.day = day
        super().__init__(
            f"no price tier of model {model!r} covers {day.isoformat()} in {source}; "
            f"tiers: {'; '.join(tiers)}"
        )


class MissingApiKeyError(ProviderError):
    """The environment variable a model config names for its key is not set."""


class BudgetError(ProviderError):
    """A call's worst case cannot be bounded, so it cannot be reserved."""


class BudgetStoppedError(ProviderError):
    """A call was refused because its worst-case cost would cross the budget cap."""


class TruncatedReplyError(ProviderError):
    """Something tried to act on a reply whose stop reason says it was cut off."""


class ReplayMissError(ProviderError):
    """Replay mode met a request that is not in the response cache (no network is used)."""

    def __init__(self, key: str, explanation: str) -> None:
        self.key = key
        self.explanation = explanation
        super().__init__(f"replay miss for cache key {key}: {explanation}")


class CacheIntegrityError(ProviderError):
    """A cache entry does not match the key it is stored under."""


class JournalError(ProviderError):
    """An envelope journal could not be read or loaded into the warehouse."""
