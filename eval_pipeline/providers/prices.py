"""Dated prices: which tier was in force on a call's day, and what the call cost.

Prices change on scheduled dates (an intro tier at 2/3 of sticker until a day, then the
sticker price); a table of undated sticker prices meters every call wrongly and silently.
So each model has tiers with a start day (inclusive) and an end day (exclusive, or open),
the meter picks the tier by the call's day and records the tier's id, and an unknown
model or a day that no tier covers raises — a cost is never a silent zero.

Money is :class:`~decimal.Decimal`, exact: cost = tokens x USD-per-million / 10**6 with no
rounding, so sums over a run equal the provider's bill to the last digit.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Mapping
from datetime import date
from decimal import Decimal
from pathlib import Path
from typing import Annotated, Literal, NamedTuple

from pydantic import BeforeValidator, Field, model_validator

from eval_pipeline.config import load_yaml_config
from eval_pipeline.errors import ConfigError
from eval_pipeline.providers.errors import (
    PriceError,
    UncoveredDatePriceError,
    UnknownModelPriceError,
)
from eval_pipeline.records import FrozenRecord

TOKENS_PER_PRICE_UNIT = 1_000_000
MAX_PRICE_DECIMALS = 6
VARIANT_SEPARATOR = ":"


def _price_from_text(value: object) -> object:
    """Prices are written as quoted decimals or integers; a YAML float is refused."""
    if isinstance(value, float):
        raise ValueError("write prices as quoted decimal strings (e.g. '3.00'), not floats")
    return value


def _price_has_few_decimals(value: Decimal) -> Decimal:
    exponent = value.as_tuple().exponent
    if not isinstance(exponent, int) or -exponent > MAX_PRICE_DECIMALS:
        raise ValueError(f"at most {MAX_PRICE_DECIMALS} decimal places in a price")
    if value < 0:
        raise ValueError("a price cannot be negative")
    return value


Price = Annotated[
    Decimal,
    BeforeValidator(_price_from_text),
    Field(description="USD per million tokens"),
]


class TokenPrices(FrozenRecord):
    """USD per million tokens, per token kind. Cache kinds are optional."""

    input: Price
    output: Price
    cache_read: Price | None = None
    cache_write: Price | None = None

    @property
    def highest_input_rate(self) -> Decimal:
        """The dearest price any input token can carry in this tier: an input token may be
        billed as a cache write (priced above plain input by Anthropic) or a cache read."""
        rates = [self.input, self.cache_read, self.cache_write]
        return max(rate for rate in rates if rate is not None)

    @model_validator(mode="after")
    def _check_decimals(self) -> TokenPrices:
        for value in (self.input, self.output, self.cache_read, self.cache_write):
            if value is not None:
                _price_has_few_decimals(value)
        return self


class PriceTier(FrozenRecord):
    """Prices in force from `start` (inclusive) until `end` (exclusive; None = open)."""

    id: str = Field(min_length=1)
    start: date
    end: date | None = None
    usd_per_mtok: TokenPrices
    note: str | None = None

    def covers(self, day: date) -> bool:
        return self.start <= day and (self.end is None or day < self.end)

    def describe(self) -> str:
        end = self.end.isoformat() if self.end else "open"
        return f"{self.id} [{self.start.isoformat()}, {end})"


class ModelPrices(FrozenRecord):
    """A model's tiers. `variants` lets `name:variant` model names share these prices."""

    kind: Literal["simulated", "real", "local"]
    note: str | None = None
    variants: bool = False
    tiers: tuple[PriceTier, ...] = Field(min_length=1)

    @model_validator(mode="after")
    def _tiers_are_ordered_and_disjoint(self) -> ModelPrices:
        ordered = sorted(self.tiers, key=lambda tier: tier.start)
        for tier in ordered:
            if tier.end is not None and tier.end <= tier.start:
                raise ValueError(f"tier {tier.id}: end must be after start")
        for earlier, later in itertools.pairwise(ordered):
            if earlier.end is None or earlier.end > later.start:
                raise ValueError(f"tiers {earlier.id} and {later.id} overlap")
        return self


class PriceQuote(FrozenRecord):
    """The cost of one call and the tier that priced it."""

    model: str
    day: date
    tier_id: str
    input_tokens: int
    output_tokens: int
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    input_usd_per_mtok: Decimal
    output_usd_per_mtok: Decimal
    cost_usd: Decimal


class TierCost(NamedTuple):
    """What a call costs (exact USD) and the id of the tier that priced it."""

    tier_id: str
    cost_usd: Decimal


