"""The royalty engine's bulk face: line royalties over whole frames, recoupment and artist
ledgers. The rules and their integer helpers are in :mod:`engine`; this module applies them
to every statement line of a world (the answer key, and the answer key under each
misreading the suite tells apart).

Lines are priced in two steps. :func:`code_lines` turns the text columns a rule reads (ISRC,
period, channel, currency) into integer codes and attaches each line's FX rate and its gross
in US dollars, once per world; :func:`price_lines` then applies the deals and terms of one
reading to those integers (escalator units, rate, royalty). :func:`line_royalties` is both
steps for one reading.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polars as pl

from eval_pipeline.errors import WorldError
from eval_pipeline.world.label.engine import (
    CHANNELS,
    CURRENCY_EXPONENTS,
    PPM,
    PayableRounding,
    Rounding,
    _check_int64,
    _dense_codes,
    applicable_rate_ppm_expr,
    cents_from_micro,
    div_round,
)
from eval_pipeline.world.memo import ByTables

_CURRENCIES: tuple[str, ...] = tuple(CURRENCY_EXPONENTS)
_DIVISORS = pl.lit(pl.Series([10 ** CURRENCY_EXPONENTS[c] for c in _CURRENCIES]))
"""Minor units per major unit of each currency, by currency code."""


def _code(column: str, categories: Sequence[str]) -> pl.Expr:
    """Each value's index in ``categories`` (an Enum cast is a dictionary lookup); values
    outside the categories become null."""
    return pl.col(column).cast(pl.Enum(list(categories)), strict=False).to_physical().cast(pl.Int32)


@dataclass(frozen=True)
class CodedLines:
    """Statement lines as integers: the ``keep`` columns, units, amount_minor, deal_index
    (row of the deals frame by ISRC; null for an ISRC no deal covers), period_index,
    channel_code, currency_code, usd_per_unit_micro, and gross_usd_micro under half-even
    rounding (rule 2); ``lines`` is the source, for naming samples in errors."""

    frame: pl.DataFrame
    lines: pl.DataFrame
    periods: tuple[str, ...]
    _gross: dict[Rounding, pl.Series] = field(default_factory=dict, repr=False)

    def gross(self, rounding: Rounding) -> pl.Series:
        """Every line's gross in micro-USD under ``rounding`` (computed once per rounding)."""
        if rounding not in self._gross:
            # The product is materialized first: the rounding helper reads its numerator
            # several times, and an eager expression would recompute a nested one each time.
            # Neither is kept in the frame (at 10x each is 37 MB the run would hold).
            parts = self.frame.select(
                _numerator=pl.col("amount_minor") * pl.col("usd_per_unit_micro"),
                _divisor=_DIVISORS.gather(pl.col("currency_code")),
            )
            self._gross[rounding] = parts.select(
                div_round(pl.col("_numerator"), pl.col("_divisor"), rounding)
            ).to_series()
        return self._gross[rounding]


def code_lines(
    lines: pl.DataFrame,
    deals: pl.DataFrame,
    fx_rates: pl.DataFrame,
    periods: Sequence[str],
    keep: Sequence[str] = ("line_id",),
) -> CodedLines:
    """Rule 2's inputs for every line, as integer codes (see :class:`CodedLines`).

    ``lines`` needs isrc, period, channel, currency, units, amount_minor; ``deals`` is
    :func:`engine.deals_in_force` (only its isrc order is read: a reading that changes
    which contract a track earns under keeps the rows)."""
    isrc_codes = _dense_codes(deals.get_column("isrc").to_list(), "ISRC")
    period_codes = _dense_codes(list(periods), "period")
    n_currencies = len(_CURRENCIES)
    fx_dense: list[int | None] = [None] * (len(periods) * n_currencies)
    for period, currency, rate in fx_rates.select(
        "period", "currency", "usd_per_unit_micro"
    ).iter_rows():
        if period in period_codes and currency in CURRENCY_EXPONENTS:
            fx_dense[period_codes[period] * n_currencies + _CURRENCIES.index(currency)] = rate
    coded = lines.select(
        *keep,
        "units",
        "amount_minor",
        deal_index=_code("isrc", list(isrc_codes)),
        period_index=_code("period", periods),
        channel_code=_code("channel", CHANNELS),
        currency_code=_code("currency", _CURRENCIES),
    )
    coded = coded.with_columns(
        usd_per_unit_micro=pl.lit(pl.Series(fx_dense, dtype=pl.Int64)).gather(
            pl.col("period_index") * n_currencies + pl.col("currency_code")
        ),
    )
    return CodedLines(frame=coded, lines=lines, periods=tuple(periods))


