"""The royalty engine of the label world: one set of rules, a vectorized and a scalar face.

Money is integer minor units everywhere; nothing here touches a float. The answer key runs
the vectorized face over every statement line; the product lane's calculator tool runs the
scalar face on single values and gets :class:`~decimal.Decimal` back. Both faces share the
same integer helpers (:func:`div_half_even` works on Python ints and on polars
expressions alike), and a property test checks that they agree.

Units
    * statement amounts: ``amount_minor``, minor units of the line's currency (USD, EUR and
      GBP have exponent 2, JPY has exponent 0);
    * FX: ``usd_per_unit_micro``, US dollars per one unit of the currency times 10^6
      (USD is exactly 1_000_000), one rate per currency and period;
    * USD amounts: micro-dollars (``*_micro``, 10^-6 USD) or cents (``*_cents``);
    * royalty rates: parts per million of net receipts (``rate_ppm``; 180_000 = 18%).

Rules
    The rules are the label's rulebook (:mod:`eval_pipeline.world.label.rulebook`, the
    world table ``label_policies``, section 2 of ``docs/royalty-rules.md``): this module
    implements R2 (conversion), R3 (deal in force), R4 (terms), R5 (escalator), R6 (line
    royalty), R8 (recoupment) and R9 (net payable); R1 and the reconciliation policies
    F1-F7 decide which lines reach it (:mod:`reconcile`, :mod:`truth`). The functions
    also take the knobs of the misreadings the suite tells apart (half-up rounding, ``>=``
    at the threshold, terms of the period's first day, ...), defaulting to the rules.

Half-even ("banker's") rounding rounds to the nearest integer and a tie to the even one:
``half_even(5/2) = 2``, ``half_even(7/2) = 4``, ``half_even(-5/2) = -2``.
"""

from __future__ import annotations

import calendar
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date
from decimal import Decimal, InvalidOperation
from typing import Any, Literal, overload

import polars as pl

from eval_pipeline.errors import WorldError

MICRO_PER_USD = 1_000_000
MICRO_PER_CENT = 10_000
PPM = 1_000_000
CURRENCY_EXPONENTS: Mapping[str, int] = {"USD": 2, "EUR": 2, "GBP": 2, "JPY": 0}
CHANNELS: tuple[str, ...] = ("streaming", "download", "physical", "sync")

_SIX_PLACES = Decimal("0.000001")
_TWO_PLACES = Decimal("0.01")


# -- integer helpers: one implementation, two faces ------------------------------------


Rounding = Literal["half_even", "half_up"]
"""How a division is rounded: the rules use half-even; half-up (ties away from zero) is the
common misreading the suite checks its cases against."""


@overload
def div_round(numerator: int, divisor: int, rounding: Rounding = "half_even") -> int: ...


@overload
def div_round(
    numerator: pl.Expr, divisor: int | pl.Expr, rounding: Rounding = "half_even"
) -> pl.Expr: ...


def div_round(numerator: Any, divisor: Any, rounding: Rounding = "half_even") -> Any:
    """``numerator / divisor`` rounded to an integer, for a positive integer divisor.

    The same arithmetic runs on Python ints (exact, unbounded) and on polars integer
    expressions (Int64; callers keep ``|numerator| < 2**63``). Floor division and a
    non-negative remainder are the same in both (polars follows Python's semantics). A tie
    goes to the even neighbour (``half_even``) or away from zero (``half_up``).
    """
    if isinstance(divisor, int) and divisor <= 0:
        raise ValueError(f"divisor must be positive, got {divisor}")
    quotient = numerator // divisor
    twice_remainder = (numerator - quotient * divisor) * 2
    tie_up = (quotient % 2 == 1) if rounding == "half_even" else (numerator >= 0)
    round_up = (twice_remainder > divisor) | ((twice_remainder == divisor) & tie_up)
    return quotient + round_up


@overload
def div_half_even(numerator: int, divisor: int) -> int: ...


@overload
def div_half_even(numerator: pl.Expr, divisor: int | pl.Expr) -> pl.Expr: ...


def div_half_even(numerator: Any, divisor: Any) -> Any:
    """``numerator / divisor`` rounded half to even (the rules' rounding everywhere)."""
    return div_round(numerator, divisor, "half_even")


