"""The royalty engine: half-even helpers, the scalar face, and scalar == vectorized."""

from __future__ import annotations

from decimal import ROUND_HALF_EVEN, Decimal

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from eval_pipeline.errors import WorldError
from eval_pipeline.world.base import GeneratedWorld
from eval_pipeline.world.label import engine, engine_bulk
from eval_pipeline.world.label.engine import (
    cents_from_micro,
    div_half_even,
    line_royalty,
    line_royalty_micro,
    recoup,
    recouped_payable_usd,
)

INT63 = 2**62


@pytest.mark.parametrize(
    ("numerator", "divisor", "expected"),
    [
        (5, 2, 2),
        (7, 2, 4),
        (-5, 2, -2),
        (-7, 2, -4),
        (6, 4, 2),  # 1.5 -> 2
        (10, 4, 2),  # 2.5 -> 2
        (11, 4, 3),
        (-11, 4, -3),
        (62_532_555_000, 10**6, 62_533),
        (0, 7, 0),
    ],
)
def test_div_half_even_examples(numerator: int, divisor: int, expected: int) -> None:
    assert div_half_even(numerator, divisor) == expected
    frame = pl.DataFrame({"n": [numerator]})
    assert frame.select(div_half_even(pl.col("n"), divisor)).item() == expected


def test_div_half_even_refuses_a_non_positive_divisor() -> None:
    with pytest.raises(ValueError, match="divisor"):
        div_half_even(1, 0)


@given(st.integers(-INT63, INT63), st.integers(1, 10**12))
def test_div_half_even_matches_decimal(numerator: int, divisor: int) -> None:
    expected = (Decimal(numerator) / Decimal(divisor)).quantize(
        Decimal(1), rounding=ROUND_HALF_EVEN
    )
    assert div_half_even(numerator, divisor) == int(expected)


# The engine's domain: |amount_minor x usd_per_unit_micro| and |gross x rate| below 2**63
# (a single line under about $9 million); line_royalties refuses anything larger.
line_inputs = st.tuples(
    st.integers(-(10**9), 10**9),  # amount_minor
    st.sampled_from(sorted(engine.CURRENCY_EXPONENTS)),
    st.integers(1_000, 2_000_000),  # usd_per_unit_micro
    st.integers(0, 1_000_000),  # rate_ppm
    st.integers(-1_000, 10**7),  # units_in_period
    st.one_of(st.none(), st.integers(0, 10**7)),  # escalator_units
    st.integers(0, 1_000_000),  # escalated_rate_ppm
)


def _in_domain(row: tuple) -> bool:  # type: ignore[type-arg]
    amount, currency, fx, rate, _, _, escalated = row
    gross = abs(amount) * fx // 10 ** engine.CURRENCY_EXPONENTS[currency] + 1
    return bool(abs(amount) * fx < 2**63 and gross * max(rate, escalated) < 2**63)


@settings(max_examples=80, deadline=None)
@given(st.lists(line_inputs, min_size=1, max_size=60))
def test_scalar_and_vectorized_faces_agree(rows: list[tuple]) -> None:  # type: ignore[type-arg]
    """The same integer helpers, on Python ints and on polars columns, give the same bits."""
    rows = [row for row in rows if _in_domain(row)] or [(1, "USD", 1_000_000, 1, 0, None, 0)]
    frame = pl.DataFrame(
        rows,
        schema={
            "amount_minor": pl.Int64,
            "currency": pl.String,
            "usd_per_unit_micro": pl.Int64,
            "rate_ppm": pl.Int64,
            "units_in_period": pl.Int64,
            "escalator_units": pl.Int64,
            "escalated_rate_ppm": pl.Int64,
        },
        orient="row",
    )
    vectorized = (
        frame.with_columns(
            numerator=pl.col("amount_minor") * pl.col("usd_per_unit_micro"),
            divisor=pl.lit(10, dtype=pl.Int64).pow(engine.exponent_expr(pl.col("currency"))),
            applied=engine.applicable_rate_ppm_expr(
                pl.col("units_in_period"),
                pl.col("rate_ppm"),
                pl.col("escalator_units"),
                pl.col("escalated_rate_ppm"),
            ),
        )
        .with_columns(gross=div_half_even(pl.col("numerator"), pl.col("divisor")))
        .with_columns(product=pl.col("gross") * pl.col("applied"))
        .with_columns(royalty=div_half_even(pl.col("product"), engine.PPM))
        .select("gross", "applied", "royalty")
        .rows()
    )
    for row, (gross, applied, royalty) in zip(rows, vectorized, strict=True):
        amount, currency, fx, rate, units, esc_units, esc_rate = row
        scalar = line_royalty_micro(
            amount,
            currency,
            fx,
            rate,
            units_in_period=units,
            escalator_units=esc_units,
            escalated_rate_ppm=esc_rate if esc_units is not None else None,
        )
        assert (scalar.gross_usd_micro, scalar.rate_ppm, scalar.royalty_micro) == (
            gross,
            applied,
            royalty,
        )


