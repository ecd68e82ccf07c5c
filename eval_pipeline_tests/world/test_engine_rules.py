"""Rules 3, 4, 5 and 8's charge timing on small hand-made tables.

Closes the gaps mutation testing found (issue 13): the escalator's tie (units exactly at
the threshold do not escalate, on either face), rule 4 with several amendments and every
field of the returned terms, rule 3's error path (a track under no deal or under two), and
a charge dated on a period's last day.
"""

from __future__ import annotations

from datetime import date

import polars as pl
import pytest
from hypothesis import given
from hypothesis import strategies as st
from polars.testing import assert_frame_equal

from eval_pipeline.errors import WorldError
from eval_pipeline.world.label import engine
from eval_pipeline.world.label.engine import Terms

CONTRACT_SCHEMA: dict[str, type[pl.DataType]] = {
    "contract_id": pl.String,
    "artist_id": pl.String,
    "kind": pl.String,
    "amends_contract_id": pl.String,
    "effective_date": pl.Date,
    "term_end_date": pl.Date,
    "recoupment_account_id": pl.String,
}
RATE_SCHEMA: dict[str, type[pl.DataType]] = {
    "contract_id": pl.String,
    "channel": pl.String,
    "rate_ppm": pl.Int64,
    "escalator_units": pl.Int64,
    "escalated_rate_ppm": pl.Int64,
}

# CON-1 (ART-1, from 2024) is amended three times: A1 from 2025-02-01 (streaming, with an
# escalator), A2 from 2025-03-31, the last day of March (streaming again), A3 from
# 2025-05-01 (download only). CON-2 belongs to another artist and must never leak in.
CONTRACTS = pl.DataFrame(
    [
        ("CON-1", "ART-1", "base", None, date(2024, 1, 1), date(2026, 12, 31), "ACC-1"),
        ("CON-1-A1", "ART-1", "amendment", "CON-1", date(2025, 2, 1), None, None),
        ("CON-1-A2", "ART-1", "amendment", "CON-1", date(2025, 3, 31), None, None),
        ("CON-1-A3", "ART-1", "amendment", "CON-1", date(2025, 5, 1), None, None),
        ("CON-2", "ART-2", "base", None, date(2024, 1, 1), date(2026, 12, 31), "ACC-2"),
    ],
    schema=CONTRACT_SCHEMA,
    orient="row",
)
RATES = pl.DataFrame(
    [
        ("CON-1", "streaming", 150_000, 10_000, 170_000),
        ("CON-1", "download", 200_000, None, None),
        ("CON-1-A1", "streaming", 160_000, 20_000, 190_000),
        ("CON-1-A2", "streaming", 165_000, None, None),
        ("CON-1-A3", "download", 210_000, 5_000, 230_000),
        ("CON-2", "streaming", 999_000, 1, 999_999),
    ],
    schema=RATE_SCHEMA,
    orient="row",
)


def terms(channel: str, period: str, contract_id: str = "CON-1") -> Terms:
    return engine.terms_in_force(CONTRACTS, RATES, contract_id, channel, period)


@pytest.mark.parametrize(
    ("channel", "period", "expected"),
    [
        ("streaming", "2025-01", ("CON-1", 150_000, 10_000, 170_000)),
        ("streaming", "2025-02", ("CON-1-A1", 160_000, 20_000, 190_000)),
        # A2 is effective on March's last day: in force for March (rule 4 reads that day)
        ("streaming", "2025-03", ("CON-1-A2", 165_000, None, None)),
        ("streaming", "2025-06", ("CON-1-A2", 165_000, None, None)),
        ("download", "2025-04", ("CON-1", 200_000, None, None)),
        ("download", "2025-05", ("CON-1-A3", 210_000, 5_000, 230_000)),
    ],
)
def test_terms_in_force_under_several_amendments(
    channel: str, period: str, expected: tuple[str, int, int | None, int | None]
) -> None:
    source, rate, esc_units, esc_rate = expected
    assert terms(channel, period) == Terms(
        contract_id="CON-1",
        channel=channel,
        period=period,
        rate_ppm=rate,
        escalator_units=esc_units,
        escalated_rate_ppm=esc_rate,
        source_contract_id=source,
    )