def usd_micro_from_minor(amount_minor: int, usd_per_unit_micro: int, exponent: int) -> int:
    """Rule 2: a statement amount in minor units converted to micro-USD, half-even."""
    return div_half_even(amount_minor * usd_per_unit_micro, 10**exponent)


@overload
def royalty_micro_from_gross(gross_usd_micro: int, rate_ppm: int) -> int: ...


@overload
def royalty_micro_from_gross(gross_usd_micro: pl.Expr, rate_ppm: pl.Expr) -> pl.Expr: ...


def royalty_micro_from_gross(gross_usd_micro: Any, rate_ppm: Any) -> Any:
    """Rule 6: the royalty of one line, in micro-USD, half-even."""
    return div_half_even(gross_usd_micro * rate_ppm, PPM)


@overload
def cents_from_micro(micro: int, rounding: Rounding = "half_even") -> int: ...


@overload
def cents_from_micro(micro: pl.Expr, rounding: Rounding = "half_even") -> pl.Expr: ...


def cents_from_micro(micro: Any, rounding: Rounding = "half_even") -> Any:
    """Micro-USD to cents, half-even (rule 9)."""
    return div_round(micro, MICRO_PER_CENT, rounding)


def applicable_rate_ppm(
    units_in_period: int,
    rate_ppm: int,
    escalator_units: int | None,
    escalated_rate_ppm: int | None,
) -> int:
    """Rule 5 on scalars: the escalated rate once the period's units exceed the threshold."""
    if (
        escalator_units is not None
        and escalated_rate_ppm is not None
        and units_in_period > escalator_units
    ):
        return escalated_rate_ppm
    return rate_ppm


def applicable_rate_ppm_expr(
    units_in_period: pl.Expr,
    rate_ppm: pl.Expr,
    escalator_units: pl.Expr,
    escalated_rate_ppm: pl.Expr,
    *,
    strict: bool = True,
) -> pl.Expr:
    """Rule 5 as a polars expression (a null threshold or escalated rate means no escalator).

    ``strict=False`` is the misreading "at or above the threshold"."""
    above = units_in_period > escalator_units if strict else units_in_period >= escalator_units
    escalates = escalator_units.is_not_null() & escalated_rate_ppm.is_not_null() & above
    return pl.when(escalates).then(escalated_rate_ppm).otherwise(rate_ppm).cast(pl.Int64)


def exponent_of(currency: str) -> int:
    """The minor-unit exponent of a supported currency."""
    try:
        return CURRENCY_EXPONENTS[currency]
    except KeyError:
        known = ", ".join(sorted(CURRENCY_EXPONENTS))
        raise WorldError(f"unsupported currency {currency!r}; known: {known}") from None


def exponent_expr(currency: pl.Expr) -> pl.Expr:
    """The minor-unit exponent of each row's currency (unknown currency gives null)."""
    return currency.replace_strict(dict(CURRENCY_EXPONENTS), default=None, return_dtype=pl.Int64)


# -- periods --------------------------------------------------------------------------


def period_end(period: str) -> date:
    """The last day of a ``YYYY-MM`` period."""
    try:
        year_text, month_text = period.split("-")
        year, month = int(year_text), int(month_text)
        last = calendar.monthrange(year, month)[1]
    except ValueError as error:
        raise WorldError(f"period must look like YYYY-MM, got {period!r}") from error
    return date(year, month, last)


def period_frame(periods: Sequence[str]) -> pl.DataFrame:
    """``period``, ``period_end`` and ``period_index`` (0-based, in the given order)."""
    return pl.DataFrame(
        {
            "period": list(periods),
            "period_end": [period_end(p) for p in periods],
            "period_index": list(range(len(periods))),
        },
        schema={"period": pl.String, "period_end": pl.Date, "period_index": pl.Int64},
    )


# -- vectorized face: terms and deals (line royalties and ledgers: engine_bulk) -------


TermsAsOf = Literal["period_end", "period_start"]