@dataclass(frozen=True)
class DenseTerms:
    """Terms in force as dense arrays indexed by (contract, channel, period) key
    (:func:`key_expr`); ``deal_contract`` is each deal's contract code."""

    deal_contract: pl.Series
    rate: pl.Series
    esc_units: pl.Series
    esc_rate: pl.Series
    size: int


def key_units(lines: pl.DataFrame, size: int) -> pl.Series:
    """Units per key (``_key`` column) as a dense array of ``size`` (0 where none)."""
    sums = lines.filter(pl.col("_key").is_not_null()).group_by("_key").agg(pl.col("units").sum())
    return pl.zeros(size, dtype=pl.Int64, eager=True).scatter(
        sums.get_column("_key"), sums.get_column("units")
    )


def key_expr(deal_contract: pl.Series, n_periods: int) -> pl.Expr:
    """Each row's (contract, channel, period) key from its deal_index, channel_code and
    period_index (``deal_contract``: each deal's contract code, :class:`DenseTerms`)."""
    n_channels = len(CHANNELS)
    return (
        pl.lit(deal_contract).gather(pl.col("deal_index")) * n_channels + pl.col("channel_code")
    ) * n_periods + pl.col("period_index")


def dense_terms(deals: pl.DataFrame, terms: pl.DataFrame, periods: Sequence[str]) -> DenseTerms:
    """:func:`compute_dense_terms`, remembered by the identity of ``deals`` and ``terms``: the
    suite prices 32 readings of a 1x world, and 25 of them read the rules' own deals and
    terms (a pass over every row of the terms in Python, 5 ms each)."""
    return _dense_terms_of(tuple(periods))({"deals": deals, "terms": terms})


@functools.cache
def _dense_terms_of(periods: tuple[str, ...]) -> ByTables[DenseTerms]:
    return ByTables(
        ("deals", "terms"),
        lambda tables: compute_dense_terms(tables["deals"], tables["terms"], periods),
        size=4,
    )


def compute_dense_terms(
    deals: pl.DataFrame, terms: pl.DataFrame, periods: Sequence[str]
) -> DenseTerms:
    contract_list = deals.get_column("contract_id").unique().sort().to_list()
    contract_codes = _dense_codes(contract_list, "contract")
    period_codes = _dense_codes(list(periods), "period")
    n_periods, n_channels = len(periods), len(CHANNELS)
    size = len(contract_list) * n_channels * n_periods
    rate: list[int | None] = [None] * size
    esc_units: list[int | None] = [None] * size
    esc_rate: list[int | None] = [None] * size
    for contract, channel, period, rate_ppm, units, escalated in terms.select(
        "contract_id", "channel", "period", "rate_ppm", "escalator_units", "escalated_rate_ppm"
    ).iter_rows():
        if contract in contract_codes and period in period_codes and channel in CHANNELS:
            key = (contract_codes[contract] * n_channels + CHANNELS.index(channel)) * n_periods
            key += period_codes[period]
            rate[key], esc_units[key], esc_rate[key] = rate_ppm, units, escalated
    return DenseTerms(
        deal_contract=pl.Series(
            [contract_codes[c] for c in deals.get_column("contract_id").to_list()], dtype=pl.Int64
        ),
        rate=pl.Series(rate, dtype=pl.Int64),
        esc_units=pl.Series(esc_units, dtype=pl.Int64),
        esc_rate=pl.Series(esc_rate, dtype=pl.Int64),
        size=size,
    )