def test_terms_in_force_agrees_with_the_vectorized_face() -> None:
    periods = [f"2025-{m:02d}" for m in range(1, 7)]
    table = engine.resolve_terms(CONTRACTS, RATES, periods).filter(pl.col("contract_id") == "CON-1")
    assert table.height == 2 * len(periods)
    for row in table.iter_rows(named=True):
        scalar = terms(row["channel"], row["period"])
        assert (
            scalar.rate_ppm,
            scalar.escalator_units,
            scalar.escalated_rate_ppm,
            scalar.source_contract_id,
        ) == (
            row["rate_ppm"],
            row["escalator_units"],
            row["escalated_rate_ppm"],
            row["source_contract_id"],
        )


def test_terms_in_force_of_another_base_contract_ignores_this_family() -> None:
    assert terms("streaming", "2025-06", "CON-2").source_contract_id == "CON-2"
    assert terms("streaming", "2025-06", "CON-2").rate_ppm == 999_000


def test_terms_in_force_refuses_an_unknown_contract_an_amendment_and_a_missing_channel() -> None:
    with pytest.raises(WorldError, match=r"^no base contract 'CON-9'$"):
        terms("streaming", "2025-01", "CON-9")
    # an amendment is not a base contract, even though its family has one row of kind base
    with pytest.raises(WorldError, match=r"^no base contract 'CON-1-A1'$"):
        terms("streaming", "2025-03", "CON-1-A1")
    with pytest.raises(WorldError, match=r"^contract CON-1 has no 'sync' terms in 2025-03$"):
        terms("sync", "2025-03")


def test_the_escalator_tie_does_not_escalate_on_either_face() -> None:
    """Rule 5: the escalated rate applies once the units *exceed* the threshold."""
    at, above = 10_000, 10_001
    assert engine.applicable_rate_ppm(at, 150_000, 10_000, 170_000) == 150_000
    assert engine.applicable_rate_ppm(above, 150_000, 10_000, 170_000) == 170_000
    assert engine.applicable_rate_ppm(above, 150_000, None, 170_000) == 150_000
    assert engine.applicable_rate_ppm(above, 150_000, 10_000, None) == 150_000
    assert terms("streaming", "2025-01").rate_for(at) == 150_000
    assert terms("streaming", "2025-01").rate_for(above) == 170_000
    frame = pl.DataFrame(
        {"units": [at, above], "rate": [150_000] * 2, "esc": [10_000] * 2, "to": [170_000] * 2}
    )
    args = (pl.col("units"), pl.col("rate"), pl.col("esc"), pl.col("to"))
    strict = frame.select(engine.applicable_rate_ppm_expr(*args)).to_series().to_list()
    loose = frame.select(engine.applicable_rate_ppm_expr(*args, strict=False))
    assert strict == [150_000, 170_000]
    assert loose.to_series().to_list() == [170_000, 170_000]  # the ">=" misreading


@given(
    st.integers(0, 10**7),
    st.integers(0, 1_000_000),
    st.integers(0, 1_000_000),
    st.sampled_from([-1, 0, 1]),
)
def test_both_faces_agree_at_and_around_the_threshold(
    threshold: int, rate: int, escalated: int, offset: int
) -> None:
    units = threshold + offset
    frame = pl.DataFrame(
        {"units": [units], "rate": [rate], "esc": [threshold], "to": [escalated]},
        schema={name: pl.Int64 for name in ("units", "rate", "esc", "to")},
    )
    vectorized = frame.select(
        engine.applicable_rate_ppm_expr(
            pl.col("units"), pl.col("rate"), pl.col("esc"), pl.col("to")
        )
    ).item()
    scalar = engine.applicable_rate_ppm(units, rate, threshold, escalated)
    assert scalar == vectorized == (escalated if offset > 0 else rate)


TRACK_SCHEMA: dict[str, type[pl.DataType]] = {
    "track_id": pl.String,
    "isrc": pl.String,
    "release_id": pl.String,
}
RELEASE_SCHEMA: dict[str, type[pl.DataType]] = {
    "release_id": pl.String,
    "artist_id": pl.String,
    "original_release_date": pl.Date,
}


def releases(*rows: tuple[str, str, date]) -> pl.DataFrame:
    return pl.DataFrame(list(rows), schema=RELEASE_SCHEMA, orient="row")


def tracks(*rows: tuple[str, str, str]) -> pl.DataFrame:
    return pl.DataFrame(list(rows), schema=TRACK_SCHEMA, orient="row")