@settings(max_examples=30, deadline=None)
@given(st.lists(line_inputs, min_size=1, max_size=40))
def test_engine_line_royalties_matches_the_scalar_face(rows: list[tuple]) -> None:  # type: ignore[type-arg]
    """engine.line_royalties (the answer key's path) against line_royalty_micro per line."""
    # One contract-channel for all rows: its rate (the first row's) applies to every line.
    first = rows[0]
    fx_max, rate_max = first[2] + 4, max(first[3], first[6])
    rows = [row for row in rows if _in_domain((row[0], row[1], fx_max, rate_max, 0, None, 0))] or [
        (1, "USD", 1_000_000, 1, 0, None, 0)
    ]
    periods = ["2025-01"]
    currencies = sorted(engine.CURRENCY_EXPONENTS)
    lines = pl.DataFrame(
        {
            "line_id": list(range(len(rows))),
            "period": periods * len(rows),
            "isrc": ["ISRC0"] * len(rows),
            "channel": ["streaming"] * len(rows),
            "currency": [r[1] for r in rows],
            "units": [abs(r[4]) % 1_000 for r in rows],
            "amount_minor": [r[0] for r in rows],
        }
    )
    fx = {c: first[2] + i for i, c in enumerate(currencies)}
    fx_rates = pl.DataFrame(
        {"period": periods * 4, "currency": currencies, "usd_per_unit_micro": list(fx.values())}
    )
    rate, esc_units, esc_rate = first[3], first[5], first[6]
    terms = pl.DataFrame(
        {
            "contract_id": ["CON-1"],
            "channel": ["streaming"],
            "period": periods,
            "rate_ppm": [rate],
            "escalator_units": [esc_units],
            "escalated_rate_ppm": [esc_rate if esc_units is not None else None],
        },
        schema_overrides={"escalator_units": pl.Int64, "escalated_rate_ppm": pl.Int64},
    )
    deals = pl.DataFrame(
        {
            "track_id": ["T1"],
            "isrc": ["ISRC0"],
            "artist_id": ["A1"],
            "contract_id": ["CON-1"],
            "account_id": ["ACC-1"],
        }
    )
    result = engine_bulk.line_royalties(lines, deals, terms, fx_rates, periods)
    units_in_period = int(lines["units"].sum())
    for row, got in zip(rows, result.iter_rows(named=True), strict=True):
        expected = line_royalty_micro(
            row[0],
            row[1],
            fx[row[1]],
            rate,
            units_in_period=units_in_period,
            escalator_units=esc_units,
            escalated_rate_ppm=esc_rate if esc_units is not None else None,
        )
        assert got["gross_usd_micro"] == expected.gross_usd_micro
        assert got["rate_ppm"] == expected.rate_ppm
        assert got["royalty_micro"] == expected.royalty_micro