def _sample(
    coded: CodedLines,
    include: pl.Series | None,
    mask: pl.Series,
    columns: Sequence[str],
) -> list[dict[str, Any]]:
    """Up to three of the counted lines ``mask`` picks, by the named source columns: found
    by position (the coded frame keeps the source lines' rows in their order, and ``mask``
    is aligned with the lines ``include`` keeps)."""
    source = coded.lines if include is None else coded.lines.filter(include)
    return source.filter(mask).select(columns).head(3).to_dicts()


def price_lines(
    coded: CodedLines,
    deals: pl.DataFrame,
    terms: pl.DataFrame,
    include: pl.Series | None = None,
    *,
    count_units: pl.Series | None = None,
    units_by_key: pl.Series | None = None,
    rounding: Rounding = "half_even",
    escalator_strict: bool = True,
    columns: Sequence[str] | None = None,
) -> pl.DataFrame:
    """Rules 2, 5 and 6 over the coded lines of one reading, in the lines' own row order.

    ``deals`` is :func:`engine.deals_in_force` as the reading reads rule 3 (same rows as the
    deals the lines were coded with); ``terms`` is :func:`engine.resolve_terms` over the
    coded periods. If ``include`` (a Boolean Series aligned with the lines) is given, only
    those lines count (rule 1: pass the lines that are not flaggable anomalies). Every
    counted line must have a known ISRC, period, channel and FX rate, or WorldError names a
    sample. ``count_units`` (a superset of ``include``), ``rounding="half_up"`` and
    ``escalator_strict=False`` compute misreadings: units of lines that do not earn still
    counted toward escalators, ties rounded up, "at or above" the threshold.
    ``units_by_key`` gives each (contract, channel, period) key's escalator units instead
    (indexed like :func:`dense_terms`'s arrays), for lines priced apart from the others.

    Returns the ``keep`` columns, units and amount_minor, and integer columns: deal_index,
    period_index, channel_code, usd_per_unit_micro, gross_usd_micro, units_in_period,
    rate_ppm (the rate applied), escalated (bool), royalty_micro; or only ``columns`` of
    them, in that order (the counted lines are then copied with only what is needed: at
    10x every column of them is 31 MB).
    """
    dense = dense_terms(deals, terms, coded.periods)
    frame = coded.frame.with_columns(
        gross_usd_micro=coded.gross(rounding),
        _key=key_expr(dense.deal_contract, len(coded.periods)),
    )
    # The checks read the counted lines through the mask: only the columns priced below
    # are copied.
    unknown = frame.select(
        pl.any_horizontal(
            pl.col(c).is_null()
            for c in ("deal_index", "period_index", "channel_code", "currency_code")
        )
    ).to_series()
    if include is not None:
        unknown = unknown.filter(include)
    if unknown.any():
        sample = _sample(coded, include, unknown, ("isrc", "period", "channel", "currency"))
        raise WorldError(
            f"{unknown.sum()} clean line(s) have an unknown ISRC, period, channel or "
            f"currency, e.g. {sample}"
        )
    missing_fx = frame.get_column("usd_per_unit_micro").is_null()
    if include is not None:
        missing_fx = missing_fx.filter(include)
    if missing_fx.any():
        raise WorldError(
            f"no FX rate for {missing_fx.sum()} line(s), e.g. "
            f"{_sample(coded, include, missing_fx, ('period', 'currency'))}"
        )
    factors = frame.select("amount_minor", "usd_per_unit_micro")
    _check_int64(
        "amount_minor × usd_per_unit_micro",
        factors if include is None else factors.filter(include),
        "amount_minor",
        "usd_per_unit_micro",
    )
    if columns is not None:
        frame = frame.select(
            c for c in frame.columns if c in columns or c in ("units", "gross_usd_micro", "_key")
        )
    counted = frame if include is None else frame.filter(include)
    if units_by_key is None:
        # Units per (contract, channel, period) key, summed once and gathered back to each
        # line: over the counted lines, or over the lines ``count_units`` names.
        unit_lines = (
            counted if count_units is None else frame.select("_key", "units").filter(count_units)
        )
        units_by_key = key_units(unit_lines, dense.size)
    priced = counted.select(
        pl.exclude("currency_code"),
        units_in_period=pl.lit(units_by_key).gather(pl.col("_key")),
        _rate=pl.lit(dense.rate).gather(pl.col("_key")),
        _esc_units=pl.lit(dense.esc_units).gather(pl.col("_key")),
        _esc_rate=pl.lit(dense.esc_rate).gather(pl.col("_key")),
    )
    missing_terms = priced.get_column("_rate").is_null()
    if missing_terms.any():
        raise WorldError(
            f"no contract terms for {missing_terms.sum()} line(s), e.g. "
            f"{_sample(coded, include, missing_terms, ('isrc', 'channel', 'period'))}"
        )
    priced = priced.select(
        pl.exclude("_esc_units", "_esc_rate", "_key"),
        rate_ppm=applicable_rate_ppm_expr(
            pl.col("units_in_period"),
            pl.col("_rate"),
            pl.col("_esc_units"),
            pl.col("_esc_rate"),
            strict=escalator_strict,
        ),
    )
    _check_int64("gross_usd_micro × rate_ppm", priced, "gross_usd_micro", "rate_ppm")
    priced = priced.select(
        pl.exclude("_rate"),
        escalated=pl.col("rate_ppm") != pl.col("_rate"),
        _numerator=pl.col("gross_usd_micro") * pl.col("rate_ppm"),
    )
    priced = priced.select(
        pl.exclude("_numerator", "gross_usd_micro", "units_in_period", "rate_ppm", "escalated"),
        "units_in_period",
        "gross_usd_micro",
        "rate_ppm",
        "escalated",
        royalty_micro=div_round(pl.col("_numerator"), PPM, rounding),
    )
    return priced if columns is None else priced.select(columns)