def resolve_terms(
    contracts: pl.DataFrame,
    contract_rates: pl.DataFrame,
    periods: Sequence[str],
    *,
    as_of: TermsAsOf = "period_end",
    amendment_replaces_row: bool = True,
) -> pl.DataFrame:
    """Rule 4: the terms in force per base contract, channel and period.

    Columns: contract_id (the base contract), channel, period, rate_ppm, escalator_units,
    escalated_rate_ppm, source_contract_id (the base or the amendment that set the row).
    ``as_of="period_start"`` and ``amendment_replaces_row=False`` are misreadings (terms of
    the period's first day; an amendment row that keeps the base row's escalator).
    """
    rows = contract_rates.join(
        contracts.select("contract_id", "kind", "amends_contract_id", "effective_date"),
        on="contract_id",
        how="inner",
    ).with_columns(
        base_contract_id=pl.coalesce("amends_contract_id", "contract_id"),
        is_amendment=pl.col("kind") == "amendment",
    )
    day = pl.col("period_end") if as_of == "period_end" else pl.col("period_end").dt.month_start()
    candidates = (
        rows.join(period_frame(periods), how="cross")
        .filter(~pl.col("is_amendment") | (pl.col("effective_date") <= day))
        .sort(
            [
                "base_contract_id",
                "channel",
                "period",
                "is_amendment",
                "effective_date",
                "contract_id",
            ]
        )
    )
    resolved = candidates.unique(
        subset=["base_contract_id", "channel", "period"], keep="last", maintain_order=True
    )
    if not amendment_replaces_row:
        base_rows = rows.filter(~pl.col("is_amendment")).select(
            "base_contract_id",
            "channel",
            base_units=pl.col("escalator_units"),
            base_rate=pl.col("escalated_rate_ppm"),
        )
        resolved = resolved.join(
            base_rows, on=["base_contract_id", "channel"], how="left", maintain_order="left"
        ).with_columns(
            escalator_units=pl.coalesce("escalator_units", "base_units"),
            escalated_rate_ppm=pl.coalesce("escalated_rate_ppm", "base_rate"),
        )
    return resolved.select(
        pl.col("base_contract_id").alias("contract_id"),
        "channel",
        "period",
        pl.col("rate_ppm").cast(pl.Int64),
        pl.col("escalator_units").cast(pl.Int64),
        pl.col("escalated_rate_ppm").cast(pl.Int64),
        pl.col("contract_id").alias("source_contract_id"),
    ).sort(["contract_id", "channel", "period"])


@dataclass(frozen=True)
class Terms:
    """The terms of one base contract and channel in force on a period's last day."""

    contract_id: str
    channel: str
    period: str
    rate_ppm: int
    escalator_units: int | None
    escalated_rate_ppm: int | None
    source_contract_id: str

    def rate_for(self, units_in_period: int) -> int:
        """Rule 5: the rate applied when the period's units are ``units_in_period``."""
        return applicable_rate_ppm(
            units_in_period, self.rate_ppm, self.escalator_units, self.escalated_rate_ppm
        )


def terms_in_force(
    contracts: pl.DataFrame,
    contract_rates: pl.DataFrame,
    contract_id: str,
    channel: str,
    period: str,
) -> Terms:
    """Rule 4 for one base contract, channel and period (the scalar face of resolve_terms)."""
    family = contracts.filter(
        (pl.col("contract_id") == contract_id) | (pl.col("amends_contract_id") == contract_id)
    )
    if family.filter(pl.col("kind") == "base").height != 1:
        raise WorldError(f"no base contract {contract_id!r}")
    rates = contract_rates.filter(pl.col("contract_id").is_in(family["contract_id"].implode()))
    resolved = resolve_terms(family, rates, [period]).filter(pl.col("channel") == channel)
    if resolved.height != 1:
        raise WorldError(f"contract {contract_id} has no {channel!r} terms in {period}")
    row = resolved.row(0, named=True)
    return Terms(
        contract_id=contract_id,
        channel=channel,
        period=period,
        rate_ppm=row["rate_ppm"],
        escalator_units=row["escalator_units"],
        escalated_rate_ppm=row["escalated_rate_ppm"],
        source_contract_id=row["source_contract_id"],
    )