def test_deals_in_force_picks_the_base_contract_whose_term_covers_the_release() -> None:
    contracts = pl.concat(
        [
            CONTRACTS,
            pl.DataFrame(
                [("CON-3", "ART-1", "base", None, date(2027, 1, 1), date(2028, 12, 31), "ACC-3")],
                schema=CONTRACT_SCHEMA,
                orient="row",
            ),
        ]
    )
    deals = engine.deals_in_force(
        tracks(("TRK-2", "ISRC-2", "REL-2"), ("TRK-1", "ISRC-1", "REL-1")),
        releases(
            ("REL-1", "ART-1", date(2026, 12, 31)),  # the term's last day: still CON-1
            ("REL-2", "ART-1", date(2027, 1, 1)),  # the next term's first day
        ),
        contracts,
    )
    assert deals.rows() == [
        ("TRK-1", "ISRC-1", "ART-1", "CON-1", "ACC-1"),
        ("TRK-2", "ISRC-2", "ART-1", "CON-3", "ACC-3"),
    ]
    assert deals.columns == ["track_id", "isrc", "artist_id", "contract_id", "account_id"]


def test_deals_in_force_refuses_a_track_under_no_deal() -> None:
    with pytest.raises(WorldError) as refused:
        engine.deals_in_force(
            tracks(
                ("TRK-1", "ISRC-1", "REL-1"),
                ("TRK-2", "ISRC-2", "REL-2"),
                ("TRK-3", "ISRC-3", "REL-3"),
            ),
            releases(
                ("REL-1", "ART-1", date(2025, 1, 1)),
                ("REL-2", "ART-1", date(2023, 12, 31)),  # before CON-1 took effect
                ("REL-3", "ART-9", date(2025, 1, 1)),  # an artist with no contract
            ),
            CONTRACTS,
        )
    assert str(refused.value) == (
        "2 track(s) have no single contract in force at release, e.g. ['TRK-2', 'TRK-3']"
    )


def test_deals_in_force_refuses_a_track_under_two_deals() -> None:
    overlapping = pl.concat(
        [
            CONTRACTS,
            pl.DataFrame(
                [("CON-4", "ART-2", "base", None, date(2025, 1, 1), date(2025, 12, 31), "ACC-4")],
                schema=CONTRACT_SCHEMA,
                orient="row",
            ),
        ]
    )
    with pytest.raises(WorldError, match=r"^1 track\(s\) have no single .*\['TRK-2'\]$"):
        engine.deals_in_force(
            tracks(("TRK-1", "ISRC-1", "REL-1"), ("TRK-2", "ISRC-2", "REL-2")),
            releases(
                ("REL-1", "ART-1", date(2025, 6, 1)),
                ("REL-2", "ART-2", date(2025, 6, 1)),  # under CON-2 and CON-4
            ),
            overlapping,
        )


def test_a_charge_belongs_to_the_first_period_whose_last_day_is_on_or_after_its_date() -> None:
    periods = ["2025-01", "2025-02", "2025-03"]
    charges = pl.DataFrame(
        {
            "account_id": ["ACC-1"] * 6,
            "charge_date": [
                date(2024, 12, 15),  # before the first period: the first period
                date(2025, 1, 31),  # January's last day: January
                date(2025, 2, 1),  # February's first day: February
                date(2025, 2, 28),  # February's last day: February
                date(2025, 3, 31),  # the last period's last day: March
                date(2025, 4, 1),  # after the last period: dropped
            ],
            "amount_micro": [1, 10, 100, 1_000, 10_000, 100_000],
        }
    )
    assert engine.charge_periods(charges, periods).rows() == [
        ("ACC-1", "2025-01", 11),
        ("ACC-1", "2025-02", 1_100),
        ("ACC-1", "2025-03", 10_000),
    ]


def test_period_end_knows_month_lengths_and_leap_years() -> None:
    assert engine.period_end("2024-02") == date(2024, 2, 29)
    assert engine.period_end("2025-04") == date(2025, 4, 30)
    assert engine.period_end("2025-12") == date(2025, 12, 31)
    with pytest.raises(WorldError, match="YYYY-MM"):
        engine.period_end("2025-13")


@pytest.mark.parametrize(
    ("amount", "fx", "rate", "message"),
    [
        ("1", "1.0000001", "0.1", "FX rate '1.0000001' has more than 6 decimal places"),
        ("1", "1", "0.12345678", "royalty rate '0.12345678' has more than 6 decimal places"),
        ("Infinity", "1", "0.1", "amount in USD must be finite, got 'Infinity'"),
        ("1", "NaN", "0.1", "FX rate must be finite, got 'NaN'"),
        ("1", "1", "ten", "royalty rate is not a number: 'ten'"),
    ],
)
def test_the_decimal_face_names_the_value_it_refuses(
    amount: str, fx: str, rate: str, message: str
) -> None:
    with pytest.raises(WorldError) as refused:
        engine.line_royalty(amount, "USD", fx, rate)
    assert str(refused.value) == message