def line_royalties(
    lines: pl.DataFrame,
    deals: pl.DataFrame,
    terms: pl.DataFrame,
    fx_rates: pl.DataFrame,
    periods: Sequence[str],
    keep: Sequence[str] = ("line_id",),
    include: pl.Series | None = None,
    *,
    count_units: pl.Series | None = None,
    rounding: Rounding = "half_even",
    escalator_strict: bool = True,
) -> pl.DataFrame:
    """Rules 2, 5 and 6 over clean statement lines, in the lines' own row order: the lines
    coded (:func:`code_lines`) and priced for one reading (:func:`price_lines`, which names
    the arguments and the columns returned)."""
    coded = code_lines(lines, deals, fx_rates, periods, keep)
    return price_lines(
        coded,
        deals,
        terms,
        include,
        count_units=count_units,
        rounding=rounding,
        escalator_strict=escalator_strict,
    )


# -- recoupment: every account at once, one period after another ----------------------

LEDGER_TEXT = ("account_id", "artist_id", "period")


def recoupment_ledger(
    accounts: pl.DataFrame,
    charges: pl.DataFrame,
    earnings: pl.DataFrame,
    periods: Sequence[str],
) -> pl.DataFrame:
    """Rule 8 per account and period, every account in every period.

    ``accounts``: account_id, artist_id. ``charges``: account_id, period, charges_micro.
    ``earnings``: account_id, period, earnings_micro (at most one row per account and
    period in each; rows of other accounts or periods are not read). Returns the account
    ledger, by account then period: account_id, artist_id, period, charges_micro,
    balance_before_micro, earnings_micro, recouped_micro, balance_after_micro,
    payable_micro.

    A balance carries from one period to the next, so the periods go one after another;
    each is :func:`engine.recoup` on every account at once, in numpy (a Python step per
    account and period was 6 ms of every misreading's answer key at 1x).
    """
    ordered = accounts.sort("account_id").select("account_id", "artist_id")
    count, width = ordered.height, len(periods)
    charged = _account_period_grid(ordered, charges, "charges_micro", periods)
    earned = _account_period_grid(ordered, earnings, "earnings_micro", periods)
    before = np.empty_like(charged)
    recouped = np.empty_like(charged)
    balance = np.zeros(count, dtype=np.int64)
    for at in range(width):
        before[:, at] = balance + charged[:, at]
        if (before[:, at] < 0).any():
            raise WorldError(f"a recoupment balance cannot be negative: {int(before[:, at].min())}")
        recouped[:, at] = np.minimum(np.maximum(earned[:, at], 0), before[:, at])
        balance = before[:, at] - recouped[:, at]
    amounts = {
        "charges_micro": charged,
        "balance_before_micro": before,
        "earnings_micro": earned,
        "recouped_micro": recouped,
        "balance_after_micro": before - recouped,
        "payable_micro": earned - recouped,
    }
    rows = ordered.gather(np.repeat(np.arange(count), width)).with_columns(
        period=pl.Series(list(periods) * count, dtype=pl.String)
    )
    return rows.with_columns(
        pl.Series(name, values.ravel(), dtype=pl.Int64) for name, values in amounts.items()
    ).select(*(pl.col(c).cast(pl.String) for c in LEDGER_TEXT), *amounts)