def deals_in_force(
    tracks: pl.DataFrame, releases: pl.DataFrame, contracts: pl.DataFrame
) -> pl.DataFrame:
    """Rule 3: the base contract each track earns under, and the account it recoups into.

    Columns: track_id, isrc, artist_id, contract_id, account_id. Raises WorldError when a
    track's release date is covered by no contract term or by more than one.
    """
    base = contracts.filter(pl.col("kind") == "base").select(
        "contract_id", "artist_id", "effective_date", "term_end_date", "recoupment_account_id"
    )
    matched = (
        tracks.select("track_id", "isrc", "release_id")
        .join(
            releases.select("release_id", "artist_id", "original_release_date"),
            on="release_id",
            how="inner",
        )
        .join(base, on="artist_id", how="inner")
        .filter(
            (pl.col("effective_date") <= pl.col("original_release_date"))
            & (pl.col("original_release_date") <= pl.col("term_end_date"))
        )
    )
    counts = matched.group_by("track_id").len()
    if counts.height != tracks.height or counts.filter(pl.col("len") != 1).height:
        bad = tracks.join(counts.filter(pl.col("len") == 1), on="track_id", how="anti").get_column(
            "track_id"
        )
        raise WorldError(
            f"{bad.len()} track(s) have no single contract in force at release, e.g. "
            f"{bad.sort().head(3).to_list()}"
        )
    return matched.select(
        "track_id",
        "isrc",
        "artist_id",
        "contract_id",
        pl.col("recoupment_account_id").alias("account_id"),
    ).sort("track_id")


def _dense_codes(values: Sequence[str], what: str) -> dict[str, int]:
    codes = {value: index for index, value in enumerate(values)}
    if len(codes) != len(values):
        raise WorldError(f"duplicate {what} in {list(values)[:5]}...")
    return codes


def _check_int64(what: str, frame: pl.DataFrame, left: str, right: str) -> None:
    """Refuse rows whose product could leave Int64 (polars would wrap silently).

    The bound is checked in floating point on purpose: it is a guard, not money, and its
    relative error (1e-16) is far inside the margin kept below 2**63.
    """
    if frame.height == 0:
        return
    worst = frame.select(
        (pl.col(left).cast(pl.Float64).abs() * pl.col(right).cast(pl.Float64).abs()).max()
    ).item()
    if worst is not None and worst >= _INT64_GUARD:
        raise WorldError(
            f"{what} reaches about {worst:.3e}, beyond 64-bit integers; a line that large "
            "is not a royalty statement line"
        )


_INT64_GUARD = float(2**63 - 2**16)


# -- recoupment: one account in one period -------------------------------------------


@dataclass(frozen=True)
class RecoupmentStep:
    """One account in one period (rule 8), all in micro-USD."""

    balance_before_micro: int
    earnings_micro: int
    recouped_micro: int
    balance_after_micro: int

    @property
    def payable_micro(self) -> int:
        """What the account contributes to the artist's payable this period."""
        return self.earnings_micro - self.recouped_micro


def recoup(balance_before_micro: int, earnings_micro: int) -> RecoupmentStep:
    """Rule 8: recover what is owed from this period's earnings, never more than earned."""
    if balance_before_micro < 0:
        raise WorldError(f"a recoupment balance cannot be negative: {balance_before_micro}")
    recouped = min(max(earnings_micro, 0), balance_before_micro)
    return RecoupmentStep(
        balance_before_micro=balance_before_micro,
        earnings_micro=earnings_micro,
        recouped_micro=recouped,
        balance_after_micro=balance_before_micro - recouped,
    )


def net_payable_cents(payables_micro: Iterable[int]) -> int:
    """Rule 9: the artist's accounts' payables summed, then rounded to cents once."""
    return cents_from_micro(sum(payables_micro))


def charge_periods(charges: pl.DataFrame, periods: Sequence[str]) -> pl.DataFrame:
    """Rule 8's charge timing: each charge in the first period whose last day is on or after
    its date (earlier dates go to the first period); charges after the last period drop out.

    ``charges`` needs account_id, charge_date, amount_micro. Returns account_id, period,
    charges_micro summed per account and period.
    """
    frame = period_frame(periods)
    ends = frame.get_column("period_end")
    positions = ends.search_sorted(charges.get_column("charge_date"), side="left")
    indexed = charges.with_columns(period_index=positions.cast(pl.Int64)).filter(
        pl.col("period_index") < len(periods)
    )
    return (
        indexed.join(frame.select("period", "period_index"), on="period_index", how="inner")
        .group_by(["account_id", "period"])
        .agg(charges_micro=pl.col("amount_micro").sum())
        .sort(["account_id", "period"])
    )