def test_line_royalties_refuses_amounts_beyond_int64() -> None:
    lines = pl.DataFrame(
        {
            "line_id": [1],
            "period": ["2025-01"],
            "isrc": ["I"],
            "channel": ["sync"],
            "currency": ["USD"],
            "units": [1],
            "amount_minor": [10**14],
        }
    )
    fx = pl.DataFrame({"period": ["2025-01"], "currency": ["USD"], "usd_per_unit_micro": [10**6]})
    terms = pl.DataFrame(
        {
            "contract_id": ["C"],
            "channel": ["sync"],
            "period": ["2025-01"],
            "rate_ppm": [500_000],
            "escalator_units": [None],
            "escalated_rate_ppm": [None],
        },
        schema_overrides={"escalator_units": pl.Int64, "escalated_rate_ppm": pl.Int64},
    )
    deals = pl.DataFrame(
        {
            "track_id": ["T"],
            "isrc": ["I"],
            "artist_id": ["A"],
            "contract_id": ["C"],
            "account_id": ["ACC"],
        }
    )
    with pytest.raises(WorldError, match="64-bit"):
        engine_bulk.line_royalties(lines, deals, terms, fx, ["2025-01"])


def test_decimal_face() -> None:
    result = line_royalty("1.45", "EUR", "0.9914", "0.205")
    assert result.gross_usd == Decimal("1.437530")
    assert result.royalty_usd == Decimal("0.294694")
    assert line_royalty("35412", "JPY", "0.006708", "0.2475").gross_usd == Decimal("237.543696")


@pytest.mark.parametrize(
    ("amount", "currency", "fx", "rate", "field"),
    [
        ("1.234", "EUR", "1", "0.1", "amount"),
        ("1.5", "JPY", "0.0067", "0.1", "amount"),
        ("1", "USD", "1.0000001", "0.1", "FX"),
        ("1", "USD", "1", "0.12345678", "rate"),
        ("x", "USD", "1", "0.1", "amount"),
        ("1", "CHF", "1", "0.1", "CHF"),
    ],
)
def test_decimal_face_refuses_excess_precision(
    amount: str, currency: str, fx: str, rate: str, field: str
) -> None:
    with pytest.raises(WorldError, match=field):
        line_royalty(amount, currency, fx, rate)


def test_recoup_and_net_payable() -> None:
    step = recoup(124_274_749, 188_655_900)
    assert (step.recouped_micro, step.balance_after_micro, step.payable_micro) == (
        124_274_749,
        0,
        64_381_151,
    )
    assert recoup(10, -5).recouped_micro == 0  # negative earnings recoup nothing
    assert recoup(0, 7).payable_micro == 7
    assert recouped_payable_usd([(124_274_749, 188_655_900)]) == (
        Decimal("124.274749"),
        Decimal("64.38"),
    )
    # Rounded once: two accounts of 0.4 cents each pay 1 cent, not 0 + 0.
    assert engine.net_payable_cents([4_000, 4_000]) == 1
    assert cents_from_micro(5_000) == 0 and cents_from_micro(15_000) == 2
    with pytest.raises(WorldError):
        recoup(-1, 0)


def test_periods() -> None:
    assert engine.period_end("2025-02").isoformat() == "2025-02-28"
    with pytest.raises(WorldError, match="YYYY-MM"):
        engine.period_end("2025/02")


def test_terms_in_force_follows_amendments(label_world: GeneratedWorld) -> None:
    tables = label_world.tables
    amendments = (
        tables["contracts"]
        .filter((pl.col("kind") == "amendment") & (pl.col("effective_date").dt.year() == 2025))
        .sort("contract_id")
    )
    amendment = amendments.row(0, named=True)
    row = (
        tables["contract_rates"]
        .filter(pl.col("contract_id") == amendment["contract_id"])
        .row(0, named=True)
    )
    month = amendment["effective_date"].month
    base_id = amendment["amends_contract_id"]
    after = engine.terms_in_force(
        tables["contracts"], tables["contract_rates"], base_id, row["channel"], f"2025-{month:02d}"
    )
    assert after.source_contract_id == amendment["contract_id"]
    assert after.rate_ppm == row["rate_ppm"]
    if month > 1:
        before = engine.terms_in_force(
            tables["contracts"],
            tables["contract_rates"],
            base_id,
            row["channel"],
            f"2025-{month - 1:02d}",
        )
        assert before.source_contract_id != amendment["contract_id"]
    with pytest.raises(WorldError):
        engine.terms_in_force(
            tables["contracts"], tables["contract_rates"], "CON-9999", "sync", "2025-01"
        )