def _account_period_grid(
    ordered: pl.DataFrame, cells: pl.DataFrame, column: str, periods: Sequence[str]
) -> np.ndarray:
    """``cells``' ``column`` as an accounts × periods int64 array (``ordered``'s rows, then
    ``periods``), zero where absent. Two values for one account and period are refused:
    which would count is not said."""
    at = cells.join(
        ordered.select("account_id", _row=pl.int_range(pl.len(), dtype=pl.Int64)),
        on="account_id",
    ).join(
        pl.DataFrame(
            {"period": list(periods), "_col": range(len(periods))},
            schema={"period": pl.String, "_col": pl.Int64},
        ),
        on="period",
    )
    index = (at.get_column("_row") * len(periods) + at.get_column("_col")).to_numpy()
    if len(np.unique(index)) != len(index):
        raise WorldError(f"{column} holds more than one value for an account in a period")
    grid = np.zeros(ordered.height * len(periods), dtype=np.int64)
    grid[index] = at.get_column(column).cast(pl.Int64).to_numpy()
    return grid.reshape(ordered.height, len(periods))


def artist_ledger(
    account_ledger: pl.DataFrame,
    *,
    rounding: Rounding = "half_even",
    payable_rounding: PayableRounding = "per_artist",
) -> pl.DataFrame:
    """Rule 9 per artist and period from the account ledger (``per_account`` rounding and
    ``half_up`` are misreadings: each account's payable rounded to the cent, then summed)."""
    if payable_rounding == "per_artist":
        net_payable = cents_from_micro(pl.col("payable_micro"), rounding)
    else:
        net_payable = pl.col("payable_cents_by_account")
    return (
        account_ledger.with_columns(
            payable_cents_by_account=cents_from_micro(pl.col("payable_micro"), rounding)
        )
        .group_by(["artist_id", "period"])
        .agg(
            gross_micro=pl.col("earnings_micro").sum(),
            recouped_micro=pl.col("recouped_micro").sum(),
            payable_micro=pl.col("payable_micro").sum(),
            balance_after_micro=pl.col("balance_after_micro").sum(),
            account_count=pl.len().cast(pl.Int64),
            payable_cents_by_account=pl.col("payable_cents_by_account").sum(),
        )
        .with_columns(
            net_payable_cents=net_payable,
            gross_cents=cents_from_micro(pl.col("gross_micro"), rounding),
            recouped_cents=cents_from_micro(pl.col("recouped_micro"), rounding),
            balance_after_cents=cents_from_micro(pl.col("balance_after_micro"), rounding),
        )
        .select(
            "artist_id",
            "period",
            "gross_micro",
            "recouped_micro",
            "payable_micro",
            "net_payable_cents",
            "balance_after_micro",
            "gross_cents",
            "recouped_cents",
            "balance_after_cents",
            "account_count",
        )
        .sort(["artist_id", "period"])
    )