class PriceBook(FrozenRecord):
    """Every priced model. Built from `configs/prices.yaml` by :func:`load_price_book`.

    `cost` and `worst_case_cost` give a call's amount and tier as a :class:`TierCost`
    (what the harness needs twice per call); `quote` and `worst_case` give the same as a
    :class:`PriceQuote` record, with the counts and rates.
    """

    currency: Literal["USD"] = "USD"
    models: Mapping[str, ModelPrices]
    source: str = "<memory>"

    def model_prices(self, model: str) -> ModelPrices:
        """The entry pricing `model` (exact name, or `base:variant` when base allows variants)."""
        prices = self.models.get(model)
        if prices is not None:
            return prices
        base, separator, _variant = model.partition(VARIANT_SEPARATOR)
        if separator:
            base_prices = self.models.get(base)
            if base_prices is not None and base_prices.variants:
                return base_prices
        raise UnknownModelPriceError(model, sorted(self.models), self.source)

    def tier(self, model: str, day: date) -> PriceTier:
        """The tier in force for `model` on `day`; raises when none covers it."""
        prices = self.model_prices(model)
        for tier in prices.tiers:
            if tier.covers(day):
                return tier
        raise UncoveredDatePriceError(
            model, day, [tier.describe() for tier in prices.tiers], self.source
        )

    def cost(
        self,
        model: str,
        day: date,
        input_tokens: int,
        output_tokens: int,
        *,
        cache_read_tokens: int = 0,
        cache_write_tokens: int = 0,
    ) -> TierCost:
        """Exact cost of the tokens of `model` on `day`, with the id of the tier that priced
        them (what `quote` records, without building the record).

        `input_tokens` are plain (uncached) input tokens; cache reads and writes are
        counted apart (Anthropic's usage convention; OpenAI's `prompt_tokens` include the
        cached ones, which the wire reader subtracts). Cache tokens are optional kinds:
        pricing any of them under a tier that has no price for that kind raises, like any
        other missing price.
        """
        counts = (input_tokens, output_tokens, cache_read_tokens, cache_write_tokens)
        if min(counts) < 0:
            raise ValueError("token counts cannot be negative")
        tier = self.tier(model, day)
        rates = tier.usd_per_mtok
        total = input_tokens * rates.input + output_tokens * rates.output
        for kind, tokens, rate in (
            ("cache_read", cache_read_tokens, rates.cache_read),
            ("cache_write", cache_write_tokens, rates.cache_write),
        ):
            if tokens:
                if rate is None:
                    raise PriceError(
                        f"tier {tier.id} of model {model!r} has no {kind} price "
                        f"({tokens} {kind} tokens on {day.isoformat()}) in {self.source}"
                    )
                total += tokens * rate
        return TierCost(tier.id, total / TOKENS_PER_PRICE_UNIT)

    def quote(
        self,
        model: str,
        day: date,
        input_tokens: int,
        output_tokens: int,
        *,
        cache_read_tokens: int = 0,
        cache_write_tokens: int = 0,
    ) -> PriceQuote:
        """`cost` as a record: the counts, the tier's rates and the exact cost."""
        priced = self.cost(
            model,
            day,
            input_tokens,
            output_tokens,
            cache_read_tokens=cache_read_tokens,
            cache_write_tokens=cache_write_tokens,
        )
        rates = self.tier(model, day).usd_per_mtok
        return PriceQuote(
            model=model,
            day=day,
            tier_id=priced.tier_id,
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            cache_read_tokens=cache_read_tokens,
            cache_write_tokens=cache_write_tokens,
            input_usd_per_mtok=rates.input,
            output_usd_per_mtok=rates.output,
            cost_usd=priced.cost_usd,
        )

    def worst_case_cost(
        self, model: str, day: date, input_tokens: int, output_tokens: int
    ) -> TierCost:
        """An upper bound on a call's cost: every input token at the tier's dearest input
        kind (cache write, cache read or plain input), every output token at its price.

        Whatever the split of input tokens between plain, cache-read and cache-write that
        the provider reports, the actual cost cannot exceed this.
        """
        if min(input_tokens, output_tokens) < 0:
            raise ValueError("token counts cannot be negative")
        tier = self.tier(model, day)
        rates = tier.usd_per_mtok
        total = input_tokens * rates.highest_input_rate + output_tokens * rates.output
        return TierCost(tier.id, total / TOKENS_PER_PRICE_UNIT)

    def worst_case(
        self, model: str, day: date, input_tokens: int, output_tokens: int
    ) -> PriceQuote:
        """`worst_case_cost` as a record."""
        priced = self.worst_case_cost(model, day, input_tokens, output_tokens)
        rates = self.tier(model, day).usd_per_mtok
        return PriceQuote(
            model=model,
            day=day,
            tier_id=priced.tier_id,
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            input_usd_per_mtok=rates.highest_input_rate,
            output_usd_per_mtok=rates.output,
            cost_usd=priced.cost_usd,
        )


class _PriceFile(FrozenRecord):
    currency: Literal["USD"] = "USD"
    unit: Literal["usd_per_million_tokens"] = "usd_per_million_tokens"
    schedules: dict[str, tuple[PriceTier, ...]] = Field(default_factory=dict)
    models: dict[str, ModelPrices]


@functools.lru_cache(maxsize=8)
def _load_cached(path: Path, _mtime_ns: int, _size: int) -> PriceBook:
    parsed = load_yaml_config(_PriceFile, path)
    return PriceBook(currency=parsed.currency, models=parsed.models, source=str(path))


def read_price_book(path: Path) -> PriceBook:
    """Read and validate the price book at `path`; cached per file version (the project's
    is `project_configs.load_price_book`')."""
    resolved = path.resolve()
    try:
        stat = resolved.stat()
    except FileNotFoundError as error:
        raise ConfigError(f"price book not found: {resolved}") from error
    return _load_cached(resolved, stat.st_mtime_ns, stat.st_size)