PayableRounding = Literal["per_artist", "per_account"]
"""How rule 9 rounds: the artist's payables summed, then rounded once (the rules), or each
account's rounded first (a misreading)."""


# -- scalar face for the calculator tool: Decimal in, Decimal out ----------------------


def micro_to_usd(micro: int) -> Decimal:
    """Micro-USD as a Decimal with six places."""
    return Decimal(micro).scaleb(-6).quantize(_SIX_PLACES)


def cents_to_usd(cents: int) -> Decimal:
    """Cents as a Decimal with two places."""
    return Decimal(cents).scaleb(-2).quantize(_TWO_PLACES)


def _exact_int(value: Decimal | str | int, places: int, what: str) -> int:
    """``value * 10^places`` as an int, refusing a value that needs more places."""
    try:
        number = Decimal(value)
    except (InvalidOperation, ValueError) as error:
        raise WorldError(f"{what} is not a number: {value!r}") from error
    if not number.is_finite():
        raise WorldError(f"{what} must be finite, got {value!r}")
    scaled = number.scaleb(places)
    if scaled != scaled.to_integral_value():
        raise WorldError(f"{what} {value!r} has more than {places} decimal places")
    return int(scaled)


def minor_from_amount(amount: Decimal | str | int, currency: str) -> int:
    """A statement amount in major units (e.g. ``"12.34"`` EUR) to minor units, exactly."""
    return _exact_int(amount, exponent_of(currency), f"amount in {currency}")


def fx_micro_from_rate(usd_per_unit: Decimal | str | int) -> int:
    """An FX rate (USD per unit, at most six decimals) to ``usd_per_unit_micro``."""
    return _exact_int(usd_per_unit, 6, "FX rate")


def ppm_from_rate(rate: Decimal | str | int) -> int:
    """A royalty rate as a fraction (``"0.18"``) to parts per million, exactly."""
    return _exact_int(rate, 6, "royalty rate")


@dataclass(frozen=True)
class LineRoyalty:
    """The scalar result for one line: gross and royalty in USD (six decimals)."""

    gross_usd_micro: int
    rate_ppm: int
    royalty_micro: int

    @property
    def gross_usd(self) -> Decimal:
        """Gross receipts in USD, six decimals."""
        return micro_to_usd(self.gross_usd_micro)

    @property
    def royalty_usd(self) -> Decimal:
        """The line's royalty in USD, six decimals."""
        return micro_to_usd(self.royalty_micro)


def line_royalty_micro(
    amount_minor: int,
    currency: str,
    usd_per_unit_micro: int,
    rate_ppm: int,
    *,
    units_in_period: int = 0,
    escalator_units: int | None = None,
    escalated_rate_ppm: int | None = None,
) -> LineRoyalty:
    """Rules 2, 5 and 6 for one line, on integers (the scalar twin of line_royalties)."""
    gross = usd_micro_from_minor(amount_minor, usd_per_unit_micro, exponent_of(currency))
    rate = applicable_rate_ppm(units_in_period, rate_ppm, escalator_units, escalated_rate_ppm)
    return LineRoyalty(
        gross_usd_micro=gross, rate_ppm=rate, royalty_micro=royalty_micro_from_gross(gross, rate)
    )


def line_royalty(
    amount: Decimal | str | int,
    currency: str,
    usd_per_unit: Decimal | str | int,
    rate: Decimal | str | int,
) -> LineRoyalty:
    """Rules 2 and 6 from human-readable values: ``line_royalty("12.34", "EUR", "1.0825",
    "0.18").royalty_usd`` is the royalty in USD as a Decimal with six places. Values with
    more precision than the rules allow are refused, never rounded silently."""
    return line_royalty_micro(
        minor_from_amount(amount, currency),
        currency,
        fx_micro_from_rate(usd_per_unit),
        ppm_from_rate(rate),
    )


def recouped_payable_usd(
    steps: Sequence[tuple[int, int]],
) -> tuple[Decimal, Decimal]:
    """Rules 8-9 for one artist-period: ``steps`` holds (balance_before_micro,
    earnings_micro) per account; returns (recouped USD, net payable USD to the cent)."""
    results = [recoup(balance, earnings) for balance, earnings in steps]
    recouped = sum(step.recouped_micro for step in results)
    payable = net_payable_cents(step.payable_micro for step in results)
    return micro_to_usd(recouped), cents_to_usd(payable)