def test_cents_follow_the_rounding_asked_for() -> None:
    assert engine.cents_from_micro(5_000) == 0  # half a cent: to the even cent
    assert engine.cents_from_micro(5_000, "half_up") == 1  # the misreading: away from zero
    assert engine.cents_from_micro(-5_000, "half_up") == -1


def test_an_unknown_currency_has_no_exponent_in_the_vectorized_face() -> None:
    exponents = (
        pl.Series(["USD", "JPY", "CHF"]).to_frame("c").select(engine.exponent_expr(pl.col("c")))
    )
    assert exponents.to_series().to_list() == [2, 0, None]
    assert exponents.dtypes == [pl.Int64]
    with pytest.raises(
        WorldError, match=r"^unsupported currency 'CHF'; known: EUR, GBP, JPY, USD$"
    ):
        engine.exponent_of("CHF")


def test_duplicate_keys_are_named_with_the_first_five() -> None:
    with pytest.raises(WorldError) as refused:
        engine._dense_codes(["a", "b", "c", "d", "e", "a"], "ISRC")
    assert str(refused.value) == "duplicate ISRC in ['a', 'b', 'c', 'd', 'e']..."
    assert engine._dense_codes(["x", "y"], "period") == {"x": 0, "y": 1}


def test_a_product_at_the_int64_guard_is_refused() -> None:
    """2**16 x (2**47 - 1) is exactly the guard, 2**63 - 2**16: refused, not let through."""
    at_guard = pl.DataFrame({"a": [2**16, 1], "b": [2**47 - 1, 1]})
    with pytest.raises(WorldError) as refused:
        engine._check_int64("gross x rate", at_guard, "a", "b")
    assert str(refused.value) == (
        "gross x rate reaches about 9.223e+18, beyond 64-bit integers; a line that large is "
        "not a royalty statement line"
    )
    below = pl.DataFrame({"a": [2**16 - 1], "b": [2**47 - 1]})
    engine._check_int64("gross x rate", below, "a", "b")
    engine._check_int64("gross x rate", below.clear(), "a", "b")


def test_a_negative_balance_is_refused_with_its_amount() -> None:
    with pytest.raises(WorldError) as refused:
        engine.recoup(-1, 0)
    assert str(refused.value) == "a recoupment balance cannot be negative: -1"


def test_div_round_rounds_half_to_even_unless_told_otherwise() -> None:
    assert [engine.div_round(n, 2) for n in (5, 7, -5)] == [2, 4, -2]
    assert engine.div_round(7, 1) == 7  # the smallest divisor allowed
    assert [engine.div_round(n, 2, "half_up") for n in (5, 7, -5)] == [
        3,
        4,
        -3,
    ]  # ties away from zero


def test_a_line_with_no_units_given_does_not_escalate() -> None:
    """The units default to none counted: a threshold of 0 is not exceeded."""
    line = engine.line_royalty_micro(
        100, "USD", 1_000_000, 100_000, escalator_units=0, escalated_rate_ppm=200_000
    )
    assert line.rate_ppm == 100_000


def test_the_period_frame_is_typed_even_when_empty() -> None:
    schema = {"period": pl.String, "period_end": pl.Date, "period_index": pl.Int64}
    assert engine.period_frame([]).schema == schema
    assert engine.period_frame(["2025-02"]).rows() == [("2025-02", date(2025, 2, 28), 0)]


def test_a_track_error_names_the_first_three_tracks() -> None:
    with pytest.raises(WorldError) as refused:
        engine.deals_in_force(
            tracks(*((f"TRK-{n}", f"ISRC-{n}", "REL-9") for n in (4, 2, 3, 1))),
            releases(("REL-9", "ART-9", date(2025, 1, 1))),
            CONTRACTS,
        )
    assert str(refused.value) == (
        "4 track(s) have no single contract in force at release, e.g. ['TRK-1', 'TRK-2', 'TRK-3']"
    )


TERMS_SCHEMA: dict[str, type[pl.DataType]] = {
    "contract_id": pl.String,
    "channel": pl.String,
    "period": pl.String,
    "rate_ppm": pl.Int64,
    "escalator_units": pl.Int64,
    "escalated_rate_ppm": pl.Int64,
    "source_contract_id": pl.String,
}


def con1_terms(**misreading: object) -> pl.DataFrame:
    periods = ["2025-01", "2025-02", "2025-03", "2025-05"]
    table = engine.resolve_terms(CONTRACTS, RATES, periods, **misreading)  # type: ignore[arg-type]
    return table.filter(pl.col("contract_id") == "CON-1")


def expected_terms(rows: list[tuple[object, ...]]) -> pl.DataFrame:
    return pl.DataFrame(rows, schema=TERMS_SCHEMA, orient="row")


def test_the_period_start_misreading_reads_the_terms_of_the_periods_first_day() -> None:
    """Terms as of the first day: A2 (from March's last day) is not in force for March,
    A1 (from February's first day) is, and A3 (from May's first day) is for May."""

    assert_frame_equal(
        con1_terms(as_of="period_start"),
        expected_terms(
            [
                ("CON-1", "download", "2025-01", 200_000, None, None, "CON-1"),
                ("CON-1", "download", "2025-02", 200_000, None, None, "CON-1"),
                ("CON-1", "download", "2025-03", 200_000, None, None, "CON-1"),
                ("CON-1", "download", "2025-05", 210_000, 5_000, 230_000, "CON-1-A3"),
                ("CON-1", "streaming", "2025-01", 150_000, 10_000, 170_000, "CON-1"),
                ("CON-1", "streaming", "2025-02", 160_000, 20_000, 190_000, "CON-1-A1"),
                ("CON-1", "streaming", "2025-03", 160_000, 20_000, 190_000, "CON-1-A1"),
                ("CON-1", "streaming", "2025-05", 165_000, None, None, "CON-1-A2"),
            ]
        ),
    )
    assert con1_terms(as_of="period_end").filter(pl.col("period") == "2025-03").row(1) == (
        "CON-1",
        "streaming",
        "2025-03",
        165_000,
        None,
        None,
        "CON-1-A2",
    )


def test_the_keep_the_escalator_misreading_fills_a_missing_escalator_from_the_base() -> None:
    """An amendment row without an escalator keeps the base row's (A2 on streaming); one
    with its own keeps its own (A1, A3); the base rows and every rate stay as read."""

    assert_frame_equal(
        con1_terms(amendment_replaces_row=False),
        expected_terms(
            [
                ("CON-1", "download", "2025-01", 200_000, None, None, "CON-1"),
                ("CON-1", "download", "2025-02", 200_000, None, None, "CON-1"),
                ("CON-1", "download", "2025-03", 200_000, None, None, "CON-1"),
                ("CON-1", "download", "2025-05", 210_000, 5_000, 230_000, "CON-1-A3"),
                ("CON-1", "streaming", "2025-01", 150_000, 10_000, 170_000, "CON-1"),
                ("CON-1", "streaming", "2025-02", 160_000, 20_000, 190_000, "CON-1-A1"),
                ("CON-1", "streaming", "2025-03", 165_000, 10_000, 170_000, "CON-1-A2"),
                ("CON-1", "streaming", "2025-05", 165_000, 10_000, 170_000, "CON-1-A2"),
            ]
        ),
    )


def test_the_keep_the_escalator_misreading_keeps_a_channel_only_an_amendment_has() -> None:
    """An amendment that adds a channel the base contract lacks has no base row to fall
    back on: the row stays, with the amendment's own terms."""
    contracts = pl.concat(
        [
            CONTRACTS,
            pl.DataFrame(
                [("CON-2-A1", "ART-2", "amendment", "CON-2", date(2025, 1, 1), None, None)],
                schema=CONTRACT_SCHEMA,
                orient="row",
            ),
        ]
    )
    rates = pl.concat(
        [
            RATES,
            pl.DataFrame(
                [("CON-2-A1", "download", 120_000, None, None)], schema=RATE_SCHEMA, orient="row"
            ),
        ]
    )
    table = engine.resolve_terms(contracts, rates, ["2025-02"], amendment_replaces_row=False)
    assert_frame_equal(
        table.filter(pl.col("contract_id") == "CON-2"),
        expected_terms(
            [
                ("CON-2", "download", "2025-02", 120_000, None, None, "CON-2-A1"),
                ("CON-2", "streaming", "2025-02", 999_000, 1, 999_999, "CON-2"),
            ]
        ),
    )
